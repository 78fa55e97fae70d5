"""Seconds per simulated turn as a session grows, with and without reusing the session's KV cache.

    uv run python benchmarks/sim_kv.py [--turns 1,8,16] [--max-new-tokens 16] [--out benchmarks/results/sim_kv.json]

The session is real: a 20-turn exploration session the recorder records on one code tree
(`pypi/attrs`, seed 0; every command run in the sandbox, outputs capped at the demo's 1,000
characters), in the simulator framing, SmolLM2-135M-Instruct as the simulator (greedy, a fixed
cap; float32 on CPU). In one run:

- reuse: one `HFGenerator(reuse_cache=True)` answers turns 1, 2, ..., 16 in order, as a closed loop
  does; each turn prefills only what its cache does not hold (the previous observation and the new
  command) and decodes its cap;
- no reuse: `HFGenerator` (today's path) answers the prompts of turns 1, 8 and 16 from scratch,
  prefilling the whole session each time.

Reported: seconds per turn at turns 1, 8 and 16 both ways, the tokens each prefilled, and their
ratio. Both generate the same tokens (greedy, checked).

    uv run python benchmarks/sim_kv.py --smoke     # 4 turns, 4 tokens: checks the harness only

The committed result ran with `--max-new-tokens 4` and `OMP_NUM_THREADS=1` on a shared 2-core
machine (with the default two threads per process, a loaded machine slows every step by orders of
magnitude), so the seconds are noisy; the prefilled tokens are exact.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def session(turns: int):
    """A recorded exploration session of `turns` turns (real sandbox outputs)."""
    from terminalworld.corpus.exploration import TreeIndex
    from terminalworld.corpus.recorder import record_one
    from terminalworld.env.codetrees import discover_code_trees
    from terminalworld.env.sandbox import SandboxConfig

    tree = next(t for t in discover_code_trees() if t.repo == "pypi/attrs")
    config = SandboxConfig(head_chars=500, tail_chars=500)
    return record_one(tree, TreeIndex.build(tree), 0, 0, turns, turns, config)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--turns", default="1,8,16")
    p.add_argument("--max-new-tokens", type=int, default=16)
    p.add_argument("--out", default=str(HERE / "results" / "sim_kv.json"))
    p.add_argument("--smoke", action="store_true")
    a = p.parse_args()
    from terminalworld.core.assets import load_hf_model, local_model_path
    from terminalworld.core.records import write_json
    from terminalworld.core.render import build_renderer
    from terminalworld.sim.backend import HFGenerator, Simulator, stop_ids

    marks = [1, 2, 4] if a.smoke else [int(x) for x in a.turns.split(",")]
    new_tokens = 4 if a.smoke else a.max_new_tokens
    path = local_model_path("smollm2")
    renderer = build_renderer(tokenizer=path, view="sim")
    stop = stop_ids(renderer.tokenizer)
    model = load_hf_model(path, "float32")
    traj = session(max(20, max(marks)))
    sim = Simulator(renderer, HFGenerator(model, stop=stop, pad=stop[0]), max_new_tokens=new_tokens)
    prompts = [sim.prompt(traj, t)[0] for t in range(max(marks))]
    decoding = {"max_new_tokens": new_tokens, "temperature": 0.0, "seed": 0}

    reuse = HFGenerator(model, stop=stop, pad=stop[0], reuse_cache=True)
    with_reuse, outputs = {}, {}
    for t, prompt in enumerate(prompts, start=1):
        start = time.perf_counter()
        [outputs[t]] = reuse.generate([prompt], **decoding)
        with_reuse[t] = {"seconds": time.perf_counter() - start, "prefilled_tokens": reuse.prefilled[-1]}
        print(f"reuse turn {t}: {with_reuse[t]}", flush=True)
    plain = HFGenerator(model, stop=stop, pad=stop[0])
    without = {}
    for t in marks:
        start = time.perf_counter()
        [out] = plain.generate([prompts[t - 1]], **decoding)
        without[t] = {"seconds": time.perf_counter() - start, "prefilled_tokens": len(prompts[t - 1])}
        assert out == outputs[t], f"turn {t}: reuse changed the greedy output"
        print(f"no reuse turn {t}: {without[t]}", flush=True)
    result = {
        "model": "smollm2-135m-instruct",
        "device": "cpu (2 shared cores)",
        "max_new_tokens": new_tokens,
        "session": traj.instance_id,
        "turns": {
            str(t): {
                "session_tokens": len(prompts[t - 1]),
                "reuse": with_reuse[t],
                "no_reuse": without[t],
                "speedup": without[t]["seconds"] / with_reuse[t]["seconds"],
            }
            for t in marks
        },
    }
    if not a.smoke:
        write_json(a.out, result)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
