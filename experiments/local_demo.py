"""The pipeline in miniature on CPU, under MARIN_PREFIX (default: ./local-prefix).

    python experiments/local_demo.py            # print the plan
    python experiments/local_demo.py --run      # run it

Corpus stage: record a real-shell corpus with the bubblewrap recorder, draw nested training
subsets, and sample held-out trajectories from repos unseen in training.
"""

import argparse
import os
import sys

from terminalworld.cli import run_cli
from terminalworld.demo import DemoConfig, describe_demo, run_demo

CONFIG = DemoConfig(
    prefix=os.environ.get("MARIN_PREFIX", "local-prefix"),
    trajectories=160,
    record_seed=0,
    subset_sizes="20,60",
    heldout_n=24,
    context_turns=14,
    seed=42,
)

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", action="store_true", help="run the pipeline (default: print the plan)")
    args = parser.parse_args()
    if not args.run:
        print(describe_demo(CONFIG))
        sys.exit(0)
    sys.exit(run_cli(lambda: run_demo(CONFIG)))
