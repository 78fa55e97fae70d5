"""`terminalworld show-mask`: see which tokens each arm trains, and how tokens split by role."""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from typing import Literal

import numpy as np

from terminalworld.core import terminal
from terminalworld.core.render import ARMS, Rendered
from terminalworld.errors import InputError
from terminalworld.options import at_least, option
from terminalworld.train.render_rows import RenderOptions

_COLORS = {"assistant": "\x1b[30;43m", "user": "\x1b[30;46m"}
_RESET = "\x1b[0m"
_OPEN, _CLOSE = "[[", "]]"


def highlight(r: Rendered, arm: str, color: bool, max_chars: int | None = None, *, inert: bool = False) -> str:
    """The rendered text with the arm's trained tokens marked: background colour by role on a
    terminal, `[[...]]` around each trained run otherwise; `inert`: the trajectory's own control
    characters escaped (`core.terminal`), so only the marks drive a terminal."""
    trained = r.mask(arm)
    safe = terminal.inert if inert else str
    roles = r.role_of_tokens()
    out, pos, run = [], 0, None
    for i, (s, e) in enumerate(r.offsets.tolist()):
        if s > pos:
            out.append(safe(r.text[pos:s]))
        state = roles[i] if trained[i] else None
        if state != run:
            if run is not None:
                out.append(_RESET if color else _CLOSE)
            if state is not None:
                out.append(_COLORS[state] if color else _OPEN)
            run = state
        out.append(safe(r.text[max(s, pos) : e]))
        pos = max(pos, e)
    if run is not None:
        out.append(_RESET if color else _CLOSE)
    out.append(safe(r.text[pos:]))
    text = "".join(out)
    return text if max_chars is None or len(text) <= max_chars else text[:max_chars] + "\n... (truncated)"


@dataclass
class Coverage:
    """Token counts accumulated over rendered trajectories: all tokens, tokens by role, and trained
    tokens by arm."""

    tokens: int = 0
    by_role: Counter = None  # system / user / assistant / scaffolding
    by_arm: Counter = None

    def __post_init__(self):
        self.by_role = self.by_role or Counter()
        self.by_arm = self.by_arm or Counter()

    def add(self, r: Rendered) -> None:
        """Add one rendered trajectory: its tokens by role (tokens no message owns count as
        scaffolding) and the size of each arm's mask."""
        roles = r.role_of_tokens()
        self.tokens += len(roles)
        for role, n in zip(*np.unique(roles, return_counts=True), strict=False):
            self.by_role["scaffolding" if role == "none" else str(role)] += int(n)
        for arm in ARMS:
            self.by_arm[arm] += int(r.mask(arm).sum())

    def table(self) -> str:
        """Two Markdown tables: tokens by role, then trained tokens by arm, each with its share of all
        tokens."""
        lines = ["| tokens of | count | share |", "|---|---:|---:|"]
        for role in ("system", "user", "assistant", "scaffolding"):
            n = self.by_role[role]
            lines.append(f"| {role} | {n} | {n / max(self.tokens, 1):.1%} |")
        lines += ["", "| arm | trained tokens | share |", "|---|---:|---:|"]
        for arm in ARMS:
            n = self.by_arm[arm]
            lines.append(f"| {arm} | {n} | {n / max(self.tokens, 1):.1%} |")
        return "\n".join(lines)


@dataclass(frozen=True, kw_only=True)
class ShowMaskConfig(RenderOptions):
    """One trajectory shown with each arm's trained tokens, and the coverage table of the input."""

    arm: Literal["assistant", "full", "user", "all"] = option("all")
    index: int = option(0, help="which trajectory of the input to print")
    max_chars: int | None = option(None, help="cut each printed arm after this many characters")
    color: Literal["auto", "always", "never"] = option("auto")

    def __post_init__(self) -> None:
        super().__post_init__()
        at_least(self, index=0, max_chars=1)

    def check_paths(self) -> None:
        """Refuse, before any work, outputs that cannot be written or that touch an input."""
        self.check_files()


def show_mask(cfg: ShowMaskConfig) -> None:
    """Print the chosen trajectory once per arm with its trained tokens marked, then the coverage
    by role over every trajectory of the input."""
    from terminalworld.core.formats import load_trajectories

    renderer = cfg.renderer()
    trajs = load_trajectories(cfg.inputs)
    if not 0 <= cfg.index < len(trajs):
        raise InputError(f"--index {cfg.index} is out of range: the input has {len(trajs)} trajectories")
    color = sys.stdout.isatty() if cfg.color == "auto" else cfg.color == "always"
    shown = renderer.render(trajs[cfg.index])
    for arm in ARMS if cfg.arm == "all" else (cfg.arm,):
        print(
            f"=== {terminal.for_terminal(shown.instance_id)}: arm {arm} (trained tokens {'highlighted' if color else 'in [[ ]]'}) ==="
        )
        print(highlight(shown, arm, color, cfg.max_chars, inert=sys.stdout.isatty()))
    coverage = Coverage()
    for t in trajs:
        coverage.add(renderer.render(t))
    print(f"\n=== coverage over {len(trajs)} trajectories, {coverage.tokens} tokens ===")
    print(coverage.table())
