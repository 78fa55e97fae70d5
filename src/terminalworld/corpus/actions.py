"""What a recorded turn is made of, shared by the recorder's policies: a planned step (THOUGHT and
command), its SWE-ZERO assistant message, shell quoting, and where repository copies live."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

FORMAT = "mini-swe-agent-1"


@dataclass(frozen=True)
class Step:
    """One planned turn: the THOUGHT text and the bash command."""

    thought: str
    command: str


def shell_quote(s: str) -> str:
    """`s` as one single-quoted shell word."""
    return "'" + s.replace("'", "'\\''") + "'"


def action_message(step: Step) -> str:
    """A step as SWE-ZERO's assistant message: THOUGHT, then one bash block."""
    return f"THOUGHT: {step.thought}\n\n```bash\n{step.command}\n```"


def workspace_root() -> str:
    """Where recordings make their repository copies: a RAM-backed folder keeps thousands of small
    trees off the disk when the machine has one."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
