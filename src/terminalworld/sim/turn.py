"""One grounded turn of a live session: the route a command takes, the grounding block the simulator
reads, and the observation the agent is shown.

The closed loop (`sim.closed_loop`) and the simulated Harbor environment (`sim.harbor_environment`)
both answer an agent's command this way: `ground` before the command runs in the shadow (the block
is read from the state it finds), then `observe` with the shadow's output and the simulator. Loads
in Harbor's environment too (standard library and the grounding modules only).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from terminalworld.core.routing import route
from terminalworld.grounding import about, retrieval
from terminalworld.grounding.modes import TurnGrounding
from terminalworld.grounding.state import Baseline, ShadowReader

# The simulator, given the blocks of the session's turns (None: no grounding): (text, tokens).
Generate = Callable[[dict[int, str] | None], tuple[str, int]]


@dataclass
class Observation:
    """What a turn showed the agent (the simulator's text, or the shadow's on an exact route)."""

    text: str
    tokens: int  # tokens the simulator generated (0 when the shadow answered)
    grounding: TurnGrounding


@dataclass
class GroundedSession:
    """A live session's grounding under one mode: each generated turn's block is kept for the
    turns after it, and blocks carry only what changed since the session last saw a file."""

    mode: str
    budget: int
    count: Callable[[str], int]  # tokens under the simulator's tokenizer
    blocks: dict[int, str] = field(default_factory=dict)
    seen: dict[str, str] = field(default_factory=dict)

    def ground(self, command: str, index: int, reader: ShadowReader, baseline: Baseline) -> TurnGrounding:
        """Turn `index`'s route and block, read from `reader` (the shadow before `command` runs, or
        in retrieved mode the start) against the session's `baseline`."""
        g = TurnGrounding(route=route(command) if self.mode == "hybrid" else "generated")
        if self.mode == "none" or g.route == "exact":
            return g
        parts = retrieval.blocks(reader, about.items(command), baseline)
        if parts:
            fitted = retrieval.fit(retrieval.delta(parts, self.seen), budget=self.budget, count=self.count)
            g.block, g.block_tokens, g.cut = fitted.text, fitted.tokens, fitted.cut
            self.blocks[index] = fitted.text
        return g

    def observe(self, g: TurnGrounding, real: str, generate: Generate) -> Observation:
        """The observation: the shadow's `real` output on an exact route, else the simulator's (with
        the session's blocks when grounded)."""
        if g.route == "exact":
            return Observation(real, 0, g)
        text, tokens = generate(None if self.mode == "none" else self.blocks)
        return Observation(text, tokens, g)
