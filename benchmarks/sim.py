"""Simulator generation throughput on CPU against the real sandbox's command latency.

    uv run python benchmarks/sim.py [--requests 16] [--max-new-tokens 64] [--out benchmarks/results/sim.json]

The requests are real: every observation of the SWE-ZERO fixture trajectories' first turns, each
generated from its real prefix in the agent framing by SmolLM2-135M-Instruct (greedy, a fixed cap,
so every method generates the same number of tokens). Methods, in one run:

- one at a time: `HFGenerator` with batch size 1;
- batched: the same requests in batches of 4 (left-padded);
- sandbox: the solver's commands on a generated bug-fix task, each run in the bubblewrap sandbox
  (what a real environment turn costs here).

Reported: observations per second and generated tokens per second for each generation method, the
batched speed-up, and the median seconds of a simulated turn against a sandbox turn.

    uv run python benchmarks/sim.py --smoke      # 4 requests, 8 tokens: checks the harness only
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the fixtures' one path: tests.paths
from tests.paths import SWE_ZERO as FIXTURE  # noqa: E402


def requests(n: int):
    from terminalworld.core.formats import load_trajectories

    out = []
    for traj in load_trajectories(str(FIXTURE)):
        out += [(traj, k) for k in range(len(traj.turns))]
    return sorted(out, key=lambda r: r[1])[:n]  # the shortest prefixes first: every trajectory's early turns


def sandbox_turns() -> list[float]:
    from terminalworld.corpus.solver import plan
    from terminalworld.env.sandbox import Sandbox
    from terminalworld.tasks.layout import REPO_DIR
    from terminalworld.tasks.make import MakeTasksConfig, make_tasks

    root = Path(tempfile.mkdtemp(prefix="tw-bench-sim-"))
    root.chmod(0o711)
    make_tasks(MakeTasksConfig(out=str(root / "tasks"), n=1, seed=0))
    task = next(p for p in (root / "tasks").iterdir() if p.is_dir())
    shutil.copytree(task / REPO_DIR, root / "repo", symlinks=True)
    box = Sandbox(str(root / "repo"))
    seconds = []
    for step in plan(task, random.Random(0)):
        start = time.perf_counter()
        box.run(step.command)
        seconds.append(time.perf_counter() - start)
    shutil.rmtree(root, ignore_errors=True)
    return seconds


def main(argv: list[str] | None = None) -> dict:
    from terminalworld.core.assets import load_hf_model, load_tokenizer, local_model_path
    from terminalworld.core.render import Renderer
    from terminalworld.sim.backend import HFGenerator, Simulator, stop_ids

    p = argparse.ArgumentParser()
    p.add_argument("--requests", type=int, default=16)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--out", default=str(HERE / "results" / "sim.json"))
    p.add_argument("--smoke", action="store_true")
    a = p.parse_args(argv)
    if a.smoke:
        a.requests, a.max_new_tokens, a.out = 4, 8, None
    tok = load_tokenizer("smollm2")
    renderer = Renderer(tok)
    model = load_hf_model(local_model_path("smollm2"), "float32")
    stop = stop_ids(tok)
    reqs = requests(a.requests)
    result: dict = {"model": "smollm2-135m-instruct", "requests": len(reqs), "max_new_tokens": a.max_new_tokens}
    for name, batch in (("one_at_a_time", 1), ("batched_4", 4)):
        sim = Simulator(renderer, HFGenerator(model, stop=stop, pad=stop[0], batch_size=batch), a.max_new_tokens)
        start = time.perf_counter()
        out = sim.simulate(reqs)
        seconds = time.perf_counter() - start
        tokens = sum(o.tokens for o in out)
        result[name] = {
            "seconds": seconds,
            "observations_per_s": len(out) / seconds,
            "tokens_per_s": tokens / seconds,
            "tokens": tokens,
            "mean_prompt_tokens": statistics.fmean(o.prompt_tokens for o in out),
        }
    result["batched_speedup"] = (
        result["batched_4"]["observations_per_s"] / result["one_at_a_time"]["observations_per_s"]
    )
    sandbox = sandbox_turns()
    result["sandbox"] = {"commands": len(sandbox), "median_s": statistics.median(sandbox)}
    result["simulated_turn_s"] = result["one_at_a_time"]["seconds"] / len(reqs)
    result["simulated_over_sandbox_turn"] = result["simulated_turn_s"] / result["sandbox"]["median_s"]
    print(json.dumps(result, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
