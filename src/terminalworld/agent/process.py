"""The steps of a fix, per trial: an agent grade that says something where pass@1 is 0.

Small agents rarely finish a fix, so each trial records how far it got (`STEPS`; the localisation
steps are `LOCALISATION`), counting only evidence the agent obtained beyond its prompt: outputs its
own commands caused, read from its `trajectory.json`, and the host's diff and reward from the
verifier. A step whose evidence the level's instruction holds (`tasks.make.LEVELS`) is None. Each
step's definition and why: docs/agent-grade.md, "The steps of a fix".
"""

from __future__ import annotations

import ast
import json
import os
import re
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from terminalworld.core.trajectories import OBSERVATION_PREFIX, extract_command
from terminalworld.tasks import layout
from terminalworld.tasks.submission import SUBMISSION_DIFF

STEPS = (
    "file_found",
    "body_shown",
    "line_shown",
    "reproduced",
    "edited_lines",
    "edited_file",
    "diff",
    "solved",
)
LOCALISATION = ("file_found", "body_shown", "line_shown")
BODY_SHARE = 0.8  # of the function's lines an agent must have been shown for `body_shown`
SHORT_OUTPUT_LINES = 3
MAX_READ = 4 << 20  # bytes of a trial file the sandbox could have written; more is read as absent
ORACLE_COMMANDS = ("bash /solution/solve.sh",)
PYTHON = re.compile(r"(^|[\s|;&(/])python[0-9.]*\b")
DIFF_FILE = re.compile(r"^diff --git a/(.+?) b/", re.M)
HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@")
RAISED = re.compile(r"raised (\w+)")


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


@dataclass(frozen=True)
class Bug:
    """What the grade knows of a generated task's bug: its file (`path`, relative to the repository
    root), `function`, the buggy `line`'s text, the function's non-blank lines (`body`, stripped),
    the wrong output the issue reports, the bugged-file lines the reference fix changes, and the
    instruction the agent was given."""

    path: str
    function: str
    line: str
    body: tuple[str, ...]
    wrong_output: str | None
    fix_lines: frozenset[int]
    instruction: str


def bug_location(task_dir: Path) -> Bug | None:
    """The bug of a generated task, from its `task.toml`, repository, reference fix and instruction
    (files the host wrote); None when the task does not say."""
    text = read_capped(task_dir / "task.toml")
    try:
        meta = tomllib.loads(text or "").get("metadata", {})
    except tomllib.TOMLDecodeError:
        return None
    path, function, line = meta.get("path"), meta.get("function"), meta.get("line")
    if not isinstance(path, str) or not isinstance(function, str) or not isinstance(line, int):
        return None
    source = read_capped(task_dir / layout.REPO_DIR / path) or ""
    lines = source.splitlines()
    body: tuple[str, ...] = ()
    try:
        node = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == function)
        body = tuple(x.strip() for x in lines[node.lineno - 1 : node.end_lineno] if x.strip())
    except (SyntaxError, StopIteration):
        pass
    try:
        fix = changed_lines(layout.solution_patch(task_dir), path)
    except (OSError, AttributeError):
        fix = frozenset()
    wrong = meta.get("wrong_output")
    return Bug(
        path=path,
        function=function,
        line=lines[line - 1].strip() if 0 < line <= len(lines) else "",
        body=body,
        wrong_output=wrong if isinstance(wrong, str) else None,
        fix_lines=fix,
        instruction=read_capped(task_dir / "instruction.md") or "",
    )


def changed_lines(diff: str, path: str) -> frozenset[int]:
    """The lines of file `path` (numbered as before the diff) that a unified `git diff` changes: each
    removed line, and for an insertion the lines either side of it."""
    lines: set[int] = set()
    current, old, replacing = None, 0, False
    for text in diff.splitlines():
        if text.startswith("diff --git "):
            m = DIFF_FILE.match(text)
            current = m.group(1) if m else None
        elif (h := HUNK.match(text)) is not None:
            old, replacing = int(h.group(1)), False
        elif current != path or text.startswith(("---", "+++")):
            continue
        elif text.startswith("-"):
            lines.add(old)
            old, replacing = old + 1, True
        elif text.startswith("+") and not replacing:  # a pure insertion: the lines around it
            lines.update((old - 1, old))
        elif text.startswith(" "):
            old, replacing = old + 1, False
    return frozenset(lines)


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


def replies(messages: list[dict[str, Any]]) -> tuple[int, int]:
    """(replies, valid replies) of an episode: a valid action is a reply with exactly one bash block."""
    said = [str(m.get("content", "")) for m in messages if m.get("role") == "assistant"]
    return len(said), sum(extract_command(t) is not None for t in said)


def _names(text: str, word: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(word)}(?![\w])", text) is not None


def _shown(pairs: list[tuple[str, str]], text: str) -> bool:
    """Whether an observation shows `text` that its own command did not hold."""
    return bool(text) and any(text in out and text not in command for command, out in pairs)


def diff_files(diff: str) -> list[str]:
    """The files a `git diff` touches."""
    return DIFF_FILE.findall(diff)


def _file_found(pairs: list[tuple[str, str]], bug: Bug) -> bool:
    """An output shows the bug's file: a line naming its path and the function (`grep -rn 'def f'`),
    or a short output (at most `SHORT_OUTPUT_LINES`) naming the path (`grep -rl`, a `__file__`)."""
    for command, out in pairs:
        if _names(command, bug.path):
            continue
        hits = [x for x in out.splitlines() if _names(x, bug.path)]
        if any(_names(x, bug.function) for x in hits) or (hits and len(out.strip().splitlines()) <= SHORT_OUTPUT_LINES):
            return True
    return False


def _body_shown(pairs: list[tuple[str, str]], bug: Bug) -> bool | None:
    """Outputs show the function's `def` line and `BODY_SHARE` of its other non-blank lines (lines
    the instruction quotes left out)."""
    if not bug.body:
        return None
    head, rest = bug.body[0], [x for x in bug.body[1:] if x not in bug.instruction]
    if head not in bug.instruction and not _shown(pairs, head):
        return False
    return sum(_shown(pairs, x) for x in rest) >= BODY_SHARE * len(rest)


def _reproduced(pairs: list[tuple[str, str]], bug: Bug) -> bool | None:
    """A Python command naming the function printed the wrong output the issue reports, as a line
    of its own (for an exception, its name)."""
    if bug.wrong_output is None:
        return None
    m = RAISED.fullmatch(bug.wrong_output)

    def shows(out: str) -> bool:  # the exception's name, or the value as a whole line (`print(repr(...))`)
        return _names(out, m.group(1)) if m else bug.wrong_output.strip() in (x.strip() for x in out.splitlines())

    return any(PYTHON.search(command) and _names(command, bug.function) and shows(out) for command, out in pairs)


def trial_steps(
    *,
    pairs: list[tuple[str, str]],
    bug: Bug | None,
    diff: str | None,
    solved: bool | None,
    replies: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """The steps of a fix one trial reached, None where unknown or given by the instruction, and the
    trial's `valid_reply_share` from its (replies, valid replies). `edited_lines`: the diff changes a
    line the reference fix changes (for a fix that only inserts, the lines either side)."""
    steps: dict[str, Any] = dict.fromkeys(STEPS)
    if bug is not None:
        steps["file_found"] = None if bug.path in bug.instruction else _file_found(pairs, bug)
        steps["body_shown"] = _body_shown(pairs, bug)
        steps["line_shown"] = None if not bug.line or bug.line in bug.instruction else _shown(pairs, bug.line)
        steps["reproduced"] = _reproduced(pairs, bug)
        if diff is not None:
            steps["edited_file"] = bug.path in diff_files(diff)
            steps["edited_lines"] = bool(bug.fix_lines & changed_lines(diff, bug.path)) if bug.fix_lines else None
    steps["diff"] = bool(diff.strip()) if diff is not None else None
    steps["solved"] = solved
    n, valid = replies or (0, 0)
    steps["valid_reply_share"] = valid / n if n else None
    return steps


def trial_commands(trial_dir: Path, *, agent: str) -> tuple[list[tuple[str, str]], tuple[int, int] | None]:
    """A Harbor trial's (command, output) pairs, from its trajectory (or Harbor's own agents' known
    commands), and its (replies, valid replies), None without a trajectory of replies."""
    if agent == "nop":
        return [], None
    if agent == "oracle":
        return [(c, "") for c in ORACLE_COMMANDS], None
    text = read_capped(trial_dir / "agent" / "trajectory.json")
    try:
        messages = json.loads(text)["messages"] if text else []
    except (json.JSONDecodeError, KeyError, TypeError, RecursionError):
        messages = []
    messages = [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []
    return commands_and_outputs(messages), replies(messages)


def trial_process(trial_dir: Path, *, agent: str, tasks: Path | None, solved: bool | None) -> dict[str, bool | None]:
    """The steps of a fix of one Harbor trial folder: the agent's commands (`trial_commands`), the
    diff the verifier recorded, the task's bug."""
    pairs, said = trial_commands(trial_dir, agent=agent)
    task = task_name(trial_dir)
    bug = bug_location(tasks / task) if tasks is not None and task else None
    diff = read_capped(trial_dir / "verifier" / SUBMISSION_DIFF)
    return trial_steps(pairs=pairs, bug=bug, diff=diff, solved=solved, replies=said)


def task_name(trial_dir: Path) -> str | None:
    """The task a Harbor trial folder ran (from its `result.json`), None when it does not say one."""
    text = read_capped(trial_dir / "result.json")
    try:
        name = json.loads(text or "")["task_name"]
    except (json.JSONDecodeError, KeyError, TypeError):
        return None
    return name if isinstance(name, str) and "/" not in name and name not in ("", ".", "..") else None


def rates(rows: list[dict[str, Any]]) -> dict[str, dict[str, float | int | None]]:
    """Per step, the share of scored trials that reached it (over those where it is known) and the
    count it is over; and the mean over scored trials of the share of valid replies. The steps of a
    fix always; the steps of another kind of task (`command_steps`) where its trials are."""
    out = {}
    other = [k for r in rows for k in r.get("process") or {} if k not in (*STEPS, "valid_reply_share")]
    for s in (*STEPS, *dict.fromkeys(other), "valid_reply_share"):
        vals = [r["process"][s] for r in rows if r.get("scored") and r.get("process", {}).get(s) is not None]
        out[s] = {"rate": sum(vals) / len(vals) if vals else None, "n": len(vals)}
    return out
