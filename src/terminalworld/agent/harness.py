"""SWE-ZERO's agent format, the one the checkpoints were trained on, as one episode state machine.

The model writes a THOUGHT and exactly one bash block; the harness runs the command and answers
with `Observation: ` plus the output (truncated by the sandbox, head and tail around a note, as
SWE-ZERO's); a reply without exactly one block gets mini-swe-agent's format warning instead; a
command whose output starts with `COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT` submits. The episode ends
on submission, at the turn limit, or when the next prompt would not fit the context.

This module has no model and no environment: a backend supplies replies, an environment runs
commands (the Harbor agent class, the recorder's solver and the simulator all drive it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from terminalworld.core.trajectories import OBSERVATION_PREFIX, SUBMIT_SENTINEL, bash_blocks, extract_command

# One paragraph each, so that `trajectories.harness_spans` (ECHO's O') covers all of it.
_HOW = (
    f"If you want to end the task, please issue the following command: `echo {SUBMIT_SENTINEL}` "
    "without any other command. Else, please format your response as a THOUGHT section followed by "
    "exactly one ```bash code block holding one command.\n\n"
)
FORMAT_WARNING = "Please always provide EXACTLY ONE action in triple backticks, found {n} actions. " + _HOW
# A reply that opens a block the command extractor cannot read: say what was wrong, not a count.
BROKEN_BLOCK_WARNING = (
    "Please always provide EXACTLY ONE action in triple backticks, found no complete action: {why}. " + _HOW
)
UNCLOSED = "the reply ends inside a ```bash block that is never closed (as a reply cut at the token limit does)"
MALFORMED = "a ```bash block needs its command on the lines after ```bash and its closing ``` on a line of its own"
_FENCE = re.compile(r"```(?:bash|mswea_bash_command)\b")

Outcome = Literal["submitted", "turn_limit", "context_limit", "running"]


@dataclass(frozen=True, kw_only=True)
class HarnessConfig:
    """An episode's limits, as the agent-eval CLI and the Harbor agent's kwargs spell them."""

    max_turns: int = 30
    context_tokens: int = 32768
    max_tokens_per_turn: int = 2048
    temperature: float = 0.0
    seed: int = 0


def count_blocks(reply: str) -> int:
    """How many complete bash blocks a reply has (the format wants exactly one)."""
    return len(bash_blocks(reply))


def format_warning(reply: str) -> str:
    """The warning for a reply without exactly one complete bash block, saying what was wrong: how
    many blocks it has, or, when it has none but opens one, that the last is never closed (a reply
    cut at the token limit) or is not laid out as a block."""
    n = count_blocks(reply)
    opened = list(_FENCE.finditer(reply))
    if n or not opened:
        return FORMAT_WARNING.format(n=n)
    closed = "```" in reply[opened[-1].end() :]
    return BROKEN_BLOCK_WARNING.format(why=MALFORMED if closed else UNCLOSED)


@dataclass
class Episode:
    """Messages so far and where the episode stands. Call `act` with each model reply; it returns
    the command to run, or None after a format warning; then `observe` the command's output."""

    system: str
    task: str
    config: HarnessConfig
    messages: list[dict[str, str]] = field(default_factory=list)
    turns: int = 0
    format_errors: int = 0
    outcome: Outcome = "running"

    def __post_init__(self) -> None:
        if not self.messages:
            self.messages = [{"role": "system", "content": self.system}, {"role": "user", "content": self.task}]

    def act(self, reply: str) -> str | None:
        """Record the model's reply; the bash command it asks for, or None when it broke the format
        (the warning is already the next user message)."""
        self.turns += 1
        self.messages.append({"role": "assistant", "content": reply})
        command = extract_command(reply)
        if command is None:
            self.format_errors += 1
            self.messages.append({"role": "user", "content": format_warning(reply)})
            self._check_turns()
        return command

    def observe(self, output: str) -> None:
        """Record a command's output; the episode is submitted when its first line is the sentinel."""
        if output.lstrip("\n").split("\n", 1)[0].strip() == SUBMIT_SENTINEL:
            self.outcome = "submitted"
            return
        self.messages.append({"role": "user", "content": OBSERVATION_PREFIX + output})
        self._check_turns()

    def check_context(self, prompt_tokens: int) -> bool:
        """Whether a prompt of `prompt_tokens` leaves room for a reply; ends the episode if not."""
        if prompt_tokens + self.config.max_tokens_per_turn > self.config.context_tokens:
            self.outcome = "context_limit"
        return self.outcome == "running"

    def _check_turns(self) -> None:
        if self.turns >= self.config.max_turns:
            self.outcome = "turn_limit"
