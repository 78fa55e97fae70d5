"""ECHO's update on real trajectories: on a fixed batch at a high LR, the env-token cross-entropy of
those rollouts falls under ECHO and env-only by clearly more than under GRPO alone; the update is
the loss's mean over sequences; a rollout in the sandbox is the policy's tokens, rewarded by the
task's own tests; the miniature's arms differ only by their losses."""

import dataclasses
import json

import numpy as np
import pytest
import torch

from terminalworld.core.assets import load_tokenizer, tiny_qwen3
from terminalworld.core.formats import load_trajectories
from terminalworld.core.render import Renderer
from terminalworld.core.trajectories import Trajectory
from terminalworld.core.views import agent_messages
from terminalworld.train.echo.loss import EchoLossConfig, echo_loss, grpo_advantages
from terminalworld.train.echo.update import env_cross_entropy, sequence_logprobs, update
from terminalworld.train.rollout import replayed
from tests.paths import SWE_ZERO


@pytest.fixture(scope="module")
def batch():
    """The real SWE-ZERO trajectories cut into windows of three turns (observations cut to 400
    characters and a one-line system prompt, to keep the CPU test short), as eight rollouts in four
    GRPO groups of two with rewards 1 and 0 (so every group has a signal)."""
    tok = load_tokenizer("smollm2")
    renderer = Renderer(tok)
    windows = [
        dataclasses.replace(
            t,
            system="You are a software engineer at a bash prompt.",
            turns=tuple(dataclasses.replace(u, observation=u.observation[:400]) for u in t.turns[k : k + 3]),
        )
        for t in load_trajectories(str(SWE_ZERO))
        for k in (0, 3, 6)
    ][:8]
    assert len(windows) == 8
    rollouts = [replayed(renderer, agent_messages(w)) for w in windows]
    rewards = torch.tensor([1.0, 0.0] * 4)
    groups = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    return tok, rollouts, grpo_advantages(rewards, groups).tolist()


def _train(tok, rollouts, advantages, loss, before, steps=4, lr=3e-3):
    """The change of each rollout's env CE after `steps` updates of the seeded tiny model, from
    `before`: that model's env CE before any update (the same start for every arm, computed once)."""
    model = tiny_qwen3(len(tok))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    for _ in range(steps):
        stats = update(
            model=model,
            optimizer=optimizer,
            rollouts=rollouts,
            advantages=advantages,
            loss=loss,
            temperature=0.8,
            max_grad_norm=0.2,
        )
    return env_cross_entropy(model, rollouts) - before, stats


def test_env_ce_falls_under_echo_and_env_only_clearly_more_than_under_grpo(batch):
    tok, rollouts, advantages = batch
    assert all(sum(r.env_mask) > 50 for r in rollouts)
    before = env_cross_entropy(tiny_qwen3(len(tok)), rollouts)  # every arm starts from this seeded model
    change = {
        name: _train(tok, rollouts, advantages, cfg, before)[0].mean()
        for name, cfg in {
            "grpo": EchoLossConfig(lam=0.0),
            "echo": EchoLossConfig(lam=0.05),
            "env-only": EchoLossConfig(lam=0.05, env_only=True),
        }.items()
    }
    assert change["echo"] < 0 and change["env-only"] < 0
    # "Clearly more": the λ > 0 arms' fall exceeds GRPO's by at least half their own fall.
    assert change["echo"] < change["grpo"] - 0.5 * abs(change["echo"])
    assert change["env-only"] < change["grpo"] - 0.5 * abs(change["env-only"])


def test_update_is_the_mean_over_sequences_of_one_forward_each(batch):
    tok, rollouts, advantages = batch
    cfg = EchoLossConfig(lam=0.05)
    model = tiny_qwen3(len(tok))
    # The batch loss as `echo_loss` defines it, on one padded forward of the whole batch.
    width = max(len(r.ids) for r in rollouts)

    def pad(values, fill=0):
        return torch.tensor([v + [fill] * (width - len(v)) for v in values])

    ids = pad([r.ids for r in rollouts])
    attention = pad([[1] * len(r.ids) for r in rollouts])
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1]
        logp = torch.log_softmax(logits.float() / 0.8, -1).gather(-1, ids[:, 1:, None])[..., 0]
        expected, terms = echo_loss(
            logprobs=logp,
            old_logprobs=logp,
            advantages=torch.tensor(advantages),
            action_mask=pad([r.action_mask for r in rollouts])[:, 1:],
            env_mask=pad([r.env_mask for r in rollouts])[:, 1:],
            observation_counts=torch.tensor([r.observation_count for r in rollouts]),
            config=cfg,
        )
    sgd = torch.optim.SGD(model.parameters(), lr=0.0)
    stats = update(
        model=model,
        optimizer=sgd,
        rollouts=rollouts,
        advantages=advantages,
        loss=cfg,
        temperature=0.8,
        max_grad_norm=1e9,
    )
    assert stats["loss"] == pytest.approx(expected.item(), rel=1e-4)
    assert stats["env_loss"] == pytest.approx(terms["env_loss"], rel=1e-4)
    # With every advantage of a group opposite, the on-policy policy loss is the advantages' mean: 0.
    assert stats["policy_loss"] == pytest.approx(float(np.mean(advantages)), abs=1e-6)


def test_env_cross_entropy_is_the_mean_over_o_prime_tokens(batch):
    tok, rollouts, _ = batch
    model = tiny_qwen3(len(tok)).eval()
    r = rollouts[0]
    with torch.no_grad():
        logp = sequence_logprobs(model, r, 1.0)[0]
    env = [i for i, m in enumerate(r.env_mask[1:]) if m]
    assert env_cross_entropy(model, [r])[0] == pytest.approx(-logp[env].mean().item(), rel=1e-5)
    empty = Trajectory("x", None, "sys", "task", (), "test")
    assert np.isnan(env_cross_entropy(model, [replayed(Renderer(tok), agent_messages(empty))])[0])


def test_a_sandbox_rollout_is_the_policys_tokens_rewarded_by_the_tasks_tests(workdir):
    from terminalworld.agent.harness import HarnessConfig
    from terminalworld.core.decoding import hf_sample
    from terminalworld.env.sandbox import SandboxConfig
    from terminalworld.tasks.make import MakeTasksConfig, make_tasks
    from terminalworld.train.echo.rollouts import collect

    make_tasks(MakeTasksConfig(out=str(workdir / "tasks"), n=1, seed=0))
    manifest = json.loads((workdir / "tasks" / "manifest.json").read_text())
    task = workdir / "tasks" / manifest["tasks"][0]["task_id"]
    tok = load_tokenizer("smollm2")
    renderer = Renderer(tok)
    model = tiny_qwen3(len(tok)).eval()
    harness = HarnessConfig(max_turns=2, context_tokens=4096, max_tokens_per_turn=16, temperature=0.8)
    args = dict(model=model, renderer=renderer, task_dir=task, group=0, harness=harness, sandbox=SandboxConfig())
    a, b, c = collect(seed=1, **args), collect(seed=1, **args), collect(seed=2, **args)
    assert a.rollout.ids == b.rollout.ids and a.rollout.ids != c.rollout.ids  # seeded sampling
    # A random policy never follows the format: two turns, two format warnings (harness text, so no
    # O′ token), the reward from the task's real tests is 0.
    assert (a.turns, a.format_errors, a.outcome, a.reward) == (2, 2, "turn_limit", 0.0)
    assert sum(a.rollout.env_mask) == 0 and a.rollout.observation_count > 0
    # The first sampled tokens are exactly what `hf_sample` draws after the prompt with that seed.
    start = a.rollout.action_mask.index(1)
    prompt = torch.tensor([a.rollout.ids[:start]])
    first = hf_sample(
        model,
        prompt,
        attention_mask=torch.ones_like(prompt),
        max_new_tokens=16,
        temperature=0.8,
        seed=1000,
        pad=tok.eos_token_id,
        stop=tok.eos_token_id,
    )[0].tolist()
    assert a.rollout.ids[start : start + len(first)] == first
