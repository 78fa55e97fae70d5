"""Generation for concurrent episodes: the batching model server against today's one-at-a-time path
(and, where a vLLM server is given, vLLM), in one interleaved run.

    uv run python benchmarks/serving.py [--vllm-url http://127.0.0.1:PORT/v1] [--out benchmarks/results/serving.json]

An episode is a short agent session: `--turns` chat requests, each answering the conversation so
far (a real task statement, then the previous replies) with at most `--tokens` greedy new tokens.
At each concurrency c (1, 4, 8, 16), c episodes run at once, each on its own client thread, against
SmolLM2-135M in bfloat16 served by `agent.serve` with dynamic batching (at most 16 requests per
generate call) and with `max_batch=1` (one request at a time: today's path), both in this process
with its share of the cores (`core.threads`); and against the vLLM server when given. Paths and
concurrencies alternate within each repeat, so a neighbour's load falls on all of them alike.
Reported per path and concurrency: new tokens per second (all episodes' completion tokens over the
wall time), seconds per episode (mean of each episode's own wall time), and the batched path's
ratio to one-at-a-time. The load average is recorded: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
import urllib.request
from pathlib import Path

from terminalworld.agent.serve import ChatModel, serving
from terminalworld.core.formats import load_trajectories
from terminalworld.core.records import write_json
from terminalworld.core.threads import set_threads

HERE = Path(__file__).resolve().parent
SWE_ZERO = HERE.parent / "tests" / "fixtures" / "real" / "adp_swe-zero-12m" / "sample_raw.json"
CONCURRENCY = (1, 4, 8, 16)


def _post(url: str, model: str, messages: list[dict], tokens: int) -> tuple[str, int]:
    body = {"model": model, "messages": messages, "max_tokens": tokens, "temperature": 0}
    request = urllib.request.Request(
        f"{url}/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=3600) as r:
        out = json.loads(r.read())
    return out["choices"][0]["message"]["content"], out["usage"]["completion_tokens"]


def episodes(url: str, model: str, tasks: list[str], *, turns: int, tokens: int) -> dict:
    """Run one episode per task concurrently; tokens generated, wall time, each episode's time."""
    seconds, made = [0.0] * len(tasks), [0] * len(tasks)

    def episode(k: int) -> None:
        start = time.perf_counter()
        messages = [{"role": "user", "content": tasks[k]}]
        for _ in range(turns):
            text, n = _post(url, model, messages, tokens)
            made[k] += n
            messages += [{"role": "assistant", "content": text}, {"role": "user", "content": "Continue."}]
        seconds[k] = time.perf_counter() - start

    start = time.perf_counter()
    workers = [threading.Thread(target=episode, args=(k,)) for k in range(len(tasks))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    wall = time.perf_counter() - start
    return {"tokens": sum(made), "wall_s": wall, "episode_s": statistics.fmean(seconds)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(HERE / "results" / "serving.json"))
    p.add_argument("--vllm-url", default=None, help="a running vLLM server serving SmolLM2 as --vllm-model")
    p.add_argument("--vllm-model", default="smollm2")
    p.add_argument("--turns", type=int, default=2)
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--repeats", type=int, default=1)
    args = p.parse_args()
    threads = set_threads()
    trajs = load_trajectories(str(SWE_ZERO))
    tasks = [trajs[k % len(trajs)].task[:1500] + f"\n(episode {k})" for k in range(max(CONCURRENCY))]
    batched = ChatModel("smollm2", context_tokens=4096, dtype="bfloat16")
    serial = ChatModel("smollm2", context_tokens=4096, dtype="bfloat16", max_batch=1)
    runs: dict[str, dict[int, list[dict]]] = {}
    with serving(batched) as batched_url, serving(serial) as serial_url:
        paths = {"batched": (batched_url, "model"), "one_at_a_time": (serial_url, "model")}
        if args.vllm_url:
            paths["vllm"] = (args.vllm_url, args.vllm_model)
        for url, model in paths.values():  # warm-up: first calls pay allocations and compilation
            episodes(url, model, tasks[:2], turns=1, tokens=2)
        for rep in range(args.repeats):
            for c in CONCURRENCY:
                order = list(paths) if (rep + c) % 2 == 0 else list(reversed(paths))
                for name in order:
                    url, model = paths[name]
                    run = episodes(url, model, tasks[:c], turns=args.turns, tokens=args.tokens)
                    runs.setdefault(name, {}).setdefault(c, []).append(run)
                    print(name, c, json.dumps(run), flush=True)
    table = {
        name: {
            str(c): {
                "new_tokens_per_s": statistics.median(r["tokens"] / r["wall_s"] for r in rs),
                "seconds_per_episode": statistics.median(r["episode_s"] for r in rs),
                "runs": rs,
            }
            for c, rs in by_c.items()
        }
        for name, by_c in runs.items()
    }
    ratios = {
        name: {
            c: table[name][c]["new_tokens_per_s"] / table["one_at_a_time"][c]["new_tokens_per_s"] for c in table[name]
        }
        for name in table
        if name != "one_at_a_time"
    }
    result = {
        "model": "SmolLM2-135M-Instruct, bfloat16",
        "episode": {"turns": args.turns, "max_new_tokens_per_turn": args.tokens, "greedy": True},
        "torch_threads": threads,
        "cores": len(os.sched_getaffinity(0)),
        "load_average_after": os.getloadavg(),
        "batch_sizes_seen": sorted(set(batched.batcher.batches)),
        "paths": table,
        "throughput_ratio_to_one_at_a_time": ratios,
    }
    write_json(args.out, result)
    print(json.dumps(ratios, indent=1))


if __name__ == "__main__":
    main()
