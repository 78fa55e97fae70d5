"""Trial rows and the summary of a Harbor job: pass@1 with its standard error, unbiased pass@k,
and Marin's accounting of scored, unscored and errored trials.

Errors are split as Marin's Harbor runner splits them, with one rule on top: only a failure of the
machinery may leave a trial unscored, and each such kind is named here. An agent error (timeout,
context length, non-zero exit) is the agent's failure and is scored with whatever the verifier
found. An infrastructure error leaves the trial unscored, since it says nothing about the agent:
a failure before the agent's first command (`SETUP_PHASES`: the environment's or the agent's start,
which nothing the agent did can cause), or one of `INFRASTRUCTURE_ERRORS` (the model's or the
simulator's transport, a cancelled job, a host without a sandbox). Anything else is a failed
submission, scored 0: the verifier failed on what the agent left (it timed out, wrote no reward, an
unreadable or refused one, its folders could not be set up), or any error no kind names, since
unscored an agent could take its own failures out of pass@1's denominator. `harbor_result.json`
keeps Marin's field names so Marin's tooling reads ours.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

from terminalworld.agent import command_steps, process
from terminalworld.errors import ResultsError

SOLVED = 0.99  # Marin's threshold: a reward at or above it is a solve
AGENT_ERRORS = frozenset(
    {
        "AgentTimeoutError",
        "NonZeroAgentExitCodeError",
        "ContextLengthExceededError",
        "OutputLengthExceededError",
        "AgentError",
    }
)


INFRASTRUCTURE_ERRORS = frozenset(
    {
        "CancelledError",  # the job was interrupted
        "KeyboardInterrupt",
        "SandboxUnavailable",  # no sandbox on this host
        "EnvironmentStartTimeoutError",
        # The model's or the simulator's endpoint (urllib, http.client, sockets).
        "URLError",
        "HTTPError",
        "RemoteDisconnected",
        "IncompleteRead",
        "ConnectionRefusedError",
        "ConnectionResetError",
    }
)
SETUP_PHASES = ("environment_setup", "agent_setup")  # an error before `agent_execution` started


def error_kind(exc: str | None, result: dict[str, Any] | None = None) -> str | None:
    """Whose failure a trial's exception is: the agent's (scored with its reward), the
    infrastructure's (unscored: a named kind, or raised before the agent ran, read from Harbor's
    trial `result`) or the submission's (everything else; scored 0)."""
    if exc is None:
        return None
    if exc in AGENT_ERRORS:
        return "agent"
    started = bool(((result or {}).get("agent_execution") or {}).get("started_at"))
    if exc in INFRASTRUCTURE_ERRORS or (result is not None and not started):
        return "infrastructure"
    return "submission"


def trial_row(result: dict[str, Any]) -> dict[str, Any]:
    """One row per trial from Harbor's trial `result.json`: task, attempt key, reward, exception
    type, whether it is scored, turns, tokens and seconds per phase."""
    exc = (result.get("exception_info") or {}).get("exception_type")
    verifier = result.get("verifier_result") or {}
    rewards = verifier.get("rewards") or {}
    agent = result.get("agent_result") or {}
    meta = agent.get("metadata") or {}
    kind = error_kind(exc, result)
    scored = (bool(rewards) and kind in (None, "agent")) or kind == "submission"

    def seconds(phase: str) -> float | None:
        return _span(result.get(phase) or {})

    return {
        "task": result["task_name"],
        "trial": result["trial_name"],
        "reward": (0.0 if kind == "submission" else float(rewards.get("reward", 0.0))) if scored else None,
        "scored": scored,
        "exception": exc,
        "error_kind": kind,
        "outcome": meta.get("outcome"),
        "turns": meta.get("turns"),
        "format_errors": meta.get("format_errors"),
        "input_tokens": agent.get("n_input_tokens"),
        "output_tokens": agent.get("n_output_tokens"),
        "seconds": {p: seconds(p) for p in ("environment_setup", "agent_setup", "agent_execution", "verifier")}
        | {"trial": _span(result), "generation": meta.get("generation_s"), "commands": meta.get("command_s")},
    }


def _span(result: dict[str, Any]) -> float | None:
    if not result.get("started_at") or not result.get("finished_at"):
        return None
    return (
        datetime.fromisoformat(result["finished_at"]) - datetime.fromisoformat(result["started_at"])
    ).total_seconds()


def read_trials(job_dir: Path, *, agent: str = "model", tasks: Path | None = None) -> list[dict[str, Any]]:
    """Rows of every trial of a Harbor job folder that wrote its `result.json`, sorted by trial,
    each with the steps it reached (of a fix: `process`; of a command task: `command_steps`; the
    tasks' files and references come from the task folders under `tasks`)."""
    rows = []
    for path in sorted(job_dir.glob("*/result.json")):
        try:
            row = trial_row(json.loads(path.read_text()))
        except (json.JSONDecodeError, KeyError) as e:
            raise ResultsError(f"{path}: not a Harbor trial result ({e})") from None
        solved = None if row["reward"] is None else row["reward"] >= SOLVED
        steps = command_steps.trial_process(path.parent, agent=agent, tasks=tasks, solved=solved)
        row["process"] = steps or process.trial_process(path.parent, agent=agent, tasks=tasks, solved=solved)
        rows.append(row)
    return sorted(rows, key=lambda r: (r["task"], r["trial"]))


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate 1 - C(n-c, k) / C(n, k) of solving in k of n attempts with c solves."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def summarize(rows: list[dict[str, Any]], *, n_attempts: int, n_tasks: int, dataset: str) -> dict[str, Any]:
    """The job's summary: pass@1 (mean reward over scored trials) and its standard error, pass@k for
    every k up to the fewest scored attempts of a task, and the counts and errors Marin reports."""
    scored = [r for r in rows if r["scored"]]
    rewards = [r["reward"] for r in scored]
    n = len(rewards)
    mean = sum(rewards) / n if n else None
    stderr = math.sqrt(sum((x - mean) ** 2 for x in rewards) / (n - 1) / n) if n > 1 else None
    by_task: dict[str, list[float]] = defaultdict(list)
    for r in scored:
        by_task[r["task"]].append(r["reward"])
    k_max = min((len(v) for v in by_task.values()), default=0)
    at_k = {
        str(k): sum(pass_at_k(len(v), sum(x >= SOLVED for x in v), k) for v in by_task.values()) / len(by_task)
        for k in range(1, k_max + 1)
    }
    errors = Counter(f"{r['error_kind']}:{r['exception']}" for r in rows if r["exception"])
    attempted = n_tasks * n_attempts
    errors["infrastructure:no_result_written"] += attempted - len(rows)
    solved = sum(x >= SOLVED for x in rewards)
    steps = process.rates(rows)
    return {
        "dataset": dataset,
        "benchmark_trials": attempted,
        "attempted_trials": attempted,
        "scored_trials": n,
        "solved_trials": solved,
        "unscored_trials": attempted - n,
        "errors": {k: v for k, v in sorted(errors.items()) if v},
        "mean_reward": mean,
        "accuracy": solved / n if n else None,
        "pass_at_1": mean,
        "pass_at_1_stderr": stderr,
        "pass_at_k": at_k,
        # Per task [scored attempts, solves]: what paired comparisons between checkpoints need (`compare`).
        "per_task": {t: [len(v), sum(x >= SOLVED for x in v)] for t, v in sorted(by_task.items())},
        # One definition (`process`): per trial the share of replies with exactly one bash block,
        # averaged over scored trials: what a model too weak to solve anything still shows.
        "valid_action_rate": steps["valid_reply_share"]["rate"],
        "process": steps,
        "tasks": n_tasks,
        "n_attempts": n_attempts,
        "agent_errors": sum(v for k, v in errors.items() if k.startswith("agent:")),
        "submission_errors": sum(v for k, v in errors.items() if k.startswith("submission:")),
        "infrastructure_errors": sum(v for k, v in errors.items() if k.startswith("infrastructure:")),
    }


MARIN_FIELDS = (
    "dataset",
    "benchmark_trials",
    "attempted_trials",
    "scored_trials",
    "solved_trials",
    "unscored_trials",
    "errors",
    "mean_reward",
    "accuracy",
)


def harbor_result(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary under Marin's `harbor_result.json` field names only."""
    return {k: summary[k] for k in MARIN_FIELDS}
