"""On-policy rollouts: an HF policy acts on a generated task through the agent harness, every command
in the sandbox, token in and token out, and the task's own tests give the reward.

The episode is the harness's (`agent.harness.Episode`: THOUGHT and one bash block, `Observation: `
answers, format warnings, the submission sentinel, the turn and context limits); the token sequence
and ECHO's masks are `train.rollout.Rollout`'s, built from the ids the policy sampled. Sampling is
pure temperature sampling (no top-k, no top-p), as SkyRL's vLLM samples, seeded per turn.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from terminalworld.agent.harness import Episode, HarnessConfig
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


def sample(model, ids: list[int], *, max_new_tokens: int, temperature: float, seed: int, eos: int) -> list[int]:
    """Token ids the policy samples after `ids` (greedy at temperature 0), ending at `eos` if it comes."""
    import torch

    torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(
            torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            max_new_tokens=max_new_tokens,
            do_sample=temperature > 0,
            temperature=temperature if temperature > 0 else None,
            top_k=0 if temperature > 0 else None,
            top_p=1.0 if temperature > 0 else None,
            eos_token_id=eos,
            pad_token_id=eos,
        )
    return out[0, len(ids) :].tolist()


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
    eos = renderer.tokenizer.convert_tokens_to_ids(renderer.tokenizer.eos_token)
    episode = Episode(system=TASK_SYSTEM_PROMPT, task=(task_dir / "instruction.md").read_text(), config=harness)
    rollout = Rollout(renderer)
    rollout.start(episode.system, episode.task)
    seconds = {"generation": 0.0, "sandbox": 0.0}
    with repo_copy(task_dir, prefix="tw-rollout-") as repo:
        shell = Sandbox(str(repo), sandbox)
        while episode.outcome == "running" and episode.check_context(len(rollout.ids)):
            start = time.monotonic()
            sampled = sample(
                model,
                rollout.ids,
                max_new_tokens=harness.max_tokens_per_turn,
                temperature=harness.temperature,
                seed=seed * 1000 + episode.turns,
                eos=eos,
            )
            seconds["generation"] += time.monotonic() - start
            command = episode.act(rollout.act(sampled))
            if command is not None:
                start = time.monotonic()
                episode.observe(shell.run(command).output)
                seconds["sandbox"] += time.monotonic() - start
            # The last observation joins the sequence even at the turn limit: it is real terminal output.
            if episode.messages[-1]["role"] == "user" and len(episode.messages) % 2 == 0:
                rollout.observe(episode.messages[-1]["content"])
        start = time.monotonic()
        reward = verify(task_dir, repo, config=sandbox)
        seconds["sandbox"] += time.monotonic() - start
    return Collected(
        task=task_dir.name,
        group=group,
        rollout=rollout,
        reward=reward,
        turns=episode.turns,
        format_errors=episode.format_errors,
        outcome=episode.outcome,
        generation_s=seconds["generation"],
        sandbox_s=seconds["sandbox"],
    )
