"""On-policy rollouts: an HF policy acts on a generated task through the agent harness, every command
in the sandbox, token in and token out, and the task's own tests give the reward.

The episode is the harness's (`agent.harness.Episode`: THOUGHT and one bash block, `Observation: `
answers, format warnings, the submission sentinel, the turn and context limits), driven by
`agent.driver`; the token sequence and ECHO's masks are `train.rollout.Rollout`'s, built from the
ids the policy sampled. Sampling is `core.decoding.hf_sample` (pure temperature sampling, as
SkyRL's vLLM samples), seeded per turn.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from terminalworld.agent.driver import Shell, run_episode
from terminalworld.agent.harness import Episode, HarnessConfig
from terminalworld.core.decoding import hf_sample
from terminalworld.core.prompts import TASK_SYSTEM_PROMPT
from terminalworld.core.render import Renderer
from terminalworld.env.sandbox import Sandbox, SandboxConfig
from terminalworld.tasks.layout import repo_copy, verify
from terminalworld.train.rollout import Rollout


@dataclass
class Collected:
    """One rollout with its reward, the harness's counts and where its time went."""

    task: str
    group: int  # rollouts of the same prompt share a group (GRPO's advantage baseline)
    rollout: Rollout
    reward: float
    turns: int
    format_errors: int
    outcome: str
    generation_s: float
    sandbox_s: float  # the agent's commands and the verifier


def collect(
    *,
    model,
    renderer: Renderer,
    task_dir: Path,
    group: int,
    seed: int,
    harness: HarnessConfig,
    sandbox: SandboxConfig,
) -> Collected:
    """One episode of `model` on the task at `task_dir`, in a private copy of its repository."""
    import torch

    eos = renderer.tokenizer.convert_tokens_to_ids(renderer.tokenizer.eos_token)
    episode = Episode(system=TASK_SYSTEM_PROMPT, task=(task_dir / "instruction.md").read_text(), config=harness)
    rollout = Rollout(renderer)
    rollout.start(episode.system, episode.task)

    def policy(episode: Episode) -> str | None:
        if not episode.check_context(len(rollout.ids)):
            return None
        sampled = hf_sample(
            model,
            torch.tensor([rollout.ids]),
            attention_mask=torch.ones(1, len(rollout.ids), dtype=torch.long),
            max_new_tokens=harness.max_tokens_per_turn,
            temperature=harness.temperature,
            seed=seed * 1000 + episode.turns,
            pad=eos,
            stop=eos,
        )
        return rollout.act(sampled[0].tolist())

    with repo_copy(task_dir, prefix="tw-rollout-") as repo:
        timings = run_episode(
            episode, policy=policy, environment=Shell(Sandbox(str(repo), sandbox)), on_message=rollout.observe
        )
        start = time.monotonic()
        reward = verify(task_dir, repo, config=sandbox)
        verifier_s = time.monotonic() - start
    return Collected(
        task=task_dir.name,
        group=group,
        rollout=rollout,
        reward=reward,
        turns=episode.turns,
        format_errors=episode.format_errors,
        outcome=episode.outcome,
        generation_s=timings.generation_s,
        sandbox_s=timings.command_s + verifier_s,
    )
