"""The steps of a fix, per trial: an agent grade that says something where pass@1 is 0.

Small agents rarely finish a fix, so each trial records how far it got, read from the agent's own
commands (its `trajectory.json`) and from the verifier (the diff it found and the reward):

- `valid_action`: the agent ran at least one command (a reply with exactly one bash block);
- `file_localised`: a command names the bug's file (its path or file name), or a search command
  (grep, rg, git grep, find) printed its path;
- `function_localised`: a command names the bug's function, or printed its definition
  (`def NAME(`), as reading the file or a range of it does;
- `reproduced`: a command runs Python and names the bug's function (the failing call);
- `edited_file`: the diff at submission touches the bug's file;
- `diff`: the diff at submission is non-empty;
- `solved`: the verifier's reward is a solve.

The diff is the one the host computes from the trial's repository copy when the verifier's folder
is downloaded (`verifier/submission.diff`, `tasks.submission`), so it is the repository as
submitted, for every agent alike, and no file the sandbox wrote. Harbor's
own agents leave no trajectory; their commands are known: `nop` runs none, `oracle` runs the
solution script and nothing else, so each scores exactly what its commands do. Where the bug's
file and function are unknown (a task not made by `tasks make`), the flags that need them are None.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Any

from terminalworld.core.trajectories import OBSERVATION_PREFIX, extract_command

STEPS = ("valid_action", "file_localised", "function_localised", "reproduced", "edited_file", "diff", "solved")
SUBMISSION_DIFF = "submission.diff"
MAX_READ = 4 << 20  # bytes of a trial file the sandbox could have written; more is read as absent
ORACLE_COMMANDS = ("bash /solution/solve.sh",)
SEARCH = re.compile(r"(^|[\s|;&(])(grep|egrep|rg|find|git\s+grep|ag|ack)\b")
PYTHON = re.compile(r"(^|[\s|;&(/])python[0-9.]*\b")
DIFF_FILE = re.compile(r"^diff --git a/(.+?) b/", re.M)


def read_capped(path: Path) -> str | None:
    """A regular file's text (invalid UTF-8 replaced), opened without following a link; None when it
    is absent, not a regular file, or over `MAX_READ` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_READ:
            return None
        data = f.read(MAX_READ + 1)
    return None if len(data) > MAX_READ else data.decode("utf-8", errors="replace")


def bug_location(task_dir: Path) -> dict[str, str] | None:
    """The bug's file (`path`, relative to the repository root) and `function`, from a generated
    task's `task.toml`; None when the task does not say."""
    text = read_capped(task_dir / "task.toml")
    try:
        meta = tomllib.loads(text or "").get("metadata", {})
    except tomllib.TOMLDecodeError:
        return None
    if not isinstance(meta.get("path"), str) or not isinstance(meta.get("function"), str):
        return None
    return {"path": meta["path"], "function": meta["function"]}


def commands_and_outputs(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(command, output) of every command the episode ran, in order: an assistant reply with one
    bash block, then its observation (empty for the last command, e.g. the submission)."""
    pairs = []
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        command = extract_command(str(m.get("content", "")))
        if command is None:
            continue
        nxt = messages[i + 1] if i + 1 < len(messages) else {}
        out = str(nxt.get("content", "")) if nxt.get("role") == "user" else ""
        pairs.append((command, out.removeprefix(OBSERVATION_PREFIX) if out.startswith(OBSERVATION_PREFIX) else ""))
    return pairs


def _names(text: str, word: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(word)}(?![\w])", text) is not None


def diff_files(diff: str) -> list[str]:
    """The files a `git diff` touches."""
    return DIFF_FILE.findall(diff)


def trial_steps(
    *, pairs: list[tuple[str, str]], bug: dict[str, str] | None, diff: str | None, solved: bool | None
) -> dict[str, bool | None]:
    """The steps of a fix one trial reached (see the module docstring); None where unknown."""
    known = bug is not None
    path, function = (bug["path"], bug["function"]) if known else ("", "")
    name = os.path.basename(path)
    file_hit = function_hit = reproduced = False
    for command, output in pairs:
        if known and (_names(command, path) or _names(command, name) or (SEARCH.search(command) and path in output)):
            file_hit = True
        if known and (_names(command, function) or f"def {function}(" in output):
            function_hit = True
        if known and PYTHON.search(command) and _names(command, function):
            reproduced = True
    touched = diff_files(diff) if diff is not None else None
    return {
        "valid_action": bool(pairs),
        "file_localised": file_hit if known else None,
        "function_localised": function_hit if known else None,
        "reproduced": reproduced if known else None,
        "edited_file": (path in touched) if known and touched is not None else None,
        "diff": bool(diff.strip()) if diff is not None else None,
        "solved": solved,
    }


def trial_process(trial_dir: Path, *, agent: str, tasks: Path | None, solved: bool | None) -> dict[str, bool | None]:
    """The steps of a fix of one Harbor trial folder: the agent's commands from its trajectory
    (or Harbor's own agents' known commands), the diff the verifier recorded, the task's bug."""
    if agent == "nop":
        pairs: list[tuple[str, str]] = []
    elif agent == "oracle":
        pairs = [(c, "") for c in ORACLE_COMMANDS]
    else:
        text = read_capped(trial_dir / "agent" / "trajectory.json")
        try:
            messages = json.loads(text)["messages"] if text else []
        except (json.JSONDecodeError, KeyError, TypeError):
            messages = []
        pairs = commands_and_outputs(messages if isinstance(messages, list) else [])
    task = _task_name(trial_dir)
    bug = bug_location(tasks / task) if tasks is not None and task else None
    diff = read_capped(trial_dir / "verifier" / SUBMISSION_DIFF)
    return trial_steps(pairs=pairs, bug=bug, diff=diff, solved=solved)


def _task_name(trial_dir: Path) -> str | None:
    text = read_capped(trial_dir / "result.json")
    try:
        name = json.loads(text or "")["task_name"]
    except (json.JSONDecodeError, KeyError, TypeError):
        return None
    return name if isinstance(name, str) and "/" not in name and name not in ("", ".", "..") else None


def rates(rows: list[dict[str, Any]]) -> dict[str, dict[str, float | int | None]]:
    """Per step, the share of scored trials that reached it (over those where it is known) and the
    count it is over."""
    out = {}
    for s in STEPS:
        vals = [r["process"][s] for r in rows if r.get("scored") and r.get("process", {}).get(s) is not None]
        out[s] = {"rate": sum(vals) / len(vals) if vals else None, "n": len(vals)}
    return out
