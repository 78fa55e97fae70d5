"""World-model probe (seeds): env-token PPL of the base and all nine Phase 0 checkpoints on the
100 held-out trajectories, and the comparison table.

    python experiments/world_model_probe.py          # print the plan
    python experiments/world_model_probe.py --run    # score and compare

The base model renders with an SFT checkpoint's chat template, byte-identical to the SFT framing.
"""

from fray.types import ResourceConfig
from phase0_grid import BASE_MODEL, grid, heldout

from terminalworld.pipeline import builders as pipeline

VERSION = "2026.11.04"
cells = grid()
template_from = cells[("full", "10K")]
scores = {
    "base": pipeline.scores(
        BASE_MODEL, "base", heldout, 100, VERSION, chat_template_from=template_from, resources=ResourceConfig.with_cpu()
    )
}
for (arm, scale), ckpt in cells.items():
    name = f"{arm}-{scale}"
    scores[name] = pipeline.scores(ckpt, name, heldout, 100, VERSION, resources=ResourceConfig.with_cpu())
report = pipeline.report(scores, base="base", reference="full-1M", version=VERSION)

if __name__ == "__main__":
    pipeline.main([report], __doc__.split("\n\n")[0])
