"""Target classes: what a probe target measures, by one declared rule.

A held-out row's target observation is not always a prediction. The rule below gives every target
exactly one class, checked in this order (the first that applies wins):

1. `empty`: the target holds no terminal text (nothing but harness text and white space). The
   scorer skips such rows (their score would be the end-of-turn token's alone); they are counted,
   never scored, so they are not one of the four scored classes.
2. `sentinel`: a fixed output of the harness or the policy, the same in every session: the target
   command is `echo S` or the terminal text is `S` for a string S of `SENTINELS` (the submit echo).
   Its tokens measure the template, not the terminal.
3. `copy`: the target's text is already in the session's context (system prompt, task, every
   earlier command and observation, and the target command itself): its terminal text, stripped, is
   a substring of the context, or at least `COPY_LINE_SHARE` (90 %) of its non-blank characters lie
   on lines (compared stripped of surrounding white space) that occur as lines of the context.
   Targets with fewer than `MIN_COPY_CHARS` (16) non-blank characters are copies only when they are
   a substring of their own command of at least `MIN_ECHO_CHARS` (4) characters (`echo 'hello
   world'`): a line that short (`0`, `}`, `total 0`) occurs elsewhere in a context by coincidence. Characters weigh the lines, so a
   new file whose `}` and blank-ish lines happen to recur is not a copy. This catches a `cat` of a
   file the session wrote by heredoc, a `sed -n` re-read after a `sed -i` of one line, a repeated
   `ls`, an `echo` of its own argument.
4. `read`: repository content not yet in context, what grounding can serve: every simple command of
   the line is a read or navigation program by the hybrid routing table (`core.routing`: `cat`,
   `head`, `tail`, `sed` without `-i`, `grep`, `wc`, `ls`, `find`, `git status`, `git diff`, ...; its
   output is a function of the repository's files) and no line of the output is an error message
   (`ERROR_LINE`: `PROG: ...` from one of the line's programs, `fatal:`, `error:`, `usage:`).
5. `predict`: everything else: errors, execution output (interpreters, tests, builds), edits'
   messages, and lines the routing table does not know.

The probe's headline is on `read` + `predict` (`HEADLINE`); `copy` and `sentinel` are reported beside
it, never mixed in. Each observation of a trajectory can be classed the same way at its own depth
(`classify_turn`), for the depth curve.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any, Literal

from terminalworld.core.routing import program, simple_commands, simple_family
from terminalworld.core.trajectories import SUBMIT_SENTINEL, Trajectory, extract_command, split_observation

TargetClass = Literal["empty", "sentinel", "copy", "read", "predict"]

CLASSES: tuple[str, ...] = ("sentinel", "copy", "read", "predict")  # the scored classes, in report order
HEADLINE: tuple[str, ...] = ("read", "predict")  # the classes the probe's headline measures
SENTINELS: tuple[str, ...] = (SUBMIT_SENTINEL,)  # fixed outputs of the harness or policy: the one home
# What each headline class holds, in the words a report puts beside its counts.
MEANING = {"read": "repository content not yet in context", "predict": "execution output, errors, edits' messages"}
COPY_LINE_SHARE = 0.9  # share of the target's non-blank characters on lines already in context
MIN_COPY_CHARS = 16  # below this many non-blank characters a target is never a copy ...
MIN_ECHO_CHARS = 4  # ... unless it is its own command's text, at least this long
_READ_FAMILIES = frozenset({"read", "navigation"})
ERROR_LINE = re.compile(r"^(?:(?P<prog>[\w.+-]+): |fatal: |error: |usage: )", re.IGNORECASE)
_SENTINEL_ECHO = re.compile(r"^echo\s+['\"]?(?P<word>[A-Z_]+)['\"]?\s*$")


def terminal_text(observation: str | None) -> str:
    """The terminal's part of an observation message (harness prefixes, warnings and wrappers removed)."""
    return split_observation(observation or "")[1]


def empty_target(row: dict[str, Any]) -> bool:
    """Whether the row's target observation holds no terminal text (the scorer skips it)."""
    return not terminal_text(row["target_env"]).strip()


def is_sentinel(command: str | None, text: str) -> bool:
    """Whether a (command, terminal text) pair is a sentinel: `echo S` or output `S` for S in `SENTINELS`."""
    m = _SENTINEL_ECHO.match((command or "").strip())
    return (m is not None and m.group("word") in SENTINELS) or text.strip() in SENTINELS


def sentinel_turn(traj: Trajectory, index: int) -> bool:
    """Whether observation `index` is classed `sentinel` (`classify_turn`'s answer, without building the
    context: the sampler asks it of every trajectory of a corpus)."""
    turn = traj.turns[index]
    text = terminal_text(turn.observation)
    return bool(text.strip()) and is_sentinel(extract_command(turn.action), text)


def _lines(text: str) -> list[str]:
    return [s for line in text.splitlines() if (s := line.strip())]


def copy_share(context: Iterable[str], text: str) -> float:
    """The share of the text's non-blank characters on lines that occur (stripped) as lines of the
    context; 1.0 when the stripped text is a substring of the context."""
    texts = list(context)
    body = text.strip()
    if not body:
        return 0.0
    if any(body in t for t in texts):
        return 1.0
    seen = {s for t in texts for s in _lines(t)}
    lines = _lines(body)
    total = sum(len(s) for s in lines)
    return sum(len(s) for s in lines if s in seen) / total if total else 0.0


def is_copy(context: Iterable[str], text: str) -> bool:
    """The copy rule: at least `MIN_COPY_CHARS` non-blank characters, `COPY_LINE_SHARE` of them in context."""
    if sum(len(s) for s in _lines(text)) < MIN_COPY_CHARS:
        return False
    return copy_share(context, text) >= COPY_LINE_SHARE


def _echoes_command(command: str | None, text: str) -> bool:
    """Whether a short target is its own command's text (`echo 'hello world'`): at least
    `MIN_ECHO_CHARS` characters, so a digit or a bare name is not taken for an echo."""
    body = text.strip()
    return command is not None and len(body) >= MIN_ECHO_CHARS and body in command


def is_read(command: str | None, text: str) -> bool:
    """Whether the command only reads or navigates the repository (routing table) and printed no error."""
    if not command:
        return False
    words = simple_commands(command)
    if not words or any(simple_family(w) not in _READ_FAMILIES for w in words):
        return False
    programs = {program(w)[0].split(":")[0] for w in words}
    for line in _lines(text):
        m = ERROR_LINE.match(line)
        if m and (m.group("prog") is None or m.group("prog") in programs):
            return False
    return True


def classify_turn(traj: Trajectory, index: int) -> TargetClass:
    """The class of observation `index` (0-based turn) of a trajectory, its context being the system
    prompt, the task, every earlier turn and its own command."""
    turn = traj.turns[index]
    text = terminal_text(turn.observation)
    command = extract_command(turn.action)
    if not text.strip():
        return "empty"
    if is_sentinel(command, text):
        return "sentinel"
    context = [traj.system or "", traj.task, turn.action]
    for t in traj.turns[:index]:
        context += [t.action, t.observation or ""]
    if is_copy(context, text) or _echoes_command(command, text):
        return "copy"
    return "read" if is_read(command, text) else "predict"


def classify(row: dict[str, Any]) -> TargetClass:
    """The class of a held-out row's target (`{system, task, prefix, target_cmd, target_env}`)."""
    # Imported here: the rule itself loads in Harbor's environment (grounding's copy check), which
    # has no fsspec for the row readers.
    from terminalworld.core.heldout import heldout_trajectory

    traj = heldout_trajectory(row)
    return classify_turn(traj, len(traj.turns) - 1)


def class_counts(classes: Iterable[str]) -> dict[str, int]:
    """Count per class, in report order (`empty` last, only when present)."""
    c = Counter(classes)
    return {k: c[k] for k in (*CLASSES, "empty") if k in CLASSES or c[k]}


def headline(target_class: str | None) -> bool:
    """Whether a row of this class counts in the probe's headline (read + predict)."""
    return target_class in HEADLINE
