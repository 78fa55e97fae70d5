"""ECHO's on-policy miniature on CPU, under MARIN_PREFIX (default: ./local-prefix), on the local demo.

    python experiments/echo_local.py            # print the plan
    python experiments/echo_local.py --run      # run it (finished steps, the demo's too, are reused)
    python experiments/echo_local.py --steps 10 --demo.trajectories 80   # an overridden recipe's plan

The policy is the local demo's full-transcript checkpoint. It acts on the demo's generated training
tasks through the agent harness, every command in the sandbox, rewarded by each task's own tests,
under three arms with identical seeds and task order: GRPO (λ = 0), ECHO (λ = 0.05) and env-only
(λ·L_Env alone). The report pairs the arms' env-token cross-entropy on the demo's held-out
trajectories, before and after, and writes echo_report.json, echo_report.md and plots.

Departures from the paper's recipe (ECHO's GRPO on Qwen3-8B), the same for every arm: 2 prompts of 4
rollouts per step instead of 16 of 16, 5 steps, episodes of 4 turns of 128 tokens in a 2,048-token
context (the demo's harness), and LR 1e-3 instead of 1e-6: Adam moves each weight by about the LR
per step, and five steps at 1e-6 would leave every number of this report unchanged. λ, the gradient
clip (0.2), the temperature (0.8), the clipping ε and the advantage normalisation are the paper's.
"""

import os
import sys
from dataclasses import dataclass, field

from local_demo import Demo
from local_demo import build as build_demo

from terminalworld.pipeline.step import Report
from terminalworld.report import steps as reports
from terminalworld.train import steps as train
from terminalworld.train.echo.miniature import ARMS, EchoRecipe


@dataclass(frozen=True)
class EchoLocal:
    """The miniature's sizes; `demo` is the local demo it builds on."""

    version: str = "2026.12.03"
    demo: Demo = field(default_factory=Demo)
    policy: str = "full"  # the demo arm whose HF export starts every arm
    steps: int = 5
    prompts_per_step: int = 2
    samples_per_prompt: int = 4
    learning_rate: float = 1e-3
    seed: int = 0


def build(e: EchoLocal = EchoLocal()) -> Report:
    """The miniature's step graph: the demo's steps it needs, three arms and their report."""
    demo = build_demo(e.demo)
    arms = [
        train.echo_arm(
            policy=demo.models[e.policy],
            tasks=demo.train_tasks,
            heldout=demo.heldout,
            recipe=EchoRecipe(
                arm=arm,
                steps=e.steps,
                prompts_per_step=e.prompts_per_step,
                samples_per_prompt=e.samples_per_prompt,
                learning_rate=e.learning_rate,
                harness=e.demo.harness,
                seed=e.seed,
            ),
            version=e.version,
        )
        for arm in ARMS
    ]
    return reports.echo_report(arms=arms, version=e.version)


if __name__ == "__main__":
    os.environ.setdefault("MARIN_PREFIX", os.path.abspath("local-prefix"))
    os.environ.setdefault("WANDB_MODE", "offline")
    from terminalworld.pipeline.entry import main

    sys.exit(main(lambda e: [build(e)], __doc__.split("\n\n")[0], recipe=EchoLocal))
