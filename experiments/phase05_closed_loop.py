"""Phase 0.5 and the evaluation tiers at production scale: the base and arms (b) full-transcript
and (c) user-only at 10K / 100K / 1M graded as simulators, served with vLLM on one H100 each.

    python experiments/phase05_closed_loop.py          # print the plan (starts nothing)
    python experiments/phase05_closed_loop.py --run    # launch through Marin

Tier 1: free-running generation of the 100 held-out targets (greedy, 2,048-token cap), compared
with the real outputs: exact match, similarity, line F1, length ratio, the write-up's degeneration
rule. Tier 2: 500 probes with known answers (50 per command family) from code trees unseen in
training, made in the sandbox on CPU. Tier 3: the closed loop on 50 generated bug-fix tasks from
unseen trees, the solver's script as the agent (the same commands for every simulator, so their
divergence is comparable), each command also run in a real shadow sandbox, with the real verifier
on the shadow repository. Arm (a) never trains on observations and is left out. The base renders
with an SFT checkpoint's chat template, as in the world-model probe.
"""

import sys

from fray.types import ResourceConfig
from phase0_grid import BASE_MODEL, SCALES, grid, heldout, subsets

from terminalworld.agent import steps as agent
from terminalworld.agent.harness import HarnessConfig
from terminalworld.pipeline.entry import main
from terminalworld.sim import steps as sim

VERSION = "2026.12.03"
# One H100 per grade is an estimate, not a measurement: no GPU figure exists yet; it is pending
# benchmarks/results/gpu.json (benchmarks/gpu.py; docs/phase0.md, "Accelerator estimates").
GPU = ResourceConfig.with_gpu("H100", count=1)
DECODING = sim.Decoding(backend="vllm", device="cuda", dtype="bfloat16", max_new_tokens=2048)
LOOP = HarnessConfig(max_turns=30, context_tokens=32768, max_tokens_per_turn=2048)  # tier 3's episodes
LARGEST = max(SCALES.values())

cells = grid()
models = {"base": BASE_MODEL} | {f"{arm}-{scale}": cells[(arm, scale)] for arm in ("full", "user") for scale in SCALES}
probes = sim.probe_set(n=500, seed=0, unseen_in=subsets, size=LARGEST, version=VERSION)
tasks = agent.task_suite(purpose="closed-loop", n=50, seed=0, unseen_in=subsets, size=LARGEST, version=VERSION)
grades = [
    sim.sim_grade(
        model=model,
        model_name=name,
        decoding=DECODING,
        harness=harness,
        chat_template_from=cells[("full", "10K")] if name == "base" else None,
        resources=GPU,
        version=VERSION,
        **source,
    )
    for name, model in models.items()
    for source, harness in (({"heldout": heldout}, None), ({"probes": probes}, None), ({"tasks": tasks}, LOOP))
]

if __name__ == "__main__":
    sys.exit(main(grades, __doc__.split("\n\n")[0]))
