"""World-model probe of the write-up: env-token PPL of the base and all nine Phase 0 checkpoints on
the 100 held-out trajectories, and the comparison table.

    python experiments/world_model_probe.py          # print the plan
    python experiments/world_model_probe.py --run    # score, compare, export the evaluation sets

The base model renders with an SFT checkpoint's chat template, byte-identical to the SFT framing.
"""

import sys

from fray.types import ResourceConfig
from phase0_grid import BASE_MODEL, grid, heldout

from terminalworld.eval import steps as evaluation
from terminalworld.pipeline.entry import main
from terminalworld.report import steps as reports

# Scoring on CPU is an estimate of what the probe needs, not a measurement: no GPU figure exists
# yet; the probe's projected time on one GPU is pending benchmarks/results/gpu.json
# (benchmarks/gpu.py; docs/phase0.md, "Accelerator estimates").
VERSION = "2026.11.04"
cells = grid()
scores = [
    evaluation.scores(
        model=BASE_MODEL,
        model_name="base",
        heldout=heldout,
        chat_template_from=cells[("full", "10K")],
        resources=ResourceConfig.with_cpu(),
        version=VERSION,
    )
]
for (arm, scale), ckpt in cells.items():
    scores.append(
        evaluation.scores(
            model=ckpt,
            model_name=f"{arm}-{scale}",
            heldout=heldout,
            resources=ResourceConfig.with_cpu(),
            version=VERSION,
        )
    )
report = reports.report(scores=scores, base="base", reference="full-1M", version=VERSION)

# The held-out set and every checkpoint's scores as Hugging Face datasets, named as the write-up
# published its own (SWE-ZERO-{scale}-Qwen3-1.7B-Base{,-ECHO}-eval). Saved beside the scores;
# PUSH_TO_HUB = True also publishes them, with the token in $HF_TOKEN.
HUB_ORG = "marin-community"
PUSH_TO_HUB = False
hub_repos = {"heldout": f"{HUB_ORG}/SWE-ZERO-heldout-100", "base": f"{HUB_ORG}/SWE-ZERO-Qwen3-1.7B-Base-eval"}
hub_repos |= {f"{arm}-{scale}": f"{HUB_ORG}/SWE-ZERO-{scale}-Qwen3-1.7B-Base-{arm}-eval" for arm, scale in cells}
eval_sets = evaluation.eval_sets(
    heldout=heldout, scores=scores, hub_repos=hub_repos, push=PUSH_TO_HUB, token_env="HF_TOKEN", version=VERSION
)

if __name__ == "__main__":
    sys.exit(main([report, eval_sets], __doc__.split("\n\n")[0]))
