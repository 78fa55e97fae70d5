"""Per-command cost of an unprivileged caller's held tmpfs against the walk it replaced.

    nice uv run python benchmarks/sandbox_held.py [--uid 54399] [--rounds 3] [--per-round 20] \
        [--out benchmarks/results/sandbox_held.json]

An unprivileged caller may not mount on the host, so its copies used to be plain folders whose disk
cap descriptor-based walks measured during and after each command; now each copy is a tmpfs held in
a user and mount namespace of its own (`terminalworld.env.holder`), and each command's bwrap starts
inside those namespaces (nsenter, then bash's exec) with the holder writing its id maps. Both run
the same commands over the same tree (the project's own sources, about 100 files), interleaved round
by round so that a busy machine slows both alike, from the system's python3 as `--uid` (run as root;
an unprivileged caller runs the driver as itself). Reported: commands per second (median over
rounds) and the ratio held/walk.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
COMMANDS = {"true": "true", "ls": "ls -la", "grep": 'grep -rn "def " . | wc -l'}
DRIVER = """
import json, os, shutil, sys, time
sys.path.insert(0, sys.argv[1])
from terminalworld.env import copies
from terminalworld.env.sandbox import Sandbox, SandboxConfig
tree, place, rounds, per_round = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
commands = json.loads(sys.argv[6])
config = SandboxConfig(timeout_s=30)
plain = os.path.join(place, "plain")
shutil.copytree(tree, plain)
rates = {f"{m} {c}": [] for c in commands for m in ("walk", "held")}
with copies.repo_copy(tree, prefix="tw-bench-held-", dir=place) as held:
    boxes = {"walk": Sandbox(plain, config), "held": Sandbox(held, config)}
    kinds = {m: b.disk_limit_kind for m, b in boxes.items()}
    for _ in range(rounds):
        for name, command in commands.items():
            for method, box in boxes.items():
                start = time.monotonic()
                for _ in range(per_round):
                    box.run(command)
                rates[f"{method} {name}"].append(per_round / (time.monotonic() - start))
print(json.dumps({"kinds": kinds, "rates": rates}))
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--uid", type=int, default=54399, help="the unprivileged caller, when run as root")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--per-round", type=int, default=20)
    p.add_argument("--out", default=str(HERE / "results" / "sandbox_held.json"))
    args = p.parse_args()
    from terminalworld.env.sandbox import bwrap_path

    uid = args.uid if os.geteuid() == 0 else os.geteuid()
    with tempfile.TemporaryDirectory(prefix="tw-bench-held-") as work:
        tree, place = Path(work, "tree"), Path(work, "place")
        shutil.copytree(SRC / "terminalworld", tree, ignore=shutil.ignore_patterns("__pycache__"))
        place.mkdir()
        for path in [Path(work), place, tree, *tree.rglob("*")]:
            os.chown(path, uid, uid)
        argv = [str(SRC), str(tree), str(place), str(args.rounds), str(args.per_round), json.dumps(COMMANDS)]
        who = {"user": uid, "group": uid, "extra_groups": []} if os.geteuid() == 0 else {}
        env = {"TERMINALWORLD_BWRAP": bwrap_path(), "PATH": "/usr/bin:/bin"}
        done = subprocess.run(
            ["/usr/bin/python3", "-c", DRIVER, *argv], env=env, cwd=work, capture_output=True, text=True, **who
        )
        if done.returncode != 0:
            sys.exit(done.stderr[-2000:])
    out = json.loads(done.stdout)
    median = {k: statistics.median(v) for k, v in out["rates"].items()}
    report = {
        "kinds": out["kinds"],
        "rounds": args.rounds,
        "per_round": args.per_round,
        "load_average": os.getloadavg()[0],
        "commands_per_s": {k: round(v, 1) for k, v in median.items()},
        "held_over_walk": {c: round(median[f"held {c}"] / median[f"walk {c}"], 2) for c in COMMANDS},
    }
    print(json.dumps(report, indent=2))
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
