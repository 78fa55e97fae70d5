"""What a command task is made from and into: the host's view of the code tree (`View`), one task
before it is written (`Made`) and the two forms of its reference (`answer`, `state`), which
`answercheck.check` grades.

The families (`tasks.families`) build on these; `tasks.commands` writes and validates the tasks.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ANSWER = "answer.txt"  # at the repository root: /testbed/answer.txt
LISTING = "listing.txt"  # the files family's listing goes to a file of its own
MAX_TEXT_BYTES = 64 << 10  # files a task is about: small enough to read in a few commands
MIN_LINES, MAX_LINES = 15, 600
SAFE_PATH = re.compile(r"[A-Za-z0-9_./-]+")


@dataclass(frozen=True)
class Made:
    """One command task before it is written: its variant, instruction, reference commands, the
    reference (`answercheck`), and the file the task is about (for the steps), if one."""

    variant: str
    instruction: str
    commands: str
    expected: dict[str, Any]
    target: str | None


class View:
    """What the host knows of the task's repository (`root`, trusted: the host made it): its files
    and the texts a task may be about (ASCII, no carriage return or form feed, ending in a newline,
    small, at a path of plain characters)."""

    def __init__(self, root: Path, files: list[str]):
        self.root = root
        self.files = sorted(files)
        self._texts: dict[str, str | None] = {}

    def text(self, rel: str) -> str | None:
        """The text of file `rel`, None when it is not one a task may be about (see the class)."""
        if rel not in self._texts:
            data = (self.root / rel).read_bytes()
            plain = data.isascii() and b"\r" not in data and b"\x0c" not in data and data.endswith(b"\n")
            ok = plain and len(data) <= MAX_TEXT_BYTES and SAFE_PATH.fullmatch(rel) is not None
            self._texts[rel] = data.decode() if ok else None
        return self._texts[rel]

    def py(self) -> list[str]:
        """The `.py` files a task may be about (their text fits `text`, `MIN_LINES`..`MAX_LINES` lines)."""
        return [f for f in self.all_py() if (t := self.text(f)) is not None and MIN_LINES <= t.count("\n") <= MAX_LINES]

    def all_py(self) -> list[str]:
        """Every `.py` file of the tree, whatever its text."""
        return [f for f in self.files if f.endswith(".py")]

    def dirs(self) -> list[str]:
        """Folders (not the root) at a path of plain characters."""
        return sorted({f.rsplit("/", 1)[0] for f in self.files if "/" in f} - {""})


def text_lines(text: str) -> list[str]:
    """The lines of a text `View.text` gave (it ends in a newline), without their newlines."""
    return text.split("\n")[:-1]


def answer(expected: str, *, paths: bool = False, file: str = ANSWER) -> dict[str, Any]:
    """An answer reference: file `file` holds `expected` (compared as paths with `paths`)."""
    return {"kind": "answer", "file": file, "expected": expected, "paths": paths}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def state(view: View, files: dict[str, str | None]) -> dict[str, Any]:
    """A state reference: `files` as given (None: absent), every other file of the repository unchanged."""
    before = {f: (_digest(view.root / f) if (view.root / f).is_file() else None) for f in files}
    unchanged = {f: _digest(view.root / f) for f in view.files if f not in files}
    return {"kind": "state", "files": files, "before": before, "unchanged": unchanged}
