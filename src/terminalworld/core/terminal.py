"""Text from trajectories, models or sandboxed commands made safe to print on an operator's terminal."""

from __future__ import annotations

import re
import sys
from typing import TextIO

# C0 controls but newline and tab, DEL, and C1 controls: what a terminal would act on (ESC and OSC
# sequences set titles, write the clipboard, clear the screen).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def inert(text: str) -> str:
    """`text` with every control character a terminal acts on written as a visible escape (`\\x1b`)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def for_terminal(text: str, stream: TextIO | None = None) -> str:
    """`text` as it may be written to `stream` (default stdout): `inert` when that is a terminal,
    unchanged otherwise (a file or pipe gets the bytes as they are)."""
    stream = sys.stdout if stream is None else stream
    return inert(text) if stream.isatty() else text
