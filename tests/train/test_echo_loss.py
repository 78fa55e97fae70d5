"""ECHO's loss against hand computations and against the reference implementation's formula
(SkyRL PR #1716, `world_modeling/loss.py`, `sequence_mean` with full-observation normalisation)."""

import math

import pytest
import torch

from terminalworld.train.echo.loss import (
    EchoLossConfig,
    echo_loss,
    env_prediction_loss,
    grpo_advantages,
    grpo_policy_loss,
    token_logprobs,
)


def reference_world_loss(action_log_probs, world_loss_mask, full_observation_count_per_token, batch_len):
    """The reference's arithmetic, transcribed: per-token |O| + 1e-3 as the divisor, summed, then the
    worker's weight 1 / len(data)."""
    denom = full_observation_count_per_token.float() + 1e-3
    world_loss_unscaled = ((-action_log_probs * world_loss_mask.float()) / denom).sum()
    return world_loss_unscaled * (1.0 / max(batch_len, 1))


def test_env_loss_by_hand():
    logp = torch.tensor([[-1.0, -2.0, -3.0, -4.0], [-0.5, -0.5, -0.5, -0.5], [-9.0, -9.0, -9.0, -9.0]])
    env = torch.tensor([[0, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]])
    counts = torch.tensor([3, 1, 0])  # |O| ≥ |O'|: the third sequence has no observation at all
    expected = ((2 + 3) / (3 + 1e-3) + 0.5 / (1 + 1e-3) + 0.0) / 3
    assert env_prediction_loss(logp, env, counts).item() == pytest.approx(expected, rel=1e-6)


def test_env_loss_equals_the_reference_formula_on_random_batches():
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        b, t = 4, 11
        logp = -torch.rand(b, t, generator=g) * 5
        env = (torch.rand(b, t, generator=g) > 0.6).long()
        counts = env.sum(-1) + torch.randint(0, 4, (b,), generator=g)  # harness tokens count in |O| only
        per_token = counts.unsqueeze(-1).expand(b, t)
        ours = env_prediction_loss(logp, env, counts)
        assert ours.item() == pytest.approx(reference_world_loss(logp, env, per_token, b).item(), rel=1e-6)


def test_cross_entropy_is_on_temperature_scaled_logits():
    logits = torch.tensor([[[2.0, 0.0, -1.0], [0.0, 1.0, 0.0]]])
    tokens = torch.tensor([[0, 2]])
    got = token_logprobs(logits, tokens, temperature=0.8)
    scaled = logits / 0.8
    by_hand = [scaled[0, 0, 0] - torch.logsumexp(scaled[0, 0], 0), scaled[0, 1, 2] - torch.logsumexp(scaled[0, 1], 0)]
    assert got[0].tolist() == pytest.approx([x.item() for x in by_hand], rel=1e-6)
    assert not torch.allclose(got, token_logprobs(logits, tokens))


def test_grpo_advantages_and_sequence_mean_clipped_loss_by_hand():
    adv = grpo_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0]), torch.tensor([0, 0, 0, 0, 1, 1]))
    sd = math.sqrt(((0.75**2) + 3 * (0.25**2)) / 3)
    assert adv[:4].tolist() == pytest.approx([0.75 / (sd + 1e-6), *[-0.25 / (sd + 1e-6)] * 3], rel=1e-6)
    assert adv[4:].tolist() == [0.0, 0.0]  # no variance in the group: no signal
    old = torch.zeros(2, 3)
    new = torch.log(torch.tensor([[1.5, 1.0, 0.5], [1.1, 1.0, 1.0]]))
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    a = torch.tensor([1.0, -2.0])
    # Sequence 1 (A = 1): min(ρA, clip(ρ)A) = 1.2, 1.0, 0.5; sequence 2 (A = -2): ρ = 1.1 gives -2.2.
    expected = ((-(1.2 + 1.0 + 0.5) / 3) + 2.2) / 2
    assert grpo_policy_loss(new, old, a, mask).item() == pytest.approx(expected, rel=1e-6)


def test_one_forward_two_masks_and_the_arms():
    torch.manual_seed(0)
    logits = torch.randn(2, 6, 7, requires_grad=True)
    tokens = torch.randint(0, 7, (2, 6))
    logp = token_logprobs(logits, tokens, temperature=0.8)
    action = torch.tensor([[1, 1, 0, 0, 1, 0], [1, 0, 0, 1, 1, 0]])
    env = torch.tensor([[0, 0, 1, 1, 0, 0], [0, 1, 1, 0, 0, 1]])
    counts = torch.tensor([3, 4])
    inputs = dict(
        logprobs=logp,
        old_logprobs=logp.detach(),
        advantages=torch.tensor([1.0, -1.0]),
        action_mask=action,
        env_mask=env,
        observation_counts=counts,
    )
    grpo, parts = echo_loss(**inputs, config=EchoLossConfig(lam=0.0))
    echo, parts_echo = echo_loss(**inputs, config=EchoLossConfig(lam=0.05))
    env_only, _ = echo_loss(**inputs, config=EchoLossConfig(lam=0.05, env_only=True))
    assert echo.item() == pytest.approx(parts["policy_loss"] + 0.05 * parts["env_loss"], rel=1e-6)
    assert env_only.item() == pytest.approx(0.05 * parts_echo["env_loss"], rel=1e-6)
    # The environment term moves only the logits of O' positions; the policy term only action ones.
    (g_env,) = torch.autograd.grad(env_only, logits, retain_graph=True)
    (g_pol,) = torch.autograd.grad(grpo, logits)
    touched_env = g_env.abs().sum(-1) > 0
    touched_pol = g_pol.abs().sum(-1) > 0
    assert torch.equal(touched_env, env.bool()) and torch.equal(touched_pol, action.bool())
