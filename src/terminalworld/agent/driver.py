"""The one episode driver: act, run, observe, until the episode ends.

Every episode in the project goes through `drive`: the Harbor agent (against Harbor's sandbox or
simulated environment), the ECHO rollouts (an HF policy or SkyRL's inference engine, token in and
token out) and the closed loop (an agent against a simulator with a real shadow, and the same
agent against the sandbox alone). What differs between them is only the policy and the
environment:

- a *policy* is a callable `policy(episode)` returning the model's next reply, or None when there
  is nothing more to say, which ends the episode where it stands (an empty reply is a reply: the
  harness answers it with a format warning). A policy that knows
  its prompt's length checks `episode.check_context(tokens)` first and returns None when the
  context is full; one whose endpoint refuses the prompt sets `episode.outcome = "context_limit"`.
- an *environment* has `run(command)`, the command's output; a simulated environment also has
  `answer(command)` (`Simulating`), whose output the agent sees instead.

Either may be synchronous or return an awaitable: `drive` is a coroutine, and `run_episode`
drives a synchronous pair without an event loop. Standard library only (the Harbor agent imports
it inside Harbor's environment).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from terminalworld.agent.harness import Episode

Policy = Callable[[Episode], "str | Awaitable[str | None] | None"]


@runtime_checkable
class Environment(Protocol):
    """Where an episode's commands run."""

    def run(self, command: str) -> str | Awaitable[str]:
        """The output of `command`."""


@runtime_checkable
class Simulating(Protocol):
    """An environment whose answers the agent sees in place of the commands' real output."""

    def answer(self, command: str) -> str | Awaitable[str]:
        """The output the agent is shown for `command`."""


@dataclass
class Timings:
    """Where an episode's time went: the policy's replies and the environment's commands."""

    generation_s: float = 0.0
    command_s: float = 0.0


@dataclass(frozen=True)
class Shell:
    """A sandbox (anything whose `run(command)` returns a result with `.output`) as an environment;
    `threaded` runs each command in a worker thread so concurrent episodes share an event loop."""

    sandbox: Any
    threaded: bool = False

    def run(self, command: str) -> str | Awaitable[str]:
        """The sandbox's output of `command`."""
        if self.threaded:
            import asyncio

            return asyncio.to_thread(lambda: self.sandbox.run(command).output)
        return self.sandbox.run(command).output


async def _value(result: Any) -> Any:
    return await result if inspect.isawaitable(result) else result


async def drive(
    episode: Episode,
    *,
    policy: Policy,
    environment: Environment | Simulating,
    on_message: Callable[[str], None] | None = None,
) -> Timings:
    """Run `episode` to its end. `on_message` sees each user message the harness adds after a
    reply (an observation, or a format warning), the last one too: it is real terminal output even
    when the turn limit ends the episode right after it."""
    respond = environment.answer if isinstance(environment, Simulating) else environment.run
    timings = Timings()
    while episode.outcome == "running":
        start = time.monotonic()
        try:
            reply = await _value(policy(episode))
        finally:
            timings.generation_s += time.monotonic() - start
        if reply is None:
            break
        command = episode.act(reply)
        warned = command is None  # the format warning is already the next user message
        replied = len(episode.messages)
        if not warned:
            start = time.monotonic()
            try:
                output = await _value(respond(command))
            finally:
                timings.command_s += time.monotonic() - start
            episode.observe(output)
        if on_message is not None and (warned or len(episode.messages) > replied):  # not after a submission
            on_message(episode.messages[-1]["content"])
    return timings


def run_episode(
    episode: Episode,
    *,
    policy: Policy,
    environment: Environment | Simulating,
    on_message: Callable[[str], None] | None = None,
) -> Timings:
    """`drive` for a synchronous policy and environment, without an event loop."""
    coroutine = drive(episode, policy=policy, environment=environment, on_message=on_message)
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise TypeError("an asynchronous policy or environment needs `await drive(...)`")
