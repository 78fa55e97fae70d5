"""ECHO in RL at production scale: GRPO, ECHO (λ = 0.05) and env-only on the 1M full-transcript
checkpoint, through SkyRL on 8 H100s each, on generated bug-fix tasks, every command in the sandbox.

    python experiments/echo_grpo.py          # print the plan (starts nothing)
    python experiments/echo_grpo.py --run    # launch through Marin

The recipe is the paper's (ECHO on Qwen3-8B): GRPO with 16 rollouts per prompt and 16 prompts per
step, LR 1e-6 with 20 warm-up steps and weight decay 0.01, gradient clip 0.2, clipping ε 0.2 on both
sides, prompt-level advantage normalisation, sequence-mean aggregation, no KL, temperature 0.8,
up to 16 turns of 2,048 tokens in a 16K context, reward 1 when the task's tests pass; λ = 0.05 on
the environment-prediction loss; the env-only arm trains λ·L_Env alone for 100 steps. SkyRL runs at
PR #1716's head in its own environment, with the project's extension (`train/skyrl/plugin.py`): the
auxiliary loss on Megatron (Marin's SkyRL strategy) and on FSDP (the reference's), rollouts that
carry O′ and |O|, and the env-only switch.

The policy is the 1M full-transcript arm of the phase-0 grid: full-transcript training keeps the
world model, and ECHO is how RL keeps it. The tasks are 1,024 generated bug-fix tasks (up to 8 per
repository) from the embedded code trees.
"""

import sys

from fray.types import ResourceConfig
from phase0_grid import grid

from terminalworld.agent import steps as agent
from terminalworld.pipeline.entry import main
from terminalworld.train import steps as train
from terminalworld.train.echo.miniature import ARMS, EchoRecipe

VERSION = "2026.12.03"
GPUS = ResourceConfig.with_gpu("H100", count=8)

policy = grid()[("full", "1M")]
tasks = agent.task_suite(purpose="rl", n=1024, seed=0, per_repo=8, version=VERSION)
runs = [
    train.echo_grpo(
        policy=policy, tasks=tasks, recipe=EchoRecipe(arm=arm), name=f"{arm}-full-1M", resources=GPUS, version=VERSION
    )
    for arm in ARMS
]

if __name__ == "__main__":
    sys.exit(main(runs, __doc__.split("\n\n")[0]))
