"""Text from trajectories, models or sandboxed commands made safe to print on an operator's terminal."""

from __future__ import annotations

import re
import sys
from typing import TextIO

# C0 controls but newline and tab, DEL, and C1 controls: what a terminal would act on (ESC and OSC
# sequences set titles, write the clipboard, clear the screen); and the bidirectional controls
# (embeddings, overrides, isolates, marks), which reorder what is shown so that text reads as other
# text (after U+202E, `txt.exe` shows as `exe.txt`).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def inert(text: str) -> str:
    """`text` with every control character a terminal acts on written as a visible escape (`\\x1b`,
    `\\u202e`)."""
    return _CONTROL.sub(lambda m: _escape(m.group()), text)


def for_terminal(text: str, stream: TextIO | None = None) -> str:
    """`text` as it may be written to `stream` (default stdout): `inert` when that is a terminal,
    unchanged otherwise (a file or pipe gets the bytes as they are)."""
    stream = sys.stdout if stream is None else stream
    return inert(text) if stream.isatty() else text
