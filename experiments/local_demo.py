"""The whole pipeline in miniature on CPU, under MARIN_PREFIX (default: ./local-prefix).

    python experiments/local_demo.py            # print the plan
    python experiments/local_demo.py --run      # run it (finished steps are reused)

Writes report.json / report.md / plots under the report artifact and prints the comparison.
"""

import os

os.environ.setdefault("MARIN_PREFIX", os.path.abspath("local-prefix"))
os.environ.setdefault("WANDB_MODE", "offline")

from terminalworld import pipeline
from terminalworld.demo import DemoConfig, build

CONFIG = DemoConfig(
    version="2026.12.02", trajectories=160, sft_size=40, pretrain_size=100, heldout_n=24, context_turns=3
)
handles = build(CONFIG)

if __name__ == "__main__":
    pipeline.main([handles["report"]], __doc__.split("\n\n")[0])
