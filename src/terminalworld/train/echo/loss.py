"""ECHO's objective, `L = L_GRPO + λ·L_Env`, in torch, with no Ray or SkyRL import.

Both terms come from one forward pass: the log-probabilities of the rollout's own tokens on
temperature-scaled logits (`token_logprobs`), read through two masks, the actions for GRPO and O′
(observation tokens that are terminal output) for the environment term.

Conventions, those of the reference implementation (SkyRL PR #1716, commits fde7d1259 and efd864b9f,
`examples/train_integrations/echo_terminal/world_modeling/loss.py`, its `sequence_mean` branch with
`world_loss_normalization = "full_observation_tokens"`):

- |O| counts the tokens of every observation message's content, harness text included (a format
  warning, the `Observation: ` prefix), and excludes chat-template tokens and end-of-turn tokens;
  O′ leaves the harness text out, so |O′| ≤ |O|.
- Each sequence's summed cross-entropy over O′ is divided by `|O| + 1e-3`; a sequence with no
  observation contributes 0 and still counts in the mean over the batch.
- The cross-entropy is taken on logits divided by the sampling temperature, as SkyRL computes the
  policy's log-probabilities (0.8 in the paper's recipe).
- The env-only variant keeps λ·L_Env and drops the GRPO term (the reference zeroes the policy
  loss mask of such samples).

GRPO follows SkyRL's defaults as ECHO's recipe uses them: group-normalised advantages
`(r − mean) / (std + 1e-6)` (unbiased std), the clipped surrogate with ε 0.2 on both sides, no KL, and
`sequence_mean` aggregation (each sequence's mean over its action tokens, then the mean over
sequences).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

OBSERVATION_EPS = 1e-3  # the reference's `full_observation_count + 1e-3`
ADVANTAGE_EPS = 1e-6


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """`[B, T]` log-probabilities of `tokens` under `logits` `[B, T, V]` divided by `temperature`
    (position t's logits predict token t: shift before calling)."""
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    return logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def env_prediction_loss(
    token_logprobs: torch.Tensor, env_mask: torch.Tensor, observation_counts: torch.Tensor
) -> torch.Tensor:
    """`mean_b Σ_t env_mask·(−token_logprobs) / (|O_b| + 1e-3)`: `token_logprobs` and `env_mask` (O′)
    are `[B, T]`, `observation_counts` (|O|) is `[B]`."""
    ce = -(token_logprobs * env_mask.to(token_logprobs.dtype)).sum(dim=-1)
    return (ce / (observation_counts.to(ce.dtype) + OBSERVATION_EPS)).mean()


def grpo_advantages(rewards: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """Each rollout's reward minus its group's mean, over the group's (unbiased) standard deviation
    plus 1e-6; a group of one gets 0."""
    out = torch.zeros_like(rewards, dtype=torch.float32)
    for g in torch.unique(groups):
        idx = groups == g
        r = rewards[idx].float()
        if r.numel() > 1:
            out[idx] = (r - r.mean()) / (r.std() + ADVANTAGE_EPS)
    return out


def grpo_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
) -> torch.Tensor:
    """The clipped surrogate `−min(ρA, clip(ρ, 1−ε_low, 1+ε_high)A)` per action token (ρ the ratio
    of new to old probabilities, A the sequence's advantage `[B]`), averaged over each sequence's
    action tokens, then over sequences."""
    ratio = torch.exp(logprobs - old_logprobs)
    adv = advantages.unsqueeze(-1)
    surrogate = -torch.minimum(ratio * adv, ratio.clamp(1 - clip_low, 1 + clip_high) * adv)
    mask = action_mask.to(surrogate.dtype)
    per_sequence = (surrogate * mask).sum(dim=-1) / mask.sum(dim=-1).clamp(min=1)
    return per_sequence.mean()


@dataclass(frozen=True, kw_only=True)
class EchoLossConfig:
    """λ (0 is plain GRPO) and the env-only switch (λ·L_Env alone)."""

    lam: float = 0.05
    env_only: bool = False
    clip_low: float = 0.2
    clip_high: float = 0.2


def echo_loss(
    *,
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
    env_mask: torch.Tensor,
    observation_counts: torch.Tensor,
    config: EchoLossConfig,
) -> tuple[torch.Tensor, dict[str, float]]:
    """`L_GRPO + λ·L_Env` (or `λ·L_Env` with `env_only`) from one forward's `logprobs`, and both
    terms for logging."""
    env = env_prediction_loss(logprobs, env_mask, observation_counts)
    policy = grpo_policy_loss(
        logprobs, old_logprobs, advantages, action_mask, clip_low=config.clip_low, clip_high=config.clip_high
    )
    total = config.lam * env if config.env_only else policy + config.lam * env
    return total, {"policy_loss": policy.item(), "env_loss": env.item(), "loss": total.item()}
