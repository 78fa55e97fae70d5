"""Grounding modes: where the simulator's knowledge of the repository comes from.

- `none`: no grounding block (the behaviour before grounding existed, token for token).
- `retrieved`: before a command, a grounding block holds the content the command is about
  (`grounding.retrieval`), read from the repository as the episode began: what a container-free
  simulator can know.
- `replayed`: the same block, read after replaying the session's own earlier commands in the
  sandbox over a shadow copy: what perfect state tracking would give (an upper bound).
- `hybrid`: the routing table (`core.routing`) sends read, navigation and edit commands to the
  shadow, which answers them exactly; execution and unknown commands are generated with the
  block of the files they touch, read from the shadow's current state.

One option set (`GroundingOptions`) is shared by `score`, `sim-eval` and the closed loop; every row
and summary records the mode. The block is a message of kind `grounding` in the rendered view,
owned by nobody: never trained, never scored (`core.render`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from terminalworld.core import routing
from terminalworld.core.targets import COPY_LINE_SHARE, copy_share
from terminalworld.core.trajectories import Trajectory, extract_command
from terminalworld.env.sandbox import SandboxConfig
from terminalworld.errors import InputError
from terminalworld.grounding import about, retrieval
from terminalworld.grounding.state import Shadow, Sources, shadow, sources
from terminalworld.options import at_least, option

GroundingMode = Literal["none", "retrieved", "replayed", "hybrid"]
MODES: tuple[GroundingMode, ...] = ("none", "retrieved", "replayed", "hybrid")


@dataclass(frozen=True, kw_only=True)
class GroundingOptions:
    """The grounding axis of a simulator grade: the mode, the block's budget, and the sources."""

    grounding: GroundingMode = option("none", help="none, retrieved (start state), replayed (upper bound), hybrid")
    grounding_budget: int = option(2048, help="tokens of the grounding block (the module's truncation rule)")
    grounding_tasks: str | None = option(None, help="task folder whose environment/repo grounds its sessions")
    grounding_store: str | None = option(None, help="snapshot store (fsspec URL) of SWE-ZERO instances")
    grounding_output_chars: int = option(8000, help="the shadow's output cap (head and tail), as the recording's")

    def sandbox(self) -> SandboxConfig:
        """The shadow's sandbox: the recording's output cap."""
        half = self.grounding_output_chars // 2
        return SandboxConfig(head_chars=half, tail_chars=self.grounding_output_chars - half)

    def __post_init__(self) -> None:
        at_least(self, grounding_budget=1, grounding_output_chars=2)

    def grounding_inputs(self) -> list[tuple[str, str | None]]:
        """The grounding's inputs, for a command's `check_outputs`."""
        return [("--grounding-tasks", self.grounding_tasks), ("--grounding-store", self.grounding_store)]


@dataclass
class TurnGrounding:
    """What grounding gave one turn: its block (None: none), its route, and, when the shadow
    answered it exactly, that output."""

    block: str | None = None
    route: routing.Route = "generated"
    family: routing.Family = "unknown"
    served: str | None = None
    block_tokens: int = 0
    cut: bool = False

    def holds(self, text: str) -> bool:
        """Whether the block holds the terminal text `text` by the copy rule (`core.targets`: the
        stripped text inside it, or `COPY_LINE_SHARE` of its characters on lines of it): the model
        can copy the target from its block, which is emulation, not prediction."""
        return self.block is not None and bool(text.strip()) and copy_share([self.block], text) >= COPY_LINE_SHARE

    def record(self) -> dict[str, Any]:
        """The turn's fields in an output row."""
        return {
            "route": self.route,
            "router_family": self.family,
            "grounding_tokens": self.block_tokens,
            "grounding_cut": self.cut,
        }


@dataclass
class Grounder:
    """Grounding blocks and routes for held-out rows and live sessions, under one mode."""

    options: GroundingOptions
    tokenizer: Any
    source: Sources = field(default=None)  # type: ignore[assignment]

    def __post_init__(self):
        if self.options.grounding not in MODES:
            raise InputError(f"unknown grounding mode {self.options.grounding!r}; choose one of {MODES}")
        if self.source is None:
            self.source = sources(tasks=self.options.grounding_tasks, store=self.options.grounding_store)

    @property
    def mode(self) -> GroundingMode:
        """The mode."""
        return self.options.grounding

    def count(self, text: str) -> int:
        """Tokens of `text` under the simulator's tokenizer."""
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def block(self, command: str, sh: Shadow, seen: dict[str, str] | None = None) -> tuple[str | None, int, bool]:
        """The grounding block of `command` read from the shadow's current state (with the session's
        delta when `seen` is given): text (None when the command is about nothing of the
        repository), tokens, whether the budget cut it."""
        parts = retrieval.blocks(sh.reader, about.items(command), sh.baseline)
        if not parts:
            return None, 0, False
        if seen is not None:
            parts = retrieval.delta(parts, seen)
        fitted = retrieval.fit(parts, budget=self.options.grounding_budget, count=self.count)
        return fitted.text, fitted.tokens, fitted.cut

    @contextlib.contextmanager
    def session(self, row: dict[str, Any]) -> Iterator[Shadow]:
        """A shadow of the session's repository as the episode began."""
        with shadow(row, source=self.source, config=self.options.sandbox()) as sh:
            yield sh

    def turn(self, command: str, sh: Shadow, *, start: Shadow | None = None, seen=None) -> TurnGrounding:
        """Ground one command against `sh` (the session's current state): the hybrid route runs an
        exact command in it; `start` (retrieved mode) is the state the block is read from instead."""
        fam = routing.family(command)
        out = TurnGrounding(route=routing.route(command), family=fam)
        if self.mode == "none":
            return out
        if self.mode == "hybrid" and out.route == "exact":
            out.served = sh.run(command).output
            return out
        out.block, out.block_tokens, out.cut = self.block(command, start or sh, seen)
        return out

    def trajectory(self, traj: Trajectory, turns: Sequence[int]) -> dict[int, TurnGrounding]:
        """The grounding of each of `turns` of a recorded session, in order: the state before turn
        t is the start (retrieved) or the start after the session's commands before t (replayed,
        hybrid)."""
        commands = [extract_command(t.action) or "" for t in traj.turns]
        if self.mode == "none":
            return {
                t: TurnGrounding(route=routing.route(commands[t]), family=routing.family(commands[t])) for t in turns
            }
        out: dict[int, TurnGrounding] = {}
        with self.session({"instance_id": traj.instance_id, "repo": traj.repo}) as sh:
            done = 0
            for t in sorted(turns):
                if self.mode != "retrieved":
                    sh.replay([c for c in commands[done:t] if c])
                    done = t
                out[t] = self.turn(commands[t], sh)
                if out[t].served is not None:
                    done = t + 1  # the shadow ran it
        return out

    def blocks(self, traj: Trajectory) -> dict[int, str]:
        """The grounding block of every turn of a recorded session (training rows)."""
        return blocks_of(self.trajectory(traj, range(len(traj.turns))))


def same_grounding(mode: str, out: str) -> Callable[[dict[str, dict[str, Any]]], None]:
    """A rows file's check on resuming (`core.resumable`'s `accept`): raise `InputError` (one line)
    when `out` holds rows made under another grounding mode, since resuming would mix two modes'
    rows under one summary. A row without the field was written before grounding existed: `none`."""

    def accept(done: dict[str, dict[str, Any]]) -> None:
        for instance, row in done.items():
            made = row.get("grounding", "none")
            if made != mode:
                raise InputError(
                    f"{out}: holds rows made with --grounding {made} (first: {instance}), not {mode}; "
                    "it is neither resumed nor mixed: give another --out or remove it"
                )

    return accept


def blocks_of(grounded: dict[int, TurnGrounding]) -> dict[int, str]:
    """The blocks the renderer puts in the view, by turn."""
    return {t: g.block for t, g in grounded.items() if g.block is not None}
