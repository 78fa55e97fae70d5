"""The host's verdict on a trial: what Harbor's verifier leaves in /logs/verifier, judged on the host.

A sandboxed command can write anything in the verifier's folder, so the host reads it as hostile
and owns every file a grade depends on: the reward (the host's `layout.verdict` on the case lines
of a generated task, `layout.command_verdict` on the trial's repository for a command task, with
whether an answer was written in `COMMAND_RECORD`, else a checked `reward.txt`), the submission diff (`submission`, from the
trial's repository copy), and the note of what a capped copy left out (`layout.DROPPED_NOTE`).
The Harbor environment's download hook makes this one call (`judge`).
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from terminalworld.env import walk
from terminalworld.errors import VerifierError
from terminalworld.tasks import layout
from terminalworld.tasks.submission import SUBMISSION_DIFF, submission_diff

COMMAND_RECORD = "command.json"  # a command task's {"written": ...}: evidence for its steps
HOST_FILES = ("reward.txt", "reward.json", SUBMISSION_DIFF, COMMAND_RECORD)  # what the host writes, never copied


@dataclass(frozen=True)
class Verdict:
    """A trial's verdict: its reward (None when a task without cases wrote none), the submission
    diff (None without the task's repository to compare with) and how many entries the capped copy
    of the verifier's folder dropped."""

    reward: float | None
    diff: str | None
    dropped: int


def copy_capped(top: str, below: str, target: Path, skip: tuple[str, ...] = ()) -> int:
    """Copy a sandbox folder's folders and regular files to `target`, at most
    `layout.VERIFIER_FILES` entries and `layout.VERIFIER_BYTES` bytes: a file that does not fit
    is dropped whole, as is what lies in a dropped folder or 16 folders down, and what was dropped
    is named in `layout.DROPPED_NOTE`. Files `skip` (relative paths) are left out. Returns how many
    entries were dropped."""
    target.mkdir(parents=True, exist_ok=True)
    entries, size, dropped, named = 0, 0, 0, []
    for fd, name, st, parts in walk.walk(top, below):
        rel = "/".join([*parts, name])
        dest = target.joinpath(*parts, name)
        if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)) or rel in skip:
            continue
        fits = size + (st.st_size if stat.S_ISREG(st.st_mode) else 0) <= layout.VERIFIER_BYTES
        if entries >= layout.VERIFIER_FILES or not fits or len(parts) >= 16 or not dest.parent.is_dir():
            dropped += 1
            if len(named) < layout.VERIFIER_FILES:
                named.append(f"{rel[:200]!r} ({st.st_size} bytes)")
            continue
        entries += 1
        if stat.S_ISDIR(st.st_mode):
            dest.mkdir(exist_ok=True)
        elif (src := walk.open_regular(fd, name)) is not None:
            with os.fdopen(src, "rb") as fin, open(dest, "wb") as fout:
                size += fout.write(fin.read(layout.VERIFIER_BYTES - size + 1)[: layout.VERIFIER_BYTES - size])
    if dropped:
        caps = f"caps: {layout.VERIFIER_FILES} entries, {layout.VERIFIER_BYTES} bytes"
        (target / layout.DROPPED_NOTE).write_text(f"{dropped} entries left out ({caps}):\n" + "\n".join(named) + "\n")
    return dropped


def judge(
    top: str,
    below: str,
    target: Path,
    *,
    cases: list[dict[str, Any]] | None,
    original: Path | None,
    repo: str,
    expected: dict[str, Any] | None = None,
) -> Verdict:
    """The verdict on the verifier's folder `top/below` (a host folder a sandbox wrote in), written
    into the host's copy `target`: the folder copied under caps without the files the host owns,
    then the host's reward (from the trial's repository `repo` when the task is a command task with
    reference `expected`, from the case lines when it has `cases`, else `reward.txt`, checked) and the diff from the task's repository `original` to the trial's copy `repo`.
    Raises `VerifierError` on a reward file that is not one (a reward.json is refused): a failed
    submission, never a forged score."""
    written = None
    if expected is not None:
        reward, written = layout.command_verdict(expected, repo)
    elif cases is None:
        if walk.lstat(top, f"{below}/reward.json") is not None:
            raise VerifierError(f"{os.path.join(top, below)}/reward.json: refused; the reward is reward.txt alone")
        reward = layout.read_reward(top, below)
    else:
        reward = layout.verdict(cases, walk.read_regular(top, f"{below}/cases.jsonl", max_bytes=layout.CASES_BYTES))
    dropped = copy_capped(top, below, target, HOST_FILES)
    for name in HOST_FILES:
        (target / name).unlink(missing_ok=True)
    if reward is not None:
        (target / "reward.txt").write_text(f"{reward:g}\n")
    if written is not None:
        (target / COMMAND_RECORD).write_text(json.dumps({"written": written}) + "\n")
    diff = submission_diff(str(original), repo) if original is not None and original.is_dir() else None
    if diff is not None:
        (target / SUBMISSION_DIFF).write_text(diff)
    return Verdict(reward, diff, dropped)
