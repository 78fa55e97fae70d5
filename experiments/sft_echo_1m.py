"""Arm (b), full transcript (ECHO-style unmasking), at 1M trajectories.

python experiments/sft_echo_1m.py                                          # print the plan
MARIN_PREFIX=gs://marin-us-east5 python experiments/sft_echo_1m.py --run   # launch on the pod
"""

from phase0_grid import cell

from terminalworld.pipeline import builders as pipeline

checkpoint = cell("full", "1M")

if __name__ == "__main__":
    pipeline.main([checkpoint], __doc__.split("\n\n")[0])
