"""Sample the world-model probe's held-out set: trajectories from repos unseen in training.

    python scripts/sample_heldout_unseen_repos.py --corpus GLOB --train GLOB [--train GLOB ...] \
        --n 100 --context-turns 14 --seed 42 --out PATH

Writes PATH (one row per trajectory in the seeds' schema) and PATH.manifest.json.
"""

import argparse
import sys

from terminalworld.cli import run_cli
from terminalworld.corpus.sampling import HeldoutConfig, sample_heldout


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", action="append", required=True, help="glob; repeat for several")
    p.add_argument("--train", action="append", required=True, help="training subset glob; repeat for several")
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--context-turns", type=int, default=14)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    cfg = HeldoutConfig(corpus=a.corpus, train=a.train, out=a.out, n=a.n, context_turns=a.context_turns, seed=a.seed)
    return run_cli(lambda: sample_heldout(cfg))


if __name__ == "__main__":
    sys.exit(main())
