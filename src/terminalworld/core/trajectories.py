"""The trajectory model: one agent episode as system prompt, task and (action, observation) turns.

Every on-disk format (SWE-ZERO rows, mini-swe-agent `.traj.json`, nebius SWE-agent, Terminus-2,
AgentInstruct OS) is converted into this one model by `terminalworld.core.formats`; everything
downstream (rendering, scoring, sampling) sees only `Trajectory`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from terminalworld.errors import TrajectoryError

OBSERVATION_PREFIX = "Observation: "
SUBMIT_SENTINEL = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


@dataclass(frozen=True)
class Turn:
    """One agent step: the full assistant message and the full observation message after it.

    `observation` is None only for a final action the harness never answered.
    """

    action: str
    observation: str | None


@dataclass(frozen=True)
class Trajectory:
    """One agent episode: its id, its repository (None when unknown), the system prompt (None when
    absent), the user task, the turns in order, the source format's name, and format-specific
    metadata (ignored by equality)."""

    instance_id: str
    repo: str | None
    system: str | None
    task: str
    turns: tuple[Turn, ...]
    format: str
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)

    def messages(self) -> list[dict[str, str]]:
        """The conversation as chat messages, exactly as the agent saw it."""
        out = [] if self.system is None else [{"role": "system", "content": self.system}]
        out.append({"role": "user", "content": self.task})
        for turn in self.turns:
            out.append({"role": "assistant", "content": turn.action})
            if turn.observation is not None:
                out.append({"role": "user", "content": turn.observation})
        return out

    @property
    def observed_turns(self) -> tuple[Turn, ...]:
        """The turns that have an observation, in order: all but an unanswered final action."""
        return tuple(t for t in self.turns if t.observation is not None)

    def to_swe_zero_row(self) -> dict[str, Any]:
        """SWE-ZERO's row layout (the corpus format written by the recorder)."""
        return {
            "instance_id": self.instance_id,
            "repo": self.repo,
            "messages": self.messages(),
            "trajectory_format": self.format,
            **self.metadata,
        }


def trajectory_from_messages(
    messages: list[dict[str, str]],
    *,
    instance_id: str,
    repo: str | None,
    format: str,
    metadata: dict[str, Any] | None = None,
    record: str | None = None,
) -> Trajectory:
    """Build a trajectory from chat messages: [system], user task, then assistant/user pairs."""
    name = record or instance_id
    if not messages:
        raise TrajectoryError(name, "no messages")
    for i, m in enumerate(messages):
        if (
            not isinstance(m, dict)
            or not isinstance(m.get("content"), str)
            or m.get("role")
            not in (
                "system",
                "user",
                "assistant",
            )
        ):
            raise TrajectoryError(name, f"message {i} is not a {{role, content}} chat message: {str(m)[:80]!r}")
    system = None
    rest = messages
    if rest[0]["role"] == "system":
        system, rest = rest[0]["content"], rest[1:]
    if not rest or rest[0]["role"] != "user":
        raise TrajectoryError(name, "the message after the system prompt must be the user task")
    task, rest = rest[0]["content"], rest[1:]
    turns = []
    for i in range(0, len(rest), 2):
        action = rest[i]
        obs = rest[i + 1] if i + 1 < len(rest) else None
        pos = i + (len(messages) - len(rest))
        if action["role"] != "assistant":
            raise TrajectoryError(
                name, f"roles out of order: message {pos} is {action['role']!r}, expected 'assistant'"
            )
        if obs is not None and obs["role"] != "user":
            raise TrajectoryError(name, f"roles out of order: message {pos + 1} is {obs['role']!r}, expected 'user'")
        turns.append(Turn(action["content"], None if obs is None else obs["content"]))
    return Trajectory(instance_id, repo, system, task, tuple(turns), format, dict(metadata or {}))


# mini-swe-agent v1 takes the single ```bash block; v2 names its fence mswea_bash_command.
_BASH_BLOCK = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.DOTALL)


def bash_blocks(action: str) -> list[str]:
    """The complete bash blocks of an action message: an opening fence, the command on the lines
    after it, a closing fence on a line of its own."""
    return _BASH_BLOCK.findall(action)


def extract_command(action: str) -> str | None:
    """The bash command of an action message, or None when it has not exactly one bash block."""
    blocks = bash_blocks(action)
    return blocks[0].strip() if len(blocks) == 1 else None


# Harness text inside an observation message: what the agent framework wrote, not the terminal.
# Each pattern matches a whole harness block at the position it may occur.
_HARNESS_PREFIXES = (
    OBSERVATION_PREFIX,
    "The output of the OS:\n",
    "Current terminal state:\nNew Terminal Output:\n",
    "New Terminal Output:\n",
)
_FORMAT_WARNING = re.compile(
    r"(?:Please always provide EXACTLY ONE action in triple backticks.*?(?:\n\n|$)"
    r"|Previous response had parsing errors:.*?(?:\n\n|$)"
    r"|Previous response had warnings:.*?(?:\n\n|$))",
    re.DOTALL,
)
_RETURNCODE_WRAPPER = re.compile(r"\A(<returncode>-?\d+</returncode>\n<output>\n)(.*?)(</output>)?\Z", re.DOTALL)


def harness_spans(observation: str) -> list[tuple[int, int]]:
    """Character spans of harness text in an observation: the `Observation: ` prefix (and the
    equivalent prefixes of other harnesses), format-warning blocks, and mini-swe-agent's
    `<returncode>/<output>` wrapper. Everything else is terminal output."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for prefix in _HARNESS_PREFIXES:
        if observation.startswith(prefix):
            spans.append((0, len(prefix)))
            pos = len(prefix)
            break
    while (m := _FORMAT_WARNING.match(observation, pos)) is not None and m.end() > pos:
        spans.append((m.start(), m.end()))
        pos = m.end()
    if (w := _RETURNCODE_WRAPPER.match(observation, pos)) is not None:
        spans.append(w.span(1))
        if w.group(3) is not None:
            spans.append(w.span(3))
    return _merge(spans)


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        elif e > s:
            out.append((s, e))
    return out


def split_observation(observation: str) -> tuple[str, str]:
    """(harness text, terminal output) of an observation; concatenating the harness spans gives
    the first, the rest of the characters in order give the second."""
    spans = harness_spans(observation)
    harness = "".join(observation[s:e] for s, e in spans)
    output, pos = [], 0
    for s, e in spans:
        output.append(observation[pos:s])
        pos = e
    output.append(observation[pos:])
    return harness, "".join(output)


_FAMILIES = (
    ("git", re.compile(r"^git\b")),
    ("edit", re.compile(r"^(sed\s+-i|cat\s*<<|cat\s+>|tee\b|printf\b.*>|echo\b.*>)|<<\s*['\"]?EOF")),
    ("ls", re.compile(r"^(ls|tree)\b")),
    ("find", re.compile(r"^find\b")),
    ("grep", re.compile(r"^(grep|rg|egrep)\b")),
    ("cat", re.compile(r"^(cat|head|tail|nl|less)\b")),
    ("sed", re.compile(r"^(sed|awk)\b")),
)


def command_family(command: str | None) -> str:
    """Coarse family of a command for the probe's per-family breakdown:
    ls / find / grep / cat / sed / git / edit / other."""
    if not command:
        return "other"
    cmd = command.strip()
    for family, pattern in _FAMILIES:
        if pattern.search(cmd):
            return family
    return "other"
