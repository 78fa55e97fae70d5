"""Tier 3 / Phase 0.5: an agent acts against a simulator, and a real shadow sandbox runs the same
commands.

The episode is the harness's (`agent.harness.Episode`): the agent's replies, its commands, the
submission sentinel and the limits, exactly as in the agent grade; only where an observation comes
from changes. Each command goes to the simulator, which generates its output from the session so
far in the agent framing, and to a real sandbox over a shadow copy of the task's repository. Per
turn: the command, both outputs, their similarity, and the seconds and tokens each took. Afterwards
the task's real verifier runs on the shadow repository: the agent believed it was done when it
submitted (after what the simulator showed it), and the verifier says whether that was true.

The sim-to-real gap compares that reward with the reward of the same agent, with the same seeds,
acting against the real sandbox alone (`real_episode`). The same loop runs inside Harbor with
`agent-eval --environment simulated` (`sim.harbor_loop`). The agent is anything with `reply(messages)`:
a model served in process (`ModelAgent`) or a script (`ScriptedAgent`, e.g. the solver's plan).
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from terminalworld.agent.driver import Shell, run_episode
from terminalworld.agent.harness import Episode, HarnessConfig
from terminalworld.core.prompts import TASK_SYSTEM_PROMPT
from terminalworld.core.trajectories import OBSERVATION_PREFIX, Trajectory, Turn
from terminalworld.env.sandbox import Sandbox, SandboxConfig
from terminalworld.grounding.modes import Grounder, TurnGrounding
from terminalworld.grounding.state import Shadow
from terminalworld.sim.backend import Simulator
from terminalworld.sim.fidelity import similarity
from terminalworld.sim.turn import GroundedSession
from terminalworld.tasks.layout import repo_copy, verify

SANDBOX = SandboxConfig()
DIVERGED_BELOW = 1.0  # a turn diverges when its simulated output is not exactly the real one


class Agent(Protocol):
    """Replies to the conversation so far."""

    def reply(self, messages: list[dict[str, str]]) -> str:
        """The agent's next reply to `messages` (empty when it has nothing more to say)."""


@dataclass
class ScriptedAgent:
    """Fixed replies in order (then nothing: the episode ends)."""

    replies: Sequence[str]
    _next: int = 0

    def reply(self, messages: list[dict[str, str]]) -> str:
        """The agent's next reply to `messages` (empty when it has nothing more to say)."""
        self._next += 1
        return self.replies[self._next - 1] if self._next <= len(self.replies) else ""


@dataclass
class ModelAgent:
    """A chat model served in process (`agent.serve.ChatModel`) at the harness's decoding."""

    model: Any
    harness: HarnessConfig

    def reply(self, messages: list[dict[str, str]]) -> str:
        """The agent's next reply to `messages` (empty when it has nothing more to say)."""
        request = {
            "messages": messages,
            "max_tokens": self.harness.max_tokens_per_turn,
            "temperature": self.harness.temperature,
            "seed": self.harness.seed,
        }
        status, body = self.model.complete(request)
        return body["choices"][0]["message"]["content"] if status == 200 else ""


@dataclass
class LoopTurn:
    """One command: what the simulator said, what the shadow sandbox said, and their costs."""

    command: str
    simulated: str
    real: str
    similarity: float
    sim_seconds: float
    sim_tokens: int
    real_seconds: float
    route: str = "generated"  # hybrid grounding: "exact" when the shadow's output was served
    # Tokens of the real observation (the shadow's output, the simulator's tokenizer), whichever
    # route answered: a generated turn's own text is capped, so counting it would shrink its share.
    observation_tokens: int = 0
    grounding_tokens: int = 0


@dataclass
class LoopEpisode:
    """A closed-loop episode with its shadow: turns, outcome, the real reward and costs."""

    task: str
    outcome: str
    turns: list[LoopTurn] = field(default_factory=list)
    reward: float = 0.0  # the real verifier on the shadow repository
    agent_seconds: float = 0.0

    @property
    def first_divergence(self) -> int | None:
        """The 1-based turn whose simulated output first differs from the real one."""
        return next((i + 1 for i, t in enumerate(self.turns) if t.similarity < DIVERGED_BELOW), None)

    @property
    def believed_solved(self) -> bool:
        """The agent submitted: it believed, from what the simulator showed it, that it was done."""
        return self.outcome == "submitted"

    @property
    def outcome_agrees(self) -> bool:
        """The agent's belief matches the real verifier on the shadow repository."""
        return self.believed_solved == (self.reward >= 1.0)

    def row(self) -> dict[str, Any]:
        """The episode as a JSON row."""
        return {
            "task": self.task,
            "outcome": self.outcome,
            "reward": self.reward,
            "believed_solved": self.believed_solved,
            "outcome_agrees": self.outcome_agrees,
            "first_divergence": self.first_divergence,
            "agent_seconds": self.agent_seconds,
            "turns": [asdict(t) for t in self.turns],
        }


def _policy(agent: Agent):
    """The agent as the driver's policy: an empty reply means it has nothing more to say."""
    return lambda episode: agent.reply(episode.messages) or None


@dataclass
class ShadowedSimulator:
    """The closed loop's environment: the simulator answers each command from the session so far
    (in the agent framing), and the real shadow sandbox runs it too; with a grounder, each turn is
    grounded (`sim.turn`) from `view` (the shadow, or in retrieved mode a pristine copy of the start)."""

    simulator: Simulator
    shadow: Sandbox
    episode: Episode
    grounder: Grounder | None = None
    view: Shadow | None = None
    turns: list[LoopTurn] = field(default_factory=list)
    session: GroundedSession | None = None

    def __post_init__(self):
        if self.grounder is not None and self.session is None:
            g = self.grounder
            self.session = GroundedSession(g.mode, g.options.grounding_budget, g.count)

    def answer(self, command: str) -> str:
        """The simulated output of `command`, after running it in the shadow."""
        # The session so far: every (reply, the harness's answer) pair, format warnings included,
        # then the reply that asked for `command`, whose observation is to be simulated.
        said = self.episode.messages[2:]
        turns = [Turn(a["content"], u["content"]) for a, u in zip(said[:-1:2], said[1::2], strict=True)]
        session = self.session or GroundedSession("none", 0, len)
        g = session.ground(command, len(turns), self.view.reader, self.view.baseline) if self.view else None
        start = time.monotonic()
        real = self.shadow.run(command).output
        real_s = time.monotonic() - start
        traj = Trajectory(
            "loop",
            None,
            TASK_SYSTEM_PROMPT,
            self.episode.task,
            (*turns, Turn(said[-1]["content"], OBSERVATION_PREFIX)),
            "loop",
        )

        def generate(blocks: dict[int, str] | None) -> tuple[str, int]:
            request = [(traj, len(turns))]
            [sim] = self.simulator.simulate(request) if blocks is None else self.simulator.simulate(request, [blocks])
            return sim.text, sim.tokens

        start = time.monotonic()
        seen = session.observe(g or TurnGrounding(), real, generate)
        sim_s = time.monotonic() - start
        turn = LoopTurn(command, seen.text, real, similarity(seen.text, real), sim_s, seen.tokens, real_s)
        if self.session is not None:
            turn.route, turn.grounding_tokens = seen.grounding.route, seen.grounding.block_tokens
            turn.observation_tokens = self.session.count(real)
        self.turns.append(turn)
        return seen.text


def closed_loop_episode(
    *,
    agent: Agent,
    simulator: Simulator,
    task_dir: Path,
    harness: HarnessConfig,
    sandbox: SandboxConfig = SANDBOX,
    grounder: Grounder | None = None,
) -> LoopEpisode:
    """One episode of `agent` against `simulator` on the task at `task_dir`, with a real shadow.
    With a grounder, each command's grounding block is read before it runs (from the shadow, or
    in retrieved mode from a pristine copy of the start), in the session's delta form; in hybrid
    mode a command the router sends to the shadow gets the shadow's output, not a generated one."""
    episode = Episode(system=TASK_SYSTEM_PROMPT, task=(task_dir / "instruction.md").read_text(), config=harness)
    with repo_copy(task_dir, prefix="tw-shadow-") as repo, contextlib.ExitStack() as stack:
        view = Shadow(repo, sandbox, pin_times=False) if grounder else None
        if grounder and grounder.mode == "retrieved":
            view = Shadow(stack.enter_context(repo_copy(task_dir, prefix="tw-start-")), sandbox)
        environment = ShadowedSimulator(simulator, Sandbox(str(repo), sandbox), episode, grounder, view)
        timings = run_episode(episode, policy=_policy(agent), environment=environment)
        reward = verify(task_dir, repo, config=sandbox)
    return LoopEpisode(
        task=task_dir.name,
        outcome=episode.outcome,
        turns=environment.turns,
        reward=reward,
        agent_seconds=timings.generation_s,
    )


def real_episode(*, agent: Agent, task_dir: Path, harness: HarnessConfig, sandbox: SandboxConfig = SANDBOX):
    """The same agent against the real sandbox alone: (reward, outcome, seconds per command)."""
    episode = Episode(system=TASK_SYSTEM_PROMPT, task=(task_dir / "instruction.md").read_text(), config=harness)
    with repo_copy(task_dir, prefix="tw-real-") as repo:
        shell = TimedShell(Shell(Sandbox(str(repo), sandbox)))
        run_episode(episode, policy=_policy(agent), environment=shell)
        return verify(task_dir, repo, config=sandbox), episode.outcome, shell.seconds


@dataclass
class TimedShell:
    """A shell that keeps each command's seconds (the sandbox side of the cost per turn)."""

    shell: Shell
    seconds: list[float] = field(default_factory=list)

    def run(self, command: str) -> str:
        """The command's output."""
        start = time.monotonic()
        try:
            return self.shell.run(command)
        finally:
            self.seconds.append(time.monotonic() - start)


def confusion(real: list[bool], simulated: list[bool]) -> dict[str, int]:
    """The confusion table of episodes, real outcome against simulated outcome (aligned lists)."""
    pairs = list(zip(real, simulated, strict=True))
    return {
        "real_solved_sim_solved": sum(r and s for r, s in pairs),
        "real_solved_sim_failed": sum(r and not s for r, s in pairs),
        "real_failed_sim_solved": sum(not r and s for r, s in pairs),
        "real_failed_sim_failed": sum(not r and not s for r, s in pairs),
    }


def loop_summary(episodes: list[LoopEpisode], real_rewards: list[float], real_seconds: list[float]) -> dict[str, Any]:
    """Divergence, outcome agreement, the sim-to-real gap, the cost per turn and per episode, and two
    confusion tables over the episodes: the same agent's solve against the real sandbox alone (real)
    against its solve when the simulator answered (`confusion`: the verifier on the shadow), and
    against what it believed from the simulator (`belief_confusion`: it submitted). Only where both
    real outcomes occur can agreement say more than how often the simulator printed the sentinel."""
    turns = [t for e in episodes for t in e.turns]
    first = [e.first_divergence for e in episodes]
    sim_reward = statistics.fmean(e.reward for e in episodes) if episodes else None
    real_reward = statistics.fmean(real_rewards) if real_rewards else None
    mean = statistics.fmean
    return {
        "episodes": len(episodes),
        "turns": len(turns),
        "turn_similarity": mean(t.similarity for t in turns) if turns else None,
        "diverged_episodes": sum(f is not None for f in first),
        "first_divergence": first,
        "outcome_agreement": mean(e.outcome_agrees for e in episodes) if episodes else None,
        "reward_against_simulator": sim_reward,
        "reward_against_sandbox": real_reward,
        "sim_to_real_gap": None if sim_reward is None or real_reward is None else real_reward - sim_reward,
        "real_outcomes_both": len({r >= 1.0 for r in real_rewards}) == 2,
        "confusion": confusion([r >= 1.0 for r in real_rewards], [e.reward >= 1.0 for e in episodes])
        if len(real_rewards) == len(episodes)
        else None,
        "belief_confusion": confusion([r >= 1.0 for r in real_rewards], [e.believed_solved for e in episodes])
        if len(real_rewards) == len(episodes)
        else None,
        **route_shares(turns),
        "seconds_per_simulated_turn": mean(t.sim_seconds for t in turns) if turns else None,
        "tokens_per_simulated_turn": mean(t.sim_tokens for t in turns) if turns else None,
        "seconds_per_sandbox_turn": mean(real_seconds) if real_seconds else None,
        "simulated_seconds_per_episode": mean(sum(t.sim_seconds for t in e.turns) for e in episodes)
        if episodes
        else None,
        "sandbox_seconds_per_episode": (sum(real_seconds) / len(real_rewards)) if real_rewards else None,
    }


def route_shares(turns: list[LoopTurn]) -> dict[str, Any]:
    """Hybrid grounding: the turns and the share of observation tokens each route served, counted
    on the real observations (what the task's output is, not what a capped generation printed);
    empty when no turn counted its tokens, i.e. without grounding."""
    total = sum(t.observation_tokens for t in turns)
    if not total:
        return {}
    exact = [t for t in turns if t.route == "exact"]
    return {
        "exact_turns": len(exact),
        "exact_token_share": sum(t.observation_tokens for t in exact) / total,
        "generated_token_share": 1 - sum(t.observation_tokens for t in exact) / total,
    }
