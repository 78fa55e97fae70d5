"""ECHO's one-forward claim: an ECHO step costs at most a few percent more than a GRPO step on the
same rollouts.

    uv run python benchmarks/echo.py [--model smollm2] [--rounds 3] [--out benchmarks/results/echo.json]

The rollouts are real: the first two turns of each SWE-ZERO fixture trajectory, replayed as
token-in-token-out rollouts with their O′ masks (`rollout.replayed`), with rewards 1, 0, 1 in one
GRPO group. Each round times, on the same batch and the same weights (SGD at LR 0, so nothing
drifts), in turn:

- grpo: one forward per sequence, the clipped policy loss alone, backward (SkyRL's step without an
  auxiliary loss);
- echo: the same forward, `echo_loss` (policy loss plus λ·L_Env from the same log-probabilities),
  backward — the project's `echo.update.update`;
- two-forward: what ECHO would cost without sharing the forward, a second forward and backward for
  L_Env alone.

Reported: the median seconds of each over the rounds and the ratios to grpo.

    uv run python benchmarks/echo.py --smoke     # the tiny random policy, 2 rounds: checks the harness only
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the fixtures' one path: tests.paths
from tests.paths import SWE_ZERO as FIXTURE  # noqa: E402


def batch(tokenizer_name: str):
    from terminalworld.core.assets import load_tokenizer
    from terminalworld.core.formats import load_trajectories
    from terminalworld.core.render import Renderer
    from terminalworld.core.views import agent_messages
    from terminalworld.train.rollout import replayed

    renderer = Renderer(load_tokenizer(tokenizer_name))
    windows = [dataclasses.replace(t, turns=t.turns[:2]) for t in load_trajectories(str(FIXTURE))]
    return [replayed(renderer, agent_messages(w)) for w in windows]


def policy(name: str, vocab: int):
    from terminalworld.core.assets import load_hf_model, local_model_path, tiny_qwen3

    return tiny_qwen3(vocab) if name == "tiny" else load_hf_model(local_model_path(name), "float32")


def main(argv: list[str] | None = None) -> dict:
    import torch

    from terminalworld.train.echo.loss import EchoLossConfig, env_prediction_loss, grpo_advantages, grpo_policy_loss
    from terminalworld.train.echo.update import sequence_logprobs, update

    p = argparse.ArgumentParser()
    p.add_argument("--model", default="smollm2")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", default=str(HERE / "results" / "echo.json"))
    p.add_argument("--smoke", action="store_true")
    a = p.parse_args(argv)
    if a.smoke:
        a.model, a.rounds, a.out = "tiny", 2, None
    rollouts = batch("smollm2")
    model = policy(a.model, 49152)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    n = len(rollouts)
    rewards = torch.tensor([float(i % 2 == 0) for i in range(n)])
    advantages = grpo_advantages(rewards, torch.zeros(n, dtype=torch.long)).tolist()
    temperature = 0.8

    def grpo() -> None:
        model.train()
        optimizer.zero_grad(set_to_none=True)
        for r, adv in zip(rollouts, advantages, strict=True):
            logp = sequence_logprobs(model, r, temperature)
            mask = torch.tensor([r.action_mask[1:]])
            loss = grpo_policy_loss(logp, logp.detach(), torch.tensor([adv]), mask)
            (loss / n).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.2)
        optimizer.step()

    def echo() -> None:
        update(
            model=model,
            optimizer=optimizer,
            rollouts=rollouts,
            advantages=advantages,
            loss=EchoLossConfig(lam=0.05),
            temperature=temperature,
            max_grad_norm=0.2,
        )

    def two_forward() -> None:
        grpo()
        optimizer.zero_grad(set_to_none=True)
        for r in rollouts:
            logp = sequence_logprobs(model, r, temperature)
            env = torch.tensor([r.env_mask[1:]])
            (0.05 * env_prediction_loss(logp, env, torch.tensor([r.observation_count])) / n).backward()
        optimizer.step()

    methods = {"grpo": grpo, "echo": echo, "two_forward": two_forward}
    times: dict[str, list[float]] = {k: [] for k in methods}
    grpo()  # warm-up
    for _ in range(a.rounds):
        for name, fn in methods.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    median = {k: statistics.median(v) for k, v in times.items()}
    result = {
        "model": a.model,
        "rollouts": n,
        "tokens": sum(len(r.ids) for r in rollouts),
        "env_tokens": sum(sum(r.env_mask) for r in rollouts),
        "rounds": a.rounds,
        "threads": torch.get_num_threads(),
        "median_s": median,
        "echo_over_grpo": median["echo"] / median["grpo"],
        "two_forward_over_grpo": median["two_forward"] / median["grpo"],
        "all_s": times,
    }
    print(json.dumps({k: v for k, v in result.items() if k != "all_s"}, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
