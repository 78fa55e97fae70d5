"""ECHO on SkyRL, the parts that need no SkyRL: the recipe as a SkyRL config, a rollout as SkyRL's
generator output, the world masks as training tensors, and the auxiliary loss a policy worker adds.

The production path runs SkyRL at PR #1716's head (`SKYRL_COMMIT`), whose policy worker has the
auxiliary-loss hooks (`get_aux_policy_loss_context`, `compute_aux_policy_loss`) on the FSDP path;
`skyrl/plugin.py` (imported only inside SkyRL's environment) adds the same term on the Megatron path
and registers both workers. Names follow the reference implementation: the generator returns
`world_loss_masks` (O′ over the response tokens), `world_full_observation_counts` (|O|) and
`world_model_only` (the env-only arm), and the trainer turns them into right-aligned `(B, A)` tensors
`world_loss_mask` and `world_full_observation_count` that SkyRL slices into micro-batches with the
rest of the batch.

Scaling, so that every backend computes `λ · mean_b Σ_t O′·(−log p) / (|O_b| + 1e-3)` over the whole
mini-batch, as `echo.loss.env_prediction_loss` defines it: a micro-batch contributes
`λ · Σ_{b in micro-batch} … · weight`. FSDP averages gradients over data-parallel ranks, so there
the weight is 1 / (the rank's shard size); Megatron multiplies the policy loss by micro-batches ×
data-parallel size and then divides both away, so a term added to the policy loss takes
1 / (shard size × data-parallel size).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from terminalworld.train.echo.loss import OBSERVATION_EPS
from terminalworld.train.rollout import Rollout

if TYPE_CHECKING:  # the miniature loads tqdm, which SkyRL's environment lacks
    from terminalworld.train.echo.miniature import EchoRecipe

SKYRL_REPO = "https://github.com/NovaSky-AI/SkyRL"
SKYRL_COMMIT = "efd864b9f5ec44908780cd5f4160a6cebf191eef"  # PR #1716's head: ECHO's reference
SKYRL_REQUIREMENT = f"skyrl[{{extra}}] @ git+{SKYRL_REPO}@{SKYRL_COMMIT}"
WORLD_MASK = "world_loss_mask"
WORLD_COUNT = "world_full_observation_count"


def generator_sample(rollout: Rollout, *, reward: float) -> dict[str, Any]:
    """One rollout as SkyRL's generator output fields: the prompt (up to the first sampled token),
    the response (everything after it, observations included), the loss mask over the response
    (the sampled tokens), O′ over the response, |O| and the reward."""
    if 1 not in rollout.action_mask:
        raise ValueError("a rollout without a sampled token has no response")
    start = rollout.action_mask.index(1)
    return {
        "prompt_token_ids": rollout.ids[:start],
        "response_ids": rollout.ids[start:],
        "loss_masks": rollout.action_mask[start:],
        "world_loss_masks": rollout.env_mask[start:],
        "world_full_observation_counts": rollout.observation_count,
        "rewards": reward,
    }


def world_tensors(samples: list[dict[str, Any]], response_length: int, pad_rows: int = 0) -> dict[str, Any]:
    """The world fields of `samples` as right-aligned `(B + pad_rows, response_length)` float tensors,
    as the reference trainer builds them (padding rows are zeros, so they add nothing)."""
    import torch

    n = len(samples) + pad_rows
    mask = torch.zeros(n, response_length)
    count = torch.zeros(n, response_length)
    for i, s in enumerate(samples):
        width = len(s["response_ids"])
        if len(s["world_loss_masks"]) != width or width > response_length:
            raise ValueError(f"sample {i}: world mask of {len(s['world_loss_masks'])} for {width} response tokens")
        mask[i, response_length - width :] = torch.tensor(s["world_loss_masks"], dtype=torch.float)
        count[i, response_length - width :] = float(s["world_full_observation_counts"])
    return {WORLD_MASK: mask, WORLD_COUNT: count}


def world_loss(action_log_probs, world_mask, full_observation_count, *, coeff: float, weight: float):
    """`coeff · weight · Σ_b Σ_t mask·(−log p) / (|O_b| + 1e-3)` on one micro-batch's `(B, A)` tensors
    (the count broadcast over the response); None when `coeff` is 0, as the reference skips it."""
    if coeff <= 0:
        return None
    mask = world_mask.to(action_log_probs.dtype)
    ce = -(action_log_probs * mask) / (full_observation_count.to(action_log_probs.dtype) + OBSERVATION_EPS)
    return coeff * weight * ce.sum()


@dataclass(frozen=True, kw_only=True)
class EchoGrpoRecipe:
    """One ECHO arm as SkyRL's config fields: an `EchoRecipe` under SkyRL's names (`of`), plus what
    only the SkyRL run sets (weight decay, warm-up, strategy, GPUs; the paper's values on Qwen3-8B).
    It is the run's step input, and Marin fingerprints it by its fields, so it keeps the flat shape
    of the plans made before the recipes were one."""

    lam: float
    env_only: bool
    train_batch_size: int  # prompts per step
    n_samples_per_prompt: int
    learning_rate: float
    max_grad_norm: float
    weight_decay: float = 0.01
    warmup_steps: int = 20
    clip: float
    temperature: float
    max_turns: int
    context_tokens: int
    max_tokens_per_turn: int
    max_steps: int
    strategy: str = "megatron"  # Marin's SkyRL runs Megatron; "fsdp2" is the reference's own path
    gpus: int = 8

    @classmethod
    def of(cls, recipe: EchoRecipe, **skyrl: Any) -> EchoGrpoRecipe:
        """`recipe` as SkyRL's fields: its loss's λ, env-only switch and clipping ε (the same on both
        sides), its batch, optimiser, sampling and turn limits; `skyrl` sets the SkyRL-only fields.
        The recipe's seed stays with the miniature: SkyRL seeds its own run."""
        loss, h = recipe.loss(), recipe.harness
        return cls(
            lam=loss.lam,
            env_only=loss.env_only,
            train_batch_size=recipe.prompts_per_step,
            n_samples_per_prompt=recipe.samples_per_prompt,
            learning_rate=recipe.learning_rate,
            max_grad_norm=recipe.max_grad_norm,
            clip=loss.clip_low,
            temperature=recipe.temperature,
            max_turns=h.max_turns,
            context_tokens=h.context_tokens,
            max_tokens_per_turn=h.max_tokens_per_turn,
            max_steps=recipe.steps,
            **skyrl,
        )


def skyrl_config(
    recipe: EchoGrpoRecipe, *, command_timeout_s: float, model: str, train_data: str, out: str
) -> dict[str, Any]:
    """The SkyRL config (Hydra-shaped) of one ECHO run: GRPO with prompt-level advantage
    normalisation, sequence-mean aggregation, no KL, the world-model coefficient, and the sandbox's
    wall limit per command (the recipe's `command_timeout_s`)."""
    parallel = {
        "tensor_model_parallel_size": 1,
        "pipeline_model_parallel_size": 1,
        "context_parallel_size": 1,
        "expert_model_parallel_size": 1,
    }
    policy: dict[str, Any] = {
        "model": {"path": model},
        "optimizer_config": {
            "lr": recipe.learning_rate,
            "adam_betas": [0.9, 0.999],
            "weight_decay": recipe.weight_decay,
            "max_grad_norm": recipe.max_grad_norm,
            "scheduler": "constant_with_warmup",
            "num_warmup_steps": recipe.warmup_steps,
        },
    }
    if recipe.strategy == "megatron":
        policy["megatron_config"] = parallel
    return {
        "data": {"train_data": [train_data], "val_data": []},
        "trainer": {
            "strategy": recipe.strategy,
            "placement": {
                "colocate_all": True,
                "colocate_policy_ref": True,
                "policy_num_nodes": 1,
                "policy_num_gpus_per_node": recipe.gpus,
            },
            "policy": policy,
            "algorithm": {
                "advantage_estimator": "grpo",
                "grpo_norm_by_std": True,
                "use_kl_loss": False,
                "use_kl_in_reward": False,
                "eps_clip_low": recipe.clip,
                "eps_clip_high": recipe.clip,
                "loss_reduction": "sequence_mean",
                "world_model_coeff": recipe.lam,
                "world_model_only": recipe.env_only,
                "command_timeout_s": command_timeout_s,
                "temperature": recipe.temperature,
            },
            "max_steps": recipe.max_steps,
            "resume_mode": "latest",  # a preempted run resumes from its newest checkpoint
            "update_epochs_per_batch": 1,
            "train_batch_size": recipe.train_batch_size,
            "policy_mini_batch_size": recipe.train_batch_size,
            "micro_train_batch_size_per_gpu": 1,
            "micro_forward_batch_size_per_gpu": 1,
            "ckpt_path": f"{out}/checkpoints",
            "export_path": f"{out}/exports",
            "logger": "wandb",
            "project_name": "terminalworld-echo",
        },
        "generator": {
            "n_samples_per_prompt": recipe.n_samples_per_prompt,
            "max_turns": recipe.max_turns,
            "max_input_length": recipe.context_tokens,
            "sampling_params": {
                "max_generate_length": recipe.max_tokens_per_turn,
                "temperature": recipe.temperature,
                "top_p": 1.0,
                "top_k": -1,
                "logprobs": 0,
            },
            "inference_engine": {
                "backend": "vllm",
                "run_engines_locally": True,
                "num_engines": recipe.gpus,
                "tensor_parallel_size": 1,
            },
        },
    }


def train_rows(tasks: str) -> list[dict[str, Any]]:
    """SkyRL prompt rows for a task folder, one per task: the conversation the harness starts with,
    and the task's folder as the environment extra the generator reads."""
    from pathlib import Path

    from terminalworld.core.prompts import TASK_SYSTEM_PROMPT
    from terminalworld.tasks.layout import task_order

    return [
        {
            "prompt": [
                {"role": "system", "content": TASK_SYSTEM_PROMPT},
                {"role": "user", "content": (task / "instruction.md").read_text()},
            ],
            "env_class": "terminalworld",
            "task_dir": str(Path(task).resolve()),
        }
        for task in task_order(tasks)
    ]


def dotted(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested config as SkyRL's `key.path: value` overrides (lists stay values)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        path = f"{prefix}{key}"
        out |= dotted(value, f"{path}.") if isinstance(value, dict) else {path: value}
    return out


def skyrl_command(*, strategy: str, config_file: str) -> list[str]:
    """The command that trains in SkyRL's own environment (uv, Python 3.12, SkyRL at the pinned
    commit with the strategy's extra); the project's `src` must be on PYTHONPATH."""
    extra = "megatron" if strategy == "megatron" else "fsdp"
    return [
        "uv",
        "run",
        "--isolated",
        "--no-project",
        "--python",
        "3.12",
        "--with",
        SKYRL_REQUIREMENT.format(extra=extra),
        "python",
        "-m",
        "terminalworld.train.skyrl.plugin",
        "--config",
        config_file,
    ]
