"""One arm of ECHO's on-policy miniature: GRPO (λ = 0), ECHO (λ·L_Env added) or env-only (λ·L_Env
alone), from an HF policy, on generated tasks, every command in the sandbox.

Each step takes the next `prompts_per_step` tasks in the suite's order and samples
`samples_per_prompt` rollouts of each (one GRPO group per task), rewards them with the tasks' tests,
and makes one update (`echo.update.update`). Task order and every sampling seed depend only on the
recipe's seed, the step and the rollout's place, so the arms see the same tasks and draw the same
random numbers; they differ only by their losses (and the weights those produce). Before the first
step and after the last, the env-token cross-entropy of fixed held-out trajectories (teacher-forced,
`rollout.replayed`) is measured per trajectory, so arms can be compared pairwise.

Writes `arm.json`: the recipe, one row per step (reward, the share of groups with zero reward
variance, losses, gradient norm, valid actions, seconds split into generation, sandbox and
forward/backward) and the held-out cross-entropies.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
from tqdm import tqdm

from terminalworld.agent.harness import HarnessConfig
from terminalworld.agent.steps import Episodes
from terminalworld.core.assets import load_hf_model, load_tokenizer
from terminalworld.core.heldout import heldout_trajectory, read_heldout
from terminalworld.core.records import write_json
from terminalworld.core.render import Renderer
from terminalworld.core.views import agent_messages
from terminalworld.env.sandbox import SandboxConfig
from terminalworld.errors import InputError
from terminalworld.pipeline.artifacts import ECHO_ARM
from terminalworld.tasks.layout import task_order
from terminalworld.train.echo.loss import EchoLossConfig, grpo_advantages
from terminalworld.train.echo.rollouts import collect
from terminalworld.train.echo.update import env_cross_entropy, update
from terminalworld.train.rollout import replayed

Arm = Literal["grpo", "echo", "env-only"]
ARMS: tuple[Arm, ...] = ("grpo", "echo", "env-only")
COMMAND_TIMEOUT_S = 10.0  # the sandbox's wall limit per command, unless a recipe sets its own


@dataclass(frozen=True, kw_only=True)
class EchoRecipe:
    """An arm's RL recipe, the miniature's and the SkyRL run's (`skyrl.bridge.EchoGrpoRecipe.of`); the
    defaults are the paper's where a miniature can keep them."""

    arm: Arm
    lam: float = 0.05
    steps: int = 100
    prompts_per_step: int = 16
    samples_per_prompt: int = 16
    learning_rate: float = 1e-6
    max_grad_norm: float = 0.2
    temperature: float = 0.8
    harness: Episodes = field(
        default_factory=lambda: Episodes(max_turns=16, context_tokens=16384, max_tokens_per_turn=2048)
    )
    command_timeout_s: float = COMMAND_TIMEOUT_S
    seed: int = 0

    def loss(self) -> EchoLossConfig:
        """The arm's loss: λ = 0 for GRPO, λ·L_Env added for ECHO, alone for env-only."""
        if self.arm not in ARMS:
            raise InputError(f"ECHO arm {self.arm!r}: expected one of {', '.join(ARMS)}")
        return EchoLossConfig(lam=0.0 if self.arm == "grpo" else self.lam, env_only=self.arm == "env-only")


def heldout_rollouts(renderer: Renderer, path: str) -> tuple[list[str], list]:
    """The held-out rows' ids and their teacher-forced rollouts."""
    rows = read_heldout(path)
    trajectories = [heldout_trajectory(r) for r in rows]
    return [t.instance_id for t in trajectories], [replayed(renderer, agent_messages(t)) for t in trajectories]


def _zero_variance(rewards: np.ndarray, groups: np.ndarray) -> float:
    """The share of groups whose rewards are all equal: they give GRPO no signal."""
    flat = [np.ptp(rewards[groups == g]) == 0 for g in np.unique(groups)]
    return float(np.mean(flat))


@dataclass(frozen=True)
class EchoArmConfig:
    """One arm's run: the HF policy, the task folder, the held-out rows, the output folder, the recipe."""

    policy: str
    tasks: str
    heldout: str
    out: str
    recipe: EchoRecipe


def run_arm(cfg: EchoArmConfig) -> dict:
    """Train one arm and write its `arm.json` under `cfg.out`; returns what it wrote."""
    import torch

    policy, tasks, heldout, out, recipe = cfg.policy, cfg.tasks, cfg.heldout, cfg.out, cfg.recipe

    loss = recipe.loss()
    tokenizer = load_tokenizer(policy)
    renderer = Renderer(tokenizer)
    model = load_hf_model(policy, "float32")
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.learning_rate, weight_decay=0.0)
    harness = HarnessConfig(**asdict(recipe.harness), temperature=recipe.temperature, seed=recipe.seed)
    sandbox = SandboxConfig(timeout_s=recipe.command_timeout_s)
    order = task_order(tasks)
    ids, held = heldout_rollouts(renderer, heldout)
    before = env_cross_entropy(model, held)
    rows = []
    for s in tqdm(range(recipe.steps), desc=f"ECHO miniature, {recipe.arm}", unit="step"):
        start = time.monotonic()
        collected = []
        model.eval()  # sampling; `update` puts it back in training mode
        for j in range(recipe.prompts_per_step):
            task = order[(s * recipe.prompts_per_step + j) % len(order)]
            for i in range(recipe.samples_per_prompt):
                seed = ((recipe.seed * 10_000 + s) * 1_000 + j) * 1_000 + i
                collected.append(
                    collect(
                        model=model,
                        renderer=renderer,
                        task_dir=task,
                        group=j,
                        seed=seed,
                        harness=harness,
                        sandbox=sandbox,
                    )
                )
        rewards = np.array([c.reward for c in collected])
        groups = np.array([c.group for c in collected])
        advantages = grpo_advantages(torch.tensor(rewards), torch.tensor(groups)).tolist()
        stats = update(
            model=model,
            optimizer=optimizer,
            rollouts=[c.rollout for c in collected],
            advantages=advantages,
            loss=loss,
            temperature=recipe.temperature,
            max_grad_norm=recipe.max_grad_norm,
        )
        turns = sum(c.turns for c in collected)
        rows.append(
            {
                "step": s,
                "tasks": sorted({c.task for c in collected}),
                "reward_mean": float(rewards.mean()),
                "solved": int((rewards > 0).sum()),
                "rollouts": len(collected),
                "zero_variance_groups": _zero_variance(rewards, groups),
                "valid_action_rate": 1 - sum(c.format_errors for c in collected) / max(turns, 1),
                "turns": turns,
                "sequence_tokens": sum(len(c.rollout.ids) for c in collected),
                "env_tokens": sum(sum(c.rollout.env_mask) for c in collected),
                **{k: stats[k] for k in ("loss", "policy_loss", "env_loss", "grad_norm")},
                "seconds": {
                    "generation": sum(c.generation_s for c in collected),
                    "sandbox": sum(c.sandbox_s for c in collected),
                    "forward_backward": stats["forward_backward_s"],
                    "step": time.monotonic() - start,
                },
            }
        )
    after = env_cross_entropy(model, held)
    result = {
        "arm": recipe.arm,
        "recipe": asdict(recipe),
        "loss": asdict(loss),
        "policy": policy,
        "steps": rows,
        "heldout": {"ids": ids, "env_ce_before": before.tolist(), "env_ce_after": after.tolist()},
    }
    write_json(str(Path(out, ECHO_ARM)), result)
    return result
