"""The machines a plan is estimated on (`cost.Throughput`), their rates read from the committed
benchmark results (`benchmarks/results/*.json`) where a benchmark measured them, so a new
measurement moves the plan without an edit here.

Measured, on 2 quiet cores with SmolLM2-135M-Instruct:
- SFT: the pilot's own 8,192-token Levanter steps alone on the cores, read from its log by
  `benchmarks/pilot_sft_rate.py`: float32 (`pilot_sft_rate.json`, 41.0 tokens/s) and Marin's
  `p=f32,c=bfloat16` (`pilot_sft_rate_bf16.json`, 56.1 tokens/s).
- Batched attempts: 4 concurrent sampled episodes against the same one at a time
  (`sampled_batching.json`, the server's cached path): prompt tokens and new tokens' ratios.
- bf16 over float32 (`precision.json`): scoring rows, one-thread prefill and new tokens; bf16 SFT on
  a CPU without native bf16 (`precision_no_bf16_units.json`).
Stated, from reading `sim.json` and `scoring.json` (their runs time whole generations and rows, not
these rates): about 2 ms per prompt token and 12 new tokens/s, 5 ms per scored row token; model
start-up, a trial's and a sandbox command's overhead. The shared column is a 2026-12-04 run of
`benchmarks/pilot_throughput.py` at load 8-22; the GPU column is assumed, not measured.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from terminalworld.pipeline.cost import Batched, Throughput

RESULTS = Path(__file__).resolve().parents[3] / "benchmarks" / "results"


def _read(results: Path, name: str) -> dict[str, Any]:
    return json.loads((results / name).read_text())


@dataclass(frozen=True)
class Machines:
    """The plan's columns: float32 on quiet cores, the recipe's (SFT in bf16 compute), all bf16,
    a shared machine and one GPU; with the measured ratios they come from."""

    quiet: Throughput
    sft_bf16: Throughput
    bf16: Throughput
    shared: Throughput
    gpu: Throughput
    bf16_ratios: dict[str, float]
    sft_bf16_without_units: float  # bf16 SFT over float32 on a CPU without native bf16

    def all(self) -> list[Throughput]:
        """The columns in the order the plan prints them."""
        return [self.quiet, self.sft_bf16, self.shared, self.bf16, self.gpu]


@functools.cache
def machines(results: Path = RESULTS) -> Machines:
    """The columns, from the benchmark results under `results`."""
    batching = _read(results, "sampled_batching.json")["ratio_to_one_at_a_time"]["cached"]
    batched = {int(n): Batched(prefill=r["prefill"], generate=r["generate"]) for n, r in batching.items()}
    precision = _read(results, "precision.json")
    gen = precision["generation_one_thread"]
    ratios = {
        "sft": precision["sft"]["speedup_bf16_compute"],
        "score": precision["scoring"]["speedup_bfloat16"],
        "prefill": gen["float32"]["prefill_s"] / gen["bfloat16"]["prefill_s"],
        "generate": gen["speedup_bfloat16"],
    }
    sft_f32 = _read(results, "pilot_sft_rate.json")["tokens_per_s"]
    sft_bf16 = _read(results, "pilot_sft_rate_bf16.json")["tokens_per_s"]
    quiet = Throughput(
        name="2 cores quiet",
        sft_tokens_per_s=sft_f32,
        score_s_per_token=0.005,
        prefill_s_per_token=0.002,
        generate_tokens_per_s=12.0,
        startup_s=60.0,
        trial_overhead_s=2.0,
        sandbox_command_s=0.1,
        source="the project's committed benchmarks (benchmarks/results/sim.json, scoring.json, "
        "sampled_batching.json, pilot_sft_rate.json: the pilot's own SFT steps)",
        batched=batched,
    )
    recipe = quiet.scaled(
        name="2 cores, SFT bf16",
        source="the quiet figures with SFT at the pilot's own bf16 steps' rate "
        "(benchmarks/results/pilot_sft_rate_bf16.json)",
        sft=sft_bf16 / sft_f32,
    )
    shared = Throughput(
        name="2 cores shared",
        sft_tokens_per_s=8.6,
        score_s_per_token=0.0086,
        prefill_s_per_token=0.0086,
        generate_tokens_per_s=1.5,
        startup_s=120.0,
        trial_overhead_s=8.0,
        sandbox_command_s=0.3,
        source="benchmarks/pilot_throughput.py at load 8-22 on 2 cores (a shared machine), 2026-12-04; "
        "batched attempts: benchmarks/results/sampled_batching.json",
        batched=batched,
    )
    gpu = Throughput(
        name="1 GPU (H200)",
        sft_tokens_per_s=20_000.0,
        score_s_per_token=0.00002,
        prefill_s_per_token=0.00002,
        generate_tokens_per_s=150.0,
        startup_s=45.0,
        trial_overhead_s=1.0,
        sandbox_command_s=0.1,
        source="assumed, not measured (conservative for a 135M model on one H200)",
    )
    return Machines(
        quiet=quiet,
        sft_bf16=recipe,
        bf16=recipe.scaled(
            name="2 cores bf16",
            source="the quiet figures times bf16's measured ratios over float32 (benchmarks/results/"
            "precision.json; SFT: the pilot's own bf16 steps, pilot_sft_rate_bf16.json)",
            score=ratios["score"],
            prefill=ratios["prefill"],
            generate=ratios["generate"],
        ),
        shared=shared,
        gpu=gpu,
        bf16_ratios=ratios,
        sft_bf16_without_units=_read(results, "precision_no_bf16_units.json")["sft"]["speedup_bf16_compute"],
    )
