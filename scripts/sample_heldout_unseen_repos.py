"""Sample the world-model probe's held-out set: trajectories from repos unseen in training.

    python scripts/sample_heldout_unseen_repos.py --corpus GLOB --train GLOB [--train GLOB ...] \
        --n 100 --context-turns 14 --seed 42 --out PATH

Writes PATH (one row per trajectory in the held-out schema) and PATH.manifest.json. The same as
`terminalworld heldout`, under the write-up's script name.
"""

import sys

from terminalworld.cli import main

if __name__ == "__main__":
    sys.exit(main(["heldout", *sys.argv[1:]]))
