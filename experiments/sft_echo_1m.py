"""Arm (b), full transcript (ECHO-style unmasking), at 1M trajectories.

    python experiments/sft_echo_1m.py                                          # print the plan
    MARIN_PREFIX=gs://marin-us-east5 python experiments/sft_echo_1m.py --run   # launch on the pod
"""

import argparse

from phase0_grid import cell

from terminalworld import pipeline

checkpoint = cell("full", "1M")

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", action="store_true", help="launch through Marin (default: print the plan)")
    if parser.parse_args().run:
        pipeline.run([checkpoint])
    else:
        print(pipeline.plan([checkpoint]))
