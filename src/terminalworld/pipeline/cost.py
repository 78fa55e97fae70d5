"""What a step will cost, from measured throughput: an experiment states each step's work (tokens
trained, tokens scored, trials and their turns) and a `Throughput` turns it into seconds.

The figures are per machine: `benchmarks/pilot_throughput.py` measures them (SFT tokens/s with
Levanter, teacher-forced scoring seconds per token, HF generation tokens/s and prefill seconds per
token), and the experiment quotes them with the load they were measured under.
"""

from __future__ import annotations

from dataclasses import dataclass


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


@dataclass(frozen=True, kw_only=True)
class Work:
    """A step's work: what it trains, scores and generates."""

    sft_tokens: int = 0
    scored_tokens: int = 0
    generations: int = 0  # prompts, each prefilled once
    prompt_tokens: int = 0  # summed over the generations
    new_tokens: int = 0  # summed over the generations
    trials: int = 0
    sandbox_commands: int = 0
    models: int = 1  # models loaded (startup_s each)

    def seconds(self, t: Throughput) -> float:
        """The step's estimated wall time on `t`."""
        return (
            self.models * t.startup_s
            + self.sft_tokens / t.sft_tokens_per_s
            + self.scored_tokens * t.score_s_per_token
            + self.prompt_tokens * t.prefill_s_per_token
            + self.new_tokens / t.generate_tokens_per_s
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
