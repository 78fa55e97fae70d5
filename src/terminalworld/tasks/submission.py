"""The submission diff: what an agent changed in a task's repository, computed by the host.

The diff compares the task's own repository (trusted, on the host) with the trial's copy (written
by the sandbox, so hostile), file by file, for the files the task's repository tracks, as
`git diff` would show them; no git runs on the copy (its config could run anything) and no file
the sandbox can write is read as the diff. Every read of the copy is a no-follow read of a regular
file of at most `FILE_BYTES` (anything else counts as deleted), a file over `TEXT_BYTES` on either
side is compared by bytes and shown as one line, and the diff stops at `DIFF_BYTES` with a note.
"""

from __future__ import annotations

import difflib
import os

from terminalworld.env import walk

SUBMISSION_DIFF = "submission.diff"  # in the verifier's folder, written by the host alone
FILE_BYTES = 8 << 20  # a bigger file in the copy counts as gone: its content is not read
TEXT_BYTES = 256 << 10  # larger files are compared by bytes, not lines (difflib's cost is not linear)
DIFF_BYTES = 4 << 20  # the agent grade reads at most this much (`agent.process.MAX_READ`)


def _tracked(original: str) -> list[str]:
    """The original repository's files (relative paths), `.git` left out."""
    found = []
    for here, dirs, files in os.walk(original):
        dirs[:] = sorted(d for d in dirs if not (here == original and d == ".git"))
        rel = os.path.relpath(here, original)
        names = [n for n in sorted(files) if not os.path.islink(os.path.join(here, n))]
        found += [name if rel == "." else f"{rel}/{name}" for name in names]
    return found


def _file_diff(rel: str, before: bytes, after: bytes | None) -> str:
    head = f"diff --git a/{rel} b/{rel}\n"
    if after is None:
        head += "deleted file\n"
    if max(len(before), len(after or b"")) > TEXT_BYTES or b"\0" in before or b"\0" in (after or b""):
        return head + f"Binary files a/{rel} and {'/dev/null' if after is None else 'b/' + rel} differ\n"
    old = before.decode("utf-8", errors="replace").splitlines(keepends=True)
    new = (after or b"").decode("utf-8", errors="replace").splitlines(keepends=True)
    lines = difflib.unified_diff(old, new, f"a/{rel}", "/dev/null" if after is None else f"b/{rel}")
    return head + "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def submission_diff(original: str, copy: str) -> str:
    """The diff from the task's repository `original` (trusted) to the trial's copy `copy` (hostile),
    over the files `original` holds, at most about `DIFF_BYTES`."""
    parts, size = [], 0
    for rel in _tracked(original):
        with open(os.path.join(original, rel), "rb") as f:
            before = f.read()
        after = walk.read_regular(copy, rel, max_bytes=FILE_BYTES)
        if after == before:
            continue
        part = _file_diff(rel, before, after)
        if size + len(part) > DIFF_BYTES:
            parts.append(f"# diff cut at {DIFF_BYTES} bytes: later files left out\n")
            break
        parts.append(part)
        size += len(part)
    return "".join(parts)
