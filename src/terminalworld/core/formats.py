"""Converters from public agent-trajectory formats into `Trajectory`.

Recognised records (samples of each live in the real fixtures):

- SWE-ZERO rows: `{instance_id, repo | metadata.repo, messages}`; mini-coder rows look the same
  without a repo.
- mini-swe-agent `.traj.json`: a bare list of chat messages (v1 ```` ```bash ````, v2
  ```` ```mswea_bash_command ```` fences), or `{messages, info}` as newer versions save it.
- nebius SWE-agent rows: `{instance_id, trajectory: [{role: system|user|ai, text, system_prompt}]}`.
- Terminus-2 rows (Nemotron terminal corpus): `{conversations, agent, task, trial_name}`.
- AgentInstruct OS rows: `{id, conversations}`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from terminalworld.core.records import BadLine, Record, iter_records
from terminalworld.core.trajectories import Trajectory, trajectory_from_messages
from terminalworld.errors import InputError, TrajectoryError


def _messages(value: Any, name: str, key: str) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise TrajectoryError(name, f"missing field {key!r} (a list of messages)")
    return value


def from_swe_zero(row: dict[str, Any], name: str) -> Trajectory:
    """A SWE-ZERO (or mini-coder) row: `instance_id`, `repo` and `trajectory_format` (default
    mini-swe-agent-1) from the row or its `metadata`; other top-level fields except `metadata` are
    kept as metadata. Raises `TrajectoryError` naming `name` on a missing `instance_id` or `messages`,
    or malformed messages."""
    meta = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
    instance_id = row.get("instance_id", meta.get("instance_id"))
    if not isinstance(instance_id, str) or not instance_id:
        raise TrajectoryError(name, "missing field 'instance_id'")
    repo = row.get("repo", meta.get("repo"))
    extra = {
        k: v for k, v in row.items() if k not in ("instance_id", "repo", "messages", "metadata", "trajectory_format")
    }
    return trajectory_from_messages(
        _messages(row.get("messages"), name, "messages"),
        instance_id=instance_id,
        repo=repo,
        format=row.get("trajectory_format") or meta.get("trajectory_format") or "mini-swe-agent-1",
        metadata=extra,
        record=name,
    )


def from_mini_swe_agent(value: list[dict[str, Any]] | dict[str, Any], name: str) -> Trajectory:
    """A mini-swe-agent trajectory (bare message list or `{messages, info}`): messages cut to role and
    content; format mini-swe-agent-2 when any message uses the `mswea_bash_command` fence, else -1;
    `info` kept as metadata; instance id from the object's `instance_id`, else `name`. Raises
    `TrajectoryError` naming `name` on missing or malformed messages."""
    messages = value if isinstance(value, list) else _messages(value.get("messages"), name, "messages")
    # Saved mini-swe-agent messages may carry extra keys (extra, timestamps); keep role and content.
    messages = [{"role": m.get("role"), "content": m.get("content")} if isinstance(m, dict) else m for m in messages]
    fence = (
        "mini-swe-agent-2"
        if any("```mswea_bash_command" in (m.get("content") or "") for m in messages if isinstance(m, dict))
        else "mini-swe-agent-1"
    )
    info = value.get("info", {}) if isinstance(value, dict) else {}
    return trajectory_from_messages(
        messages,
        instance_id=(value.get("instance_id") if isinstance(value, dict) else None) or name,
        repo=None,
        format=fence,
        metadata={"info": info} if info else {},
        record=name,
    )


def from_nebius(row: dict[str, Any], name: str) -> Trajectory:
    """A nebius SWE-agent row: role `ai` becomes `assistant`; a system message's content is its
    `system_prompt`, any other's its `text`; `model_name`, `exit_status` and `target` kept as
    metadata. Raises `TrajectoryError` naming `name` when `trajectory` is not a list of objects or
    the messages are malformed."""
    messages = []
    for i, m in enumerate(_messages(row.get("trajectory"), name, "trajectory")):
        if not isinstance(m, dict):
            raise TrajectoryError(name, f"trajectory[{i}] is not an object")
        role = {"ai": "assistant"}.get(m.get("role"), m.get("role"))
        content = m.get("system_prompt") if role == "system" else m.get("text")
        messages.append({"role": role, "content": content})
    return trajectory_from_messages(
        messages,
        instance_id=str(row.get("instance_id") or name),
        repo=None,
        format="swe-agent",
        metadata={k: row[k] for k in ("model_name", "exit_status", "target") if k in row},
        record=name,
    )


def from_terminus(row: dict[str, Any], name: str) -> Trajectory:
    """A Terminus-2 row: `conversations` as the messages; instance id from `trial_name`, else `task`,
    else `name`; `agent`, `model`, `task`, `episode` and `run_id` kept as metadata. Raises
    `TrajectoryError` naming `name` on missing or malformed conversations."""
    return trajectory_from_messages(
        _messages(row.get("conversations"), name, "conversations"),
        instance_id=str(row.get("trial_name") or row.get("task") or name),
        repo=None,
        format="terminus-2",
        metadata={k: row[k] for k in ("agent", "model", "task", "episode", "run_id") if k in row},
        record=name,
    )


def from_agentinstruct(row: dict[str, Any], name: str) -> Trajectory:
    """An AgentInstruct OS row: `conversations` as the messages, instance id from `id`, else `name`;
    no metadata. Raises `TrajectoryError` naming `name` on missing or malformed conversations."""
    return trajectory_from_messages(
        _messages(row.get("conversations"), name, "conversations"),
        instance_id=str(row.get("id") or name),
        repo=None,
        format="agentinstruct-os",
        record=name,
    )


def to_trajectory(value: Any, name: str) -> Trajectory:
    """Convert one record of any supported format; raises `TrajectoryError` naming the record."""
    if isinstance(value, list):
        return from_mini_swe_agent(value, name)
    if not isinstance(value, dict):
        raise TrajectoryError(name, f"a record must be a JSON object or a message list, not {type(value).__name__}")
    if "trajectory" in value:
        return from_nebius(value, name)
    if "conversations" in value:
        return from_terminus(value, name) if "agent" in value else from_agentinstruct(value, name)
    if "messages" in value:
        if "instance_id" in value or "instance_id" in (value.get("metadata") or {}):
            return from_swe_zero(value, name)
        return from_mini_swe_agent(value, name)
    raise TrajectoryError(name, "unknown format: no 'messages', 'trajectory' or 'conversations' field")


def iter_trajectories(patterns: list[str] | str) -> Iterator[tuple[Record, Trajectory] | BadLine]:
    """Trajectories from every matching file, in order; records that are not valid trajectories
    come back as `BadLine`s naming file, line and defect."""
    return trajectories_of(iter_records(patterns))


def trajectories_of(records: Iterable[Record | BadLine]) -> Iterator[tuple[Record, Trajectory] | BadLine]:
    """(record, trajectory) of each record that is a valid trajectory; the rest as `BadLine`s."""
    for rec in records:
        if isinstance(rec, BadLine):
            yield rec
            continue
        try:
            yield rec, to_trajectory(rec.value, f"{rec.file}:{rec.line}")
        except TrajectoryError as e:
            yield BadLine(rec.file, rec.line, e.problem)


def load_trajectories(patterns: list[str] | str) -> list[Trajectory]:
    """All trajectories of the inputs; any malformed record is an error naming it."""
    out = []
    for item in iter_trajectories(patterns):
        if isinstance(item, BadLine):
            raise TrajectoryError(f"{item.file}:{item.line}", item.reason)
        out.append(item[1])
    return out


def repos_in(files: list[str]) -> set[str]:
    """The repos of the trajectories in `files`; a line that is not a trajectory is an error."""
    found = set()
    for item in iter_trajectories(files):
        if isinstance(item, BadLine):
            raise InputError(f"{item.file}:{item.line}: {item.reason}")
        found.add(item[1].repo)
    return found
