"""Levanter SFT's rate on these 2 cores, read from a real pilot run's own log: the seconds between
consecutive steps of its progress lines, inside a window when nothing else ran.

    uv run python benchmarks/pilot_sft_rate.py LOG --since 12:28:00 --until 12:50:00 \\
        --step checkpoints/terminalworld/assistant-x9-s1 --load 1.87,1.97,2.01 \\
        [--mp f32 | --mp p=f32,c=bfloat16] [--tokens-per-step 8192] [--out benchmarks/results/pilot_sft_rate.json]

A step's time is the gap between the progress lines that end it and the one before, so the first
line after a (re)start, which includes compiling the step, is never a step's time. The pilot's plan
takes the median as its quiet SFT rate in each precision (`experiments/pilot.py`: `CPU_QUIET` in
float32, `CPU_SFT_BF16` in Marin's mixed precision, as the recipe trains); each figure keeps the
1-minute load averages read while it ran (`--load`: only the pilot's process ran, so about 2 on 2
cores is the machine working alone).
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import statistics
import sys
from datetime import datetime
from pathlib import Path

# absl's prefix (I20261206 12:28:46 …) and tqdm_loggable's progress text.
LINE = re.compile(r"^I(\d{8}) (\d\d:\d\d:\d\d)\b.*Progress on:train (\d+)\.0it/(\d+)\.0it")
# Levanter's `mp` policy as the pilot's recipe names it -> how the record describes it.
PRECISIONS = {"f32": "p=f32 (float32)", "p=f32,c=bfloat16": "p=f32,c=bfloat16 (bfloat16 compute)"}
RESTART = re.compile(r"Resuming training from step|starting first train step")


def step_times(lines: list[str], since: str, until: str) -> list[dict]:
    """Each step that ended inside [since, until] and began after the previous progress line of the
    same attempt, with its seconds."""
    points: list[tuple[datetime, int] | None] = []
    for line in lines:
        if m := LINE.match(line):
            points.append((datetime.strptime(m[1] + m[2], "%Y%m%d%H:%M:%S"), int(m[3])))
        elif RESTART.search(line):
            points.append(None)  # the next progress line includes the stop and the compile
    out = []
    for a, b in itertools.pairwise(points):
        if a is None or b is None:
            continue
        (t0, s0), (t1, s1) = a, b
        inside = since <= t0.strftime("%H:%M:%S") and t1.strftime("%H:%M:%S") <= until
        if inside and s1 == s0 + 1:
            out.append({"step": s1, "ended": t1.strftime("%Y-%m-%dT%H:%M:%S"), "seconds": (t1 - t0).total_seconds()})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log")
    ap.add_argument("--since", required=True, help="HH:MM:SS, the quiet window's start")
    ap.add_argument("--until", required=True, help="HH:MM:SS, its end")
    ap.add_argument("--step", required=True, help="the pilot step the log's progress lines belong to")
    ap.add_argument("--load", required=True, help="1-minute load averages read during the window, comma-separated")
    ap.add_argument("--mp", choices=sorted(PRECISIONS), default="f32", help="the run's Levanter mixed precision")
    ap.add_argument("--tokens-per-step", type=int, default=8192)
    ap.add_argument("--out", default="benchmarks/results/pilot_sft_rate.json")
    args = ap.parse_args()
    steps = step_times(Path(args.log).read_text(errors="replace").splitlines(), args.since, args.until)
    if len(steps) < 2:
        print(f"error: fewer than 2 whole steps in {args.since}-{args.until}", file=sys.stderr)
        return 2
    median = statistics.median(s["seconds"] for s in steps)
    doc = {
        "what": f"Levanter SFT, SmolLM2-135M-Instruct (the dequantised Q4_1 GGUF), mp {PRECISIONS[args.mp]}, "
        f"batch 1 x {args.tokens_per_step:,} tokens, 2 cores, read from the pilot's own log",
        "step": args.step,
        "mp": args.mp,
        "window": [args.since, args.until],
        "load": [float(x) for x in args.load.split(",")],
        "steps": steps,
        "median_seconds_per_step": median,
        "tokens_per_s": round(args.tokens_per_step / median, 1),
    }
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(steps)} steps, median {median:.0f} s per step: {doc['tokens_per_s']} tokens/s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
