"""Phase 0's agent grade: SWE-bench Verified pass@1 of the base and the six agent checkpoints, and
Terminal-Bench 2.0 of the base and the 1M agents, each served with vLLM and graded by Harbor.

    python experiments/phase0_swebench.py          # print the plan (starts nothing)
    python experiments/phase0_swebench.py --run    # launch through Marin

Arms (a) assistant-only and (b) full-transcript at 10K / 100K / 1M; 3 attempts at 1M, as in the
write-up (its 1M figures are 3-repetition means). Arm (c) trains on observations only and never
learns to emit a command, so it is not graded as an agent (its pass@1 would be 0 by construction).
The harness is the one the checkpoints were trained on (SWE-ZERO's format, `agent.harbor.agent`), with a
32768-token context; Terminal-Bench 2.0 uses Terminus-2 with 5 attempts at temperature 0.6, as
ECHO reports it. Each step needs one GPU for vLLM and the secret DAYTONA_API_KEY in its
environment for Harbor's Daytona sandboxes; Harbor runs in its own pinned environment.
"""

import sys
from dataclasses import replace
from pathlib import Path

from fray.types import ResourceConfig
from phase0_grid import BASE_MODEL, SCALES, grid

from terminalworld.agent import steps as agent
from terminalworld.agent.benchmarks import Benchmark
from terminalworld.agent.harness import HarnessConfig
from terminalworld.pipeline.entry import main

VERSION = "2026.12.03"
GPU = ResourceConfig.with_gpu("H100", count=1)
ATTEMPTS = {"10K": 1, "100K": 1, "1M": 3}
HARNESS = HarnessConfig(max_turns=100, context_tokens=32768, max_tokens_per_turn=4096, temperature=0.0, seed=0)

# Marin's own Harbor policy pins this dataset and revision; the 100 folder names are committed beside
# this file (provenance in its header) and checked against the download.
SWEBENCH = Benchmark(
    name="swebench-verified-100",
    hf_dataset="DCAgent2/swebench-verified-random-100-folders",
    revision="0c553bd6d05d451907afb8db31dba84759ccc993",
    instance_ids=tuple(
        line.strip()
        for line in (Path(__file__).parent / "swebench_verified_100.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ),
)
TERMINAL_BENCH = Benchmark(name="terminal-bench-2.0", registry="terminal-bench@2.0")

cells = grid()
models = {"base": BASE_MODEL} | {
    f"{arm}-{scale}": cells[(arm, scale)] for arm in ("assistant", "full") for scale in SCALES
}
grades = [
    agent.harbor_grade(
        model=model,
        model_name=name,
        benchmark=SWEBENCH,
        agent="model",
        harness=HARNESS,
        n_attempts=ATTEMPTS.get(name.rsplit("-", 1)[-1], 1),
        resources=GPU,
        version=VERSION,
    )
    for name, model in models.items()
]
grades += [
    agent.harbor_grade(
        model=models[name],
        model_name=name,
        benchmark=TERMINAL_BENCH,
        agent="terminus-2",
        harness=replace(HARNESS, temperature=0.6),
        n_attempts=5,
        resources=GPU,
        version=VERSION,
    )
    for name in ("base", "assistant-1M", "full-1M")
]

if __name__ == "__main__":
    sys.exit(main(grades, __doc__.split("\n\n")[0]))
