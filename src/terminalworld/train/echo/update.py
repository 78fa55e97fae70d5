"""One on-policy ECHO update of an HF policy on a batch of rollouts, and the env-token cross-entropy
that measures what it did to the world model.

One forward per sequence gives the log-probabilities of its own tokens on temperature-scaled logits;
`echo_loss` reads them through the action mask and O′. Sequences go one at a time (no padding, exact
at any length) and their gradients accumulate, each weighted 1/B, so the step's loss is the mean over
sequences that `echo_loss` defines. The update is on-policy and single: the rollouts were sampled
from these very weights, so the old log-probabilities are the forward's own, detached (the ratio is 1
and clipping cannot bind), which is SkyRL's first mini-batch exactly.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from terminalworld.train.echo.loss import EchoLossConfig, echo_loss, token_logprobs
from terminalworld.train.rollout import Rollout


def _tensors(rollout: Rollout):
    import torch

    ids = torch.tensor([rollout.ids])
    return (
        ids,
        torch.tensor([rollout.action_mask[1:]]),
        torch.tensor([rollout.env_mask[1:]]),
        torch.tensor([rollout.observation_count]),
    )


def sequence_logprobs(model, rollout: Rollout, temperature: float):
    """`[1, T−1]` log-probabilities of each of the rollout's tokens after its first."""
    ids = _tensors(rollout)[0]
    logits = model(input_ids=ids).logits[:, :-1]
    return token_logprobs(logits, ids[:, 1:], temperature)


def update(
    *,
    model,
    optimizer,
    rollouts: Sequence[Rollout],
    advantages: Sequence[float],
    loss: EchoLossConfig,
    temperature: float,
    max_grad_norm: float,
) -> dict[str, float]:
    """One optimizer step on `rollouts`; the loss terms (means over sequences), the gradient norm
    before clipping and the forward/backward seconds."""
    import torch

    start = time.monotonic()
    model.train()
    optimizer.zero_grad(set_to_none=True)
    totals = {"policy_loss": 0.0, "env_loss": 0.0, "loss": 0.0}
    for rollout, advantage in zip(rollouts, advantages, strict=True):
        _, action_mask, env_mask, counts = _tensors(rollout)
        logprobs = sequence_logprobs(model, rollout, temperature)
        total, terms = echo_loss(
            logprobs=logprobs,
            old_logprobs=logprobs.detach(),
            advantages=torch.tensor([advantage], dtype=torch.float32),
            action_mask=action_mask,
            env_mask=env_mask,
            observation_counts=counts,
            config=loss,
        )
        (total / len(rollouts)).backward()
        for k in totals:
            totals[k] += terms[k] / len(rollouts)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    optimizer.step()
    return {**totals, "grad_norm": float(norm), "forward_backward_s": time.monotonic() - start}


def env_cross_entropy(model, rollouts: Sequence[Rollout]) -> np.ndarray:
    """Per rollout, the mean cross-entropy (nats, temperature 1) of its O′ tokens; NaN without any."""
    import torch

    model.eval()
    out = []
    with torch.no_grad():
        for rollout in rollouts:
            env = torch.tensor(rollout.env_mask[1:], dtype=torch.bool)
            logprobs = sequence_logprobs(model, rollout, 1.0)[0]
            out.append(float(-logprobs[env].mean()) if env.any() else float("nan"))
    return np.asarray(out)
