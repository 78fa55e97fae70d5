"""The steps of a command task, per trial: evidence only, as the steps of a fix (`process`) count.

A command task (`tasks.commands`) is solved by one or two commands, so its steps are what a trial
shows on the way: `valid_command` (some reply held exactly one bash block, and it ran),
`family_tool` (some command runs a tool of the task's family, `FAMILY_TOOLS`), `file_shown` (an
output shows what the task is about beyond what its own command and the instruction hold: a line
of the file the instruction names, or else the reference answer's first line, such as the file
that defines a name), `answer_written` (the host found an answer in the trial's repository:
`tasks.verdict.COMMAND_RECORD`) and `solved`. A step without evidence to judge it is None.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from terminalworld.agent import process
from terminalworld.tasks import layout
from terminalworld.tasks.verdict import COMMAND_RECORD

COMMAND_STEPS = ("valid_command", "family_tool", "file_shown", "answer_written", "solved")
FAMILY_TOOLS = {
    "locate": {"grep", "egrep", "rg", "find", "ag", "ack"},
    "count": {"wc", "grep", "egrep", "find", "rg", "awk"},
    "search": {"grep", "egrep", "rg", "ag", "ack", "awk"},
    "inspect": {"sed", "head", "tail", "cat", "awk", "nl", "python", "python3", "jq"},
    "edit": {"sed", "perl", "python", "python3", "ed", "awk", "echo", "printf", "tee"},
    "git": {"git"},
    "files": {"mv", "cp", "touch", "echo", "printf", "ls", "tee", "cat", "find"},
}
MIN_SHOWN = 8  # characters a file's line needs (stripped) to count as that file shown
SEGMENT = re.compile(r"\|\||&&|[|;&\n()`]|\$\(")
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=\S*")


@dataclass(frozen=True)
class CommandTask:
    """What the grade knows of a command task: its family, the file it is about (`target`), the
    lines of that file, the reference answer (answer tasks) and the instruction."""

    family: str
    target: str | None
    target_lines: tuple[str, ...]
    answer: str | None
    instruction: str


def command_task(task_dir: Path) -> CommandTask | None:
    """The command task in `task_dir` from files the host wrote (`task.toml`, the reference, the
    repository), None for any other task."""
    try:
        meta = tomllib.loads(process.read_capped(task_dir / "task.toml") or "").get("metadata", {})
        spec = json.loads(process.read_capped(task_dir / "tests" / layout.EXPECTED) or "null")
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, RecursionError):
        return None
    if meta.get("level") != "command" or not isinstance(spec, dict) or meta.get("family") not in FAMILY_TOOLS:
        return None
    target = meta.get("target") if isinstance(meta.get("target"), str) and meta.get("target") else None
    text = process.read_capped(task_dir / layout.REPO_DIR / target) if target else None
    answer = spec.get("expected") if spec.get("kind") == "answer" else None
    return CommandTask(
        family=meta["family"],
        target=target,
        target_lines=tuple(x.strip() for x in (text or "").splitlines() if len(x.strip()) >= MIN_SHOWN),
        answer=answer if isinstance(answer, str) else None,
        instruction=process.read_capped(task_dir / "instruction.md") or "",
    )


def tools(command: str) -> set[str]:
    """The programs a shell command runs: the first word of each of its simple commands (after
    variable assignments), by base name."""
    found = set()
    for segment in SEGMENT.split(command):
        words = [w for w in segment.split() if not ASSIGNMENT.fullmatch(w)]
        if words:
            found.add(words[0].rsplit("/", 1)[-1])
    return found


def _shown(pairs: list[tuple[str, str]], text: str) -> bool:
    """Whether an output shows `text` that its own command did not hold."""
    return bool(text) and any(text in out and text not in command for command, out in pairs)


def trial_steps(
    *,
    pairs: list[tuple[str, str]],
    task: CommandTask,
    written: bool | None,
    solved: bool | None,
    replies: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """The steps of a command task one trial reached (see the module docstring) and its
    `valid_reply_share` from its (replies, valid replies)."""
    steps: dict[str, Any] = dict.fromkeys(COMMAND_STEPS)
    steps["valid_command"] = bool(pairs)
    steps["family_tool"] = any(tools(command) & FAMILY_TOOLS[task.family] for command, _ in pairs)
    if task.target and task.target in task.instruction:
        shown = [x for x in task.target_lines if x not in task.instruction]
        steps["file_shown"] = any(_shown(pairs, x) for x in shown) if shown else None
    elif task.answer and task.answer.strip():
        first = task.answer.strip().splitlines()[0].strip()
        steps["file_shown"] = None if first in task.instruction else _shown(pairs, first)
    steps["answer_written"] = written
    steps["solved"] = solved
    n, valid = replies or (0, 0)
    steps["valid_reply_share"] = valid / n if n else None
    return steps


def trial_process(trial_dir: Path, *, agent: str, tasks: Path | None, solved: bool | None) -> dict[str, Any] | None:
    """The steps of one Harbor trial folder of a command task (the agent's commands from its
    trajectory, the host's record of the answer); None when its task is not a command task."""
    name = process.task_name(trial_dir)
    task = command_task(tasks / name) if tasks is not None and name else None
    if task is None:
        return None
    pairs, said = process.trial_commands(trial_dir, agent=agent)
    try:
        record = json.loads(process.read_capped(trial_dir / "verifier" / COMMAND_RECORD) or "null")
    except (json.JSONDecodeError, RecursionError):
        record = None
    written = record.get("written") if isinstance(record, dict) else None
    written = written if isinstance(written, bool) else None
    return trial_steps(pairs=pairs, task=task, written=written, solved=solved, replies=said)
