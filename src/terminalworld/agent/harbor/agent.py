"""SWE-ZERO's agent as a Harbor agent: the format the checkpoints were trained on, one class for
production (a vLLM endpoint) and for the local miniature (the project's own endpoint over an
in-process HF model, `serve.py`), both OpenAI-compatible chat completions.

Imported only inside Harbor's environment (see `harbor.environment`); it needs nothing beyond the standard
library and Harbor. Kwargs (Harbor's `AgentConfig.kwargs`) are `HarnessConfig`'s fields,
`command_timeout_s`, the endpoint `api_base` and its `served_model` name (Harbor's own `base_url`
and `model_name` would send the name through litellm's provider parsing), and `replies`: a JSON file {task name or "*": [reply, ...]} that makes the
agent scripted, replaying those replies instead of calling a model (the harness, Harbor and the
verifier stay real, so a script's score is known in advance).

Each trial leaves `/logs/agent/trajectory.json`: the episode in SWE-ZERO's row format, with its
outcome, turns and token counts, so solved episodes can join a corpus.
"""

from __future__ import annotations

import asyncio
import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext

from terminalworld.agent.chat_client import ContextLengthExceededError, chat_completion
from terminalworld.agent.driver import Timings, drive
from terminalworld.agent.harness import Episode, HarnessConfig
from terminalworld.core.prompts import TASK_SYSTEM_PROMPT

VERSION = "1"


class SweZeroAgent(BaseAgent):
    """THOUGHT plus one bash block per turn, `Observation: ` answers, the submission sentinel."""

    def __init__(self, logs_dir: Path, model_name: str | None = None, *args, **kwargs):
        fields = set(HarnessConfig.__dataclass_fields__)
        self.harness = HarnessConfig(**{k: kwargs.pop(k) for k in list(kwargs) if k in fields})
        self.command_timeout_s = float(kwargs.pop("command_timeout_s", 60.0))
        self.api_base = kwargs.pop("api_base", None)
        self.served_model = kwargs.pop("served_model", "model")
        replies = kwargs.pop("replies", None)
        self.script = json.loads(Path(replies).read_text()) if replies else None
        super().__init__(logs_dir, model_name, *args, **kwargs)
        # Each attempt samples its own replies (pass@k needs k different attempts): the seed mixes the
        # harness seed with the trial's name, which Harbor makes unique per attempt.
        self.attempt_seed = zlib.crc32(f"{self.harness.seed}:{Path(logs_dir).parent.name}".encode()) % (1 << 31)

    @staticmethod
    def name() -> str:
        """The agent's name in Harbor's records."""
        return "terminalworld-swe-zero"

    def version(self) -> str | None:
        """The harness version."""
        return VERSION

    async def setup(self, environment: BaseEnvironment) -> None:
        """Nothing to install; checks that a model or a script drives the agent."""
        if self.script is None and not self.api_base:
            raise ValueError("the model agent needs an OpenAI-compatible endpoint: kwargs api_base")

    def _complete(self, messages: list[dict[str, str]]) -> tuple[str, int, int]:
        """(reply, prompt tokens, completion tokens) from the OpenAI-compatible endpoint."""
        body = {
            "model": self.served_model,
            "messages": messages,
            "temperature": self.harness.temperature,
            "max_tokens": self.harness.max_tokens_per_turn,
            "seed": (self.attempt_seed + len(messages)) % (1 << 31),
        }
        return chat_completion(self.api_base, body)

    async def run(self, instruction: str, environment: BaseEnvironment, context: AgentContext) -> None:
        """One episode on `instruction`; tokens, outcome and timings go to `context`."""
        episode = Episode(system=TASK_SYSTEM_PROMPT, task=instruction, config=self.harness)
        context.n_input_tokens, context.n_output_tokens, context.metadata = 0, 0, {}
        timings = Timings()
        try:
            policy, where = self._policy(environment, context), self._where(environment, episode)
            timings = await drive(episode, policy=policy, environment=where)
        finally:
            context.metadata = {
                "outcome": episode.outcome,
                "turns": episode.turns,
                "format_errors": episode.format_errors,
                "generation_s": round(timings.generation_s, 4),
                "command_s": round(timings.command_s, 4),
            }
            row = {"messages": episode.messages, "metadata": context.metadata}
            (self.logs_dir / "trajectory.json").write_text(json.dumps(row, ensure_ascii=False, indent=1))

    def _policy(self, environment: BaseEnvironment, context: AgentContext):
        """The script's next reply, or the endpoint's (None when the context is full)."""
        if self.script is not None:
            scripted = iter(self.script.get(environment.environment_name, self.script.get("*", [])))
            return lambda episode: next(scripted, None)
        used = 0  # tokens of the conversation so far, as the endpoint counted them

        async def policy(episode: Episode) -> str | None:
            nonlocal used
            if not episode.check_context(used):
                return None
            try:
                reply, prompt, completion = await asyncio.to_thread(self._complete, episode.messages)
            except ContextLengthExceededError:
                episode.outcome = "context_limit"
                return None
            used = prompt + completion
            context.n_input_tokens += prompt
            context.n_output_tokens += completion
            return reply

        return policy

    def _where(self, environment: BaseEnvironment, episode: Episode) -> HarborCommands | SimulatedCommands:
        """Harbor's environment as the driver's: a simulated one answers, and runs the command too."""
        if isinstance(environment, SimulatingHarbor):
            return SimulatedCommands(environment, episode.task, self.command_timeout_s)
        return HarborCommands(environment, self.command_timeout_s)


@runtime_checkable
class SimulatingHarbor(Protocol):
    """A Harbor environment with a simulator (`sim.harbor_environment.SimulatedEnvironment`)."""

    async def answer(self, command: str, task: str, timeout_sec: float | None = None) -> str:
        """The simulated output of `command`, after running it for real."""


@dataclass(frozen=True)
class HarborCommands:
    """A Harbor environment's `exec` as the driver's environment."""

    environment: BaseEnvironment
    timeout_s: float

    async def run(self, command: str) -> str:
        """The command's output in the trial's environment."""
        return (await self.environment.exec(command, timeout_sec=self.timeout_s)).stdout or ""


@dataclass(frozen=True)
class SimulatedCommands:
    """A simulating Harbor environment as the driver's: the agent sees the simulator's answer."""

    environment: SimulatingHarbor
    task: str
    timeout_s: float

    async def answer(self, command: str) -> str:
        """The simulated output of `command` (which also runs for real)."""
        return await self.environment.answer(command, self.task, timeout_sec=self.timeout_s)
