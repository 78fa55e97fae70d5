"""The episode driver: act, run, observe until the harness ends the episode, for synchronous and
asynchronous policies and environments, real and simulated."""

import asyncio

import pytest

from terminalworld.agent.driver import Shell, drive, run_episode
from terminalworld.agent.harness import Episode, HarnessConfig
from terminalworld.core.trajectories import SUBMIT_SENTINEL
from terminalworld.env.sandbox import Sandbox, SandboxConfig


def _bash(command: str) -> str:
    return f"THOUGHT: go.\n\n```bash\n{command}\n```"


def _scripted(*replies: str):
    it = iter(replies)
    return lambda episode: next(it, None)


def _episode(max_turns: int = 10) -> Episode:
    return Episode(system="sys", task="task", config=HarnessConfig(max_turns=max_turns))


def test_a_scripted_episode_in_the_sandbox_runs_observes_and_submits(workdir):
    (workdir / "a.txt").write_text("hello\n")
    episode, seen = _episode(), []
    replies = ("no block here", _bash("cat a.txt"), _bash(f"echo {SUBMIT_SENTINEL}"), _bash("never runs"))
    timings = run_episode(
        episode,
        policy=_scripted(*replies),
        environment=Shell(Sandbox(str(workdir), SandboxConfig())),
        on_message=seen.append,
    )
    assert (episode.outcome, episode.turns, episode.format_errors) == ("submitted", 3, 1)
    # The warning and the observation reach `on_message`; the submission adds no message.
    assert len(seen) == 2 and seen[0].startswith("Please always provide EXACTLY ONE action")
    assert seen[1] == "Observation: hello\n" == episode.messages[-2]["content"]
    assert timings.command_s > 0 and timings.generation_s >= 0


def test_the_last_observation_reaches_on_message_at_the_turn_limit():
    class Echo:
        def run(self, command: str) -> str:
            return f"ran {command}"

    episode, seen = _episode(max_turns=2), []
    run_episode(
        episode, policy=_scripted(_bash("a"), _bash("b"), _bash("c")), environment=Echo(), on_message=seen.append
    )
    assert episode.outcome == "turn_limit" and seen == ["Observation: ran a", "Observation: ran b"]


def test_a_policy_with_nothing_to_say_ends_the_episode_where_it_stands_but_an_empty_reply_is_a_reply():
    class Never:
        def run(self, command: str) -> str:
            raise AssertionError("no command was asked for")

    episode = _episode()
    run_episode(episode, policy=_scripted(""), environment=Never())
    assert (episode.outcome, episode.turns, episode.format_errors) == ("running", 1, 1)


def test_a_simulated_environment_answers_and_async_parts_are_awaited():
    class Simulated:
        def __init__(self):
            self.ran: list[str] = []

        def run(self, command: str) -> str:
            raise AssertionError("a simulated environment's answer is what the agent sees")

        async def answer(self, command: str) -> str:
            await asyncio.sleep(0)
            self.ran.append(command)
            return "simulated"

    replies = iter([_bash("ls"), None])

    async def policy(episode):
        await asyncio.sleep(0)
        return next(replies)

    env, episode = Simulated(), _episode()
    asyncio.run(drive(episode, policy=policy, environment=env))
    assert env.ran == ["ls"] and episode.messages[-1]["content"] == "Observation: simulated"
    with pytest.raises(TypeError, match="await drive"):
        run_episode(_episode(), policy=policy, environment=env)


def test_a_policy_that_finds_the_context_full_ends_it_at_the_context_limit():
    episode = _episode()

    def policy(episode):
        return None if not episode.check_context(10**9) else _bash("ls")

    run_episode(episode, policy=policy, environment=Shell(sandbox=None))
    assert episode.outcome == "context_limit" and episode.turns == 0
