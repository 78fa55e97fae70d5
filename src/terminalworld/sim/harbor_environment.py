"""The simulator's Harbor environment: the sandbox environment (`agent.harbor.environment`) whose
agent commands a simulator answers, tier 3 through Harbor (`sim.harbor_loop` summarises its jobs).

Imported only inside Harbor's environment (`agent.harbor.runtime`), like the sandbox environment
it extends. Each command the project's agent sends to `answer` is one grounded turn (`sim.turn`):
it runs for real in the sandbox (the shadow, whose repository Harbor's verifier grades at the end)
and the simulator, an OpenAI-compatible endpoint serving a checkpoint, generates its output in the
sim framing (`core.views.sim_messages`); the agent sees the simulated output. Every other `exec`
(Harbor's setup, the verifier) is real. Each answered command appends a row to the trial's
`agent/shadow.jsonl`: the command, both outputs, the seconds and tokens of each side, the grounding
mode, the command's route and the real output's tokens. Tokens are the simulator's tokenizer's
(`simulator_tokenizer`, a tokenizer.json the launcher saves), or a token per 4 characters when
the simulator is only an endpoint.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from terminalworld.agent.chat_client import chat_completion
from terminalworld.agent.harbor.environment import SandboxEnvironment
from terminalworld.core.trajectories import OBSERVATION_PREFIX, Trajectory, Turn
from terminalworld.core.views import sim_messages
from terminalworld.env.sandbox import REPO_MOUNT
from terminalworld.grounding.modes import TurnGrounding
from terminalworld.grounding.state import Baseline, ShadowReader, baseline_of
from terminalworld.pipeline.artifacts import SHADOW_LOG
from terminalworld.sim.turn import GroundedSession


def token_counter(tokenizer_file: str | None) -> Callable[[str], int]:
    """Tokens of a text under the tokenizer saved at `tokenizer_file`; without one, a token per 4
    characters (an endpoint's tokenizer is not known here)."""
    if not tokenizer_file:
        return lambda text: len(text) // 4 + 1
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(tokenizer_file)
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


class SimulatedEnvironment(SandboxEnvironment):
    """The sandbox environment whose agent commands a simulator answers. With `grounding`
    (`grounding.modes`'s modes) the simulator's view holds each command's grounding block, read
    from the shadow before the command runs (from the repository as the agent found it in
    retrieved mode); in hybrid mode a command the router sends to the shadow gets its own output."""

    def __init__(
        self,
        *args,
        simulator_api: str,
        simulator_model: str = "simulator",
        simulator_tokenizer: str | None = None,
        max_tokens: int = 1024,
        grounding: str = "none",
        grounding_budget: int = 2048,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self._api, self._model, self._max_tokens = simulator_api, simulator_model, max_tokens
        self._session = GroundedSession(grounding, grounding_budget, token_counter(simulator_tokenizer))
        self._turns: list[Turn] = []
        self._start: Path | None = None  # retrieved mode: the repository as the agent found it
        self._baseline: Baseline | None = None

    @staticmethod
    def type() -> str:
        """The environment's type name in Harbor's records."""
        return "terminalworld-simulated"

    def _ground(self, command: str) -> TurnGrounding:
        """The command's grounding, read before it changes the state."""
        if self._session.mode == "none":
            return TurnGrounding()
        live = ShadowReader(self._host(REPO_MOUNT))
        if self._baseline is None:
            self._baseline = baseline_of(live)
            if self._session.mode == "retrieved":
                self._start = self._root / "grounding-start"
                shutil.copytree(self._host(REPO_MOUNT), self._start, symlinks=True)
        reader = ShadowReader(self._start) if self._start else live
        return self._session.ground(command, len(self._turns), reader, self._baseline)

    def _generate(self, task: str, command: str, blocks: dict[int, str] | None) -> tuple[str, int]:
        traj = Trajectory("shadow", None, None, task, (*self._turns, Turn(command, OBSERVATION_PREFIX)), "shadow")
        messages = [{"role": m.role, "content": m.content} for m in sim_messages(traj, grounding=blocks or {})[:-1]]
        body = {"model": self._model, "messages": messages, "max_tokens": self._max_tokens, "temperature": 0.0}
        text, _, tokens = chat_completion(self._api, body)
        return text.removeprefix(OBSERVATION_PREFIX), tokens

    async def answer(self, command: str, task: str, timeout_sec: float | None = None) -> str:
        """The simulated output of the agent's `command`, after running it for real in the shadow."""
        g = await asyncio.to_thread(self._ground, command)
        start = time.monotonic()
        real = (await self.exec(command, timeout_sec=timeout_sec)).stdout or ""
        real_s = time.monotonic() - start
        start = time.monotonic()
        seen = await asyncio.to_thread(
            self._session.observe, g, real, lambda blocks: self._generate(task, command, blocks)
        )
        sim_s = time.monotonic() - start
        self._turns.append(Turn(command, OBSERVATION_PREFIX + seen.text))
        row = {"command": command, "simulated": seen.text, "real": real}
        row |= {"sim_seconds": sim_s, "sim_tokens": seen.tokens, "real_seconds": real_s}
        row |= {"grounding": self._session.mode, "route": g.route, "grounding_tokens": g.block_tokens}
        row["observation_tokens"] = self._session.count(real)
        with open(self.trial_paths.agent_dir / SHADOW_LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
        return seen.text
