"""What a step will cost, from measured throughput: an experiment states each step's work (tokens
trained, tokens scored, trials and their turns) and a `Throughput` turns it into seconds.

The figures are per machine: `benchmarks/pilot_throughput.py` measures them (SFT tokens/s with
Levanter, teacher-forced scoring seconds per token, HF generation tokens/s and prefill seconds per
token), and the experiment quotes them with the load they were measured under. Generations decoded
together in one batch (an agent grade's concurrent sampled attempts, `core.batching`) run at a
measured ratio of those rates (`Batched`, `benchmarks/sampled_batching.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class Batched:
    """Prompt and new-token speed of a batch of concurrent generations over the same generations one
    at a time, measured side by side."""

    prefill: float
    generate: float


ONE_AT_A_TIME = Batched(prefill=1.0, generate=1.0)


@dataclass(frozen=True, kw_only=True)
class Throughput:
    """One machine's measured (or, where said, assumed) rates for a 135M model."""

    name: str
    sft_tokens_per_s: float
    score_s_per_token: float  # teacher-forced forward over a whole row, per row token
    prefill_s_per_token: float  # a generation's prompt, per prompt token
    generate_tokens_per_s: float  # after a realistic prefix, KV cache on
    startup_s: float  # loading a model (and, for SFT, compiling the step) once per step
    trial_overhead_s: float  # Harbor and the sandbox around one agent trial
    sandbox_command_s: float  # one recorded or task-checking command in the sandbox
    source: str  # how the figures were obtained: measured (with the load) or assumed
    # Measured batches: rows decoded together -> their speed over one at a time (none: no gain assumed).
    batched: dict[int, Batched] = field(default_factory=dict)

    def batch_gain(self, rows: int) -> Batched:
        """The speed-up of `rows` generations decoded together: the ratio measured at the largest
        batch not above `rows` (a larger batch is taken to be no slower per token, as decoding a
        135M model is bound by reading its weights), none below the smallest measured."""
        measured = [n for n in self.batched if n <= rows]
        return self.batched[max(measured)] if rows > 1 and measured else ONE_AT_A_TIME

    def scaled(self, *, name: str, source: str, sft=1.0, score=1.0, prefill=1.0, generate=1.0) -> Throughput:
        """These rates with each stage's speed multiplied by a measured ratio (another precision's
        speed over this one's, measured side by side): `sft`, `score` (teacher-forced rows),
        `prefill` (prompt tokens) and `generate` (new tokens)."""
        return replace(
            self,
            name=name,
            source=source,
            sft_tokens_per_s=self.sft_tokens_per_s * sft,
            score_s_per_token=self.score_s_per_token / score,
            prefill_s_per_token=self.prefill_s_per_token / prefill,
            generate_tokens_per_s=self.generate_tokens_per_s * generate,
        )


@dataclass(frozen=True, kw_only=True)
class Work:
    """A step's work: what it trains, scores and generates."""

    sft_tokens: int = 0
    scored_tokens: int = 0
    generations: int = 0  # prompts, each prefilled once
    rows: int = 1  # generations decoded together in one batch (concurrent attempts)
    prompt_tokens: int = 0  # summed over the generations
    new_tokens: int = 0  # summed over the generations
    trials: int = 0
    sandbox_commands: int = 0
    models: int = 1  # models loaded (startup_s each)

    def seconds(self, t: Throughput) -> float:
        """The step's estimated wall time on `t`."""
        gain = t.batch_gain(self.rows)
        return (
            self.models * t.startup_s
            + self.sft_tokens / t.sft_tokens_per_s
            + self.scored_tokens * t.score_s_per_token
            + self.prompt_tokens * t.prefill_s_per_token / gain.prefill
            + self.new_tokens / (t.generate_tokens_per_s * gain.generate)
            + self.trials * t.trial_overhead_s
            + self.sandbox_commands * t.sandbox_command_s
        )


def hours(seconds: float) -> str:
    """A duration as `1h 05m` or `12m` or `40s`."""
    if seconds < 60:
        return f"{seconds:.0f}s"
    m = round(seconds / 60)
    return f"{m // 60}h {m % 60:02d}m" if m >= 60 else f"{m}m"


def cost_table(works: dict[str, Work], machines: list[Throughput]) -> str:
    """A plain-text table: each step's estimate on each machine, and the totals."""
    width = max(len(n) for n in works) + 2
    head = "step".ljust(width) + "".join(m.name.rjust(16) for m in machines)
    lines = [head, "-" * len(head)]
    totals = [0.0] * len(machines)
    for n, w in works.items():
        secs = [w.seconds(m) for m in machines]
        totals = [a + b for a, b in zip(totals, secs, strict=True)]
        lines.append(n.ljust(width) + "".join(hours(s).rjust(16) for s in secs))
    lines.append("-" * len(head))
    lines.append("total".ljust(width) + "".join(hours(s).rjust(16) for s in totals))
    lines += [f"{m.name}: {m.source}" for m in machines]
    return "\n".join(lines)


def stage_seconds(works: dict[str, Work], t: Throughput) -> dict[str, float]:
    """Estimated seconds per stage on `t`, a stage being the first word of a step's name
    (`sft full-x1` is in `sft`), in the order the stages first appear."""
    out: dict[str, float] = {}
    for n, w in works.items():
        stage = n.split()[0]
        out[stage] = out.get(stage, 0.0) + w.seconds(t)
    return out


def projection_table(
    works: dict[str, Work], machines: list[Throughput], before: dict[str, float] | None = None, label: str = ""
) -> str:
    """Each stage's estimate on each machine and the totals; with `before` (a measured run's seconds
    per stage, `label` naming that run), that run's column first."""
    cols = [stage_seconds(works, m) for m in machines]
    measured = [] if before is None else [before]
    stages = list(dict.fromkeys([*(before or {}), *(s for c in cols for s in c)]))
    width = max(len(s) for s in [*stages, "total"]) + 2
    head = (
        "stage".ljust(width) + "".join(label.rjust(22) for _ in measured) + "".join(m.name.rjust(22) for m in machines)
    )
    lines = [head, "-" * len(head)]
    for stage in stages:
        was = "".join((hours(b[stage]) if stage in b else "-").rjust(22) for b in measured)
        lines.append(stage.ljust(width) + was + "".join(hours(c.get(stage, 0.0)).rjust(22) for c in cols))
    lines.append("-" * len(head))
    totals = "".join(hours(sum(c.values())).rjust(22) for c in [*measured, *cols])
    lines.append("total".ljust(width) + totals)
    return "\n".join(lines)


# Each step kind's work from the arguments its step is built with. The prompt sizes are the pilot's
# measured shapes: an agent's first prompt is about 900 tokens and each turn adds a reply and an
# observation (about 400); a probe prompt about 800; a closed-loop turn about 2,500.
AGENT_PROMPT, AGENT_TURN_GROWTH, PROBE_PROMPT, LOOP_PROMPT = 900, 400, 800, 2500
COMMANDS_PER_TRAJECTORY, COMMANDS_PER_TASK = 22, 30  # recorded; to find and check one generated task


def sft_work(*, steps: int, done: int, batch_size: int, seq_len: int) -> Work:
    """A continued SFT step from step `done` to `steps`."""
    return Work(sft_tokens=(steps - done) * batch_size * seq_len)


def probe_work(*, rows: int, row_tokens: int) -> Work:
    """One model's teacher-forced forward over each held-out row (every depth in the same forward)."""
    return Work(scored_tokens=rows * row_tokens)


def agent_work(*, tasks: int, attempts: int, harness: Any, concurrent: int) -> Work:
    """One model's sampled attempts on a task suite under `harness` (its `max_turns` of at most
    `max_tokens_per_turn`), `concurrent` of them decoded together."""
    trials, turns, tokens_per_turn = tasks * attempts, harness.max_turns, harness.max_tokens_per_turn
    prompt = sum(AGENT_PROMPT + AGENT_TURN_GROWTH * t for t in range(turns))
    return Work(
        trials=trials,
        generations=trials * turns,
        rows=min(concurrent, trials),
        prompt_tokens=trials * prompt,
        new_tokens=trials * turns * tokens_per_turn,
    )


def sim_work(*, heldout: int, probes: int, loop_turns: int, decoding: Any, row_tokens: int) -> Work:
    """One model's simulator grade: tier 1 on `heldout` rows, tier 2 on `probes`, tier 3 over
    `loop_turns` turns of the solver's loop (0: not graded), each sampling `decoding.max_new_tokens`."""
    new_tokens = decoding.max_new_tokens
    generations = heldout + probes + loop_turns
    return Work(
        models=2 + bool(loop_turns),
        generations=generations,
        prompt_tokens=heldout * row_tokens + probes * PROBE_PROMPT + loop_turns * LOOP_PROMPT,
        new_tokens=generations * new_tokens,
    )


def record_work(*, trajectories: int, solving: int, tasks: int) -> Work:
    """Recording trajectories and solving episodes, and making (finding and checking) tasks."""
    return Work(
        models=0, sandbox_commands=COMMANDS_PER_TRAJECTORY * (trajectories + solving) + COMMANDS_PER_TASK * tasks
    )
