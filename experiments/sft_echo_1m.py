"""Arm (b), full transcript (ECHO-style unmasking), at 1M trajectories.

python experiments/sft_echo_1m.py          # print the plan
python experiments/sft_echo_1m.py --run    # build it (on the cluster: see the message)
"""

import sys

from phase0_grid import cell

from terminalworld.pipeline.entry import main

# Its v5p-32 (phase0_grid.TPU) is an estimate pending benchmarks/results/gpu.json (docs/phase0.md).
checkpoint = cell("full", "1M")

if __name__ == "__main__":
    sys.exit(main([checkpoint], __doc__.split("\n\n")[0]))
