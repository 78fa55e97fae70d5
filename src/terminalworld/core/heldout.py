"""The held-out row: the world-model probe's unit of evaluation, in the write-up's schema.

`{instance_id, repo, system, task, prefix: [[cmd, env], ...], target_cmd, target_env}`: the first
`context_turns` (command, observation) pairs of a trajectory as context, the next pair as target,
where `cmd` is the full assistant message and `env` the full observation message. This module
writes, validates and reads such rows, and turns one back into a trajectory.
"""

from __future__ import annotations

from typing import Any

from terminalworld.core.records import BadLine, iter_records
from terminalworld.core.trajectories import Trajectory, Turn
from terminalworld.errors import TrajectoryError

HELDOUT_FIELDS = ("instance_id", "task", "prefix", "target_cmd", "target_env")


def heldout_trajectory(row: dict[str, Any]) -> Trajectory:
    """A held-out row as a trajectory: the prefix pairs, then the target pair."""
    turns = (*tuple(Turn(c, e) for c, e in row["prefix"]), Turn(row["target_cmd"], row["target_env"]))
    return Trajectory(row["instance_id"], row.get("repo"), row.get("system"), row["task"], turns, "heldout")


def heldout_row(traj: Trajectory, context_turns: int) -> dict[str, Any]:
    """The write-up's schema: the first `context_turns` (command, observation) pairs as prefix, the next
    pair as target; `cmd` and `env` are the full assistant and observation messages."""
    pairs = [[t.action, t.observation] for t in traj.turns[: context_turns + 1]]
    return {
        "instance_id": traj.instance_id,
        "repo": traj.repo,
        "system": traj.system,
        "task": traj.task,
        "prefix": pairs[:context_turns],
        "target_cmd": pairs[context_turns][0],
        "target_env": pairs[context_turns][1],
    }


def observed_prefix(traj: Trajectory) -> int:
    """How many leading turns are complete (action, observation) pairs."""
    n = 0
    for t in traj.turns:
        if t.observation is None:
            break
        n += 1
    return n


def read_heldout(path: str) -> list[dict[str, Any]]:
    """Held-out rows; a malformed row is an error naming file and line."""
    rows = []
    for rec in iter_records(path):
        if isinstance(rec, BadLine):
            raise TrajectoryError(f"{rec.file}:{rec.line}", rec.reason)
        problem = _heldout_problem(rec.value)
        if problem:
            raise TrajectoryError(f"{rec.file}:{rec.line}", problem)
        rows.append(rec.value)
    return rows


def _heldout_problem(row: Any) -> str | None:
    """What makes a record not a held-out row, or None."""
    if not isinstance(row, dict):
        return f"a held-out row is a JSON object, not {type(row).__name__}"
    missing = [k for k in HELDOUT_FIELDS if k not in row]
    if missing:
        return f"held-out row lacks {', '.join(missing)}"
    for k in ("instance_id", "task", "target_cmd", "target_env"):
        if not isinstance(row[k], str):
            return f"held-out row field {k!r} is {type(row[k]).__name__}, not a string"
    if row.get("system") is not None and not isinstance(row["system"], str):
        return "held-out row field 'system' is neither a string nor null"
    pairs = row["prefix"]
    if not isinstance(pairs, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in pairs
    ):
        return "held-out row field 'prefix' is not a list of [command, observation] string pairs"
    return None
