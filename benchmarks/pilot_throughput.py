"""The pilot's three costs on this machine, measured on SmolLM2-135M-Instruct's real weights:
Levanter SFT tokens/s (initialised from the HF weights, the pilot's path), teacher-forced scoring
seconds per held-out row at the probe's lengths (the project's HF scorer), and HF generation tokens/s
after a realistic prefix (KV cache on, greedy, as the agent and simulator grades generate).

    uv run python benchmarks/pilot_throughput.py --out throughput.json [--sft-steps 4] [--lengths 2048,4096,8192]

Each figure is printed beside the machine's load (a shared machine makes them noisy) and written to
`--out`; `experiments/pilot.py` sizes the pilot from the figures it quotes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time

import numpy as np

# Run as a script, this folder leads sys.path, and its zephyr.py would shadow the zephyr package.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]


def load() -> float:
    """The 1-minute load average, to read beside each figure."""
    return os.getloadavg()[0]


def sft_tokens_per_s(*, steps: int, seq_len: int, batch: int, work: str, mp: str = "f32") -> dict:
    """Levanter's own throughput of the last step (compilation excluded) of a short run from
    SmolLM2's HF weights on packed rows of `seq_len` real-vocabulary tokens, under Levanter's
    mixed-precision policy `mp`."""
    from levanter.main.train_lm import main
    from levanter.tracker.json_file import JsonFileTrackerConfig

    from terminalworld.core.assets import SMOLLM2, hf_folder, local_model_path
    from terminalworld.train.packing import training_tokenizer
    from terminalworld.train.sft import SftConfig, SftRecipe, train_lm_config

    rng = np.random.default_rng(0)
    rows = os.path.join(work, "rows.jsonl")
    with open(rows, "w") as f:
        for _ in range(steps * batch):
            ids = rng.integers(100, 49000, size=seq_len).tolist()
            f.write(json.dumps({"input_ids": ids, "loss_weights": [1.0] * seq_len}) + "\n")
    recipe = SftRecipe(
        epochs=1,
        batch_size=batch,
        learning_rate=1e-5,
        warmup=0.0,
        min_lr_ratio=1.0,
        weight_decay=0.0,
        max_grad_norm=1.0,
        seed=0,
        seq_len=seq_len,
        max_seq_len=8192,
        mp=mp,
    )
    cfg = SftConfig(
        rows=[rows],
        tokenizer=training_tokenizer(SMOLLM2, os.path.join(work, "tok"), "<|endoftext|>"),
        cache_dir=os.path.join(work, "cache"),
        output_dir=os.path.join(work, "run"),
        export_dir=os.path.join(work, "hf"),
        num_train_steps=steps,
        recipe=recipe,
        initialize_from_hf=hf_folder(local_model_path(SMOLLM2), "model"),
    )
    config = train_lm_config(cfg)
    tracker = JsonFileTrackerConfig(output_path=work)
    config = dataclasses.replace(
        config, trainer=dataclasses.replace(config.trainer, tracker=tracker), hf_save_path=None
    )
    start = time.monotonic()
    main(config)
    wall = time.monotonic() - start
    with open(os.path.join(work, "eval_results.json")) as f:
        metrics = json.load(f)
    tps = metrics.get("throughput/tokens_per_second")
    return {
        "seq_len": seq_len,
        "batch": batch,
        "steps": steps,
        "mp": mp,
        "tokens_per_s": tps,
        "wall_s": wall,
        "load": load(),
    }


def scoring_seconds(lengths: list[int], target_tokens: int) -> list[dict]:
    """Seconds of one teacher-forced row of each length (the last `target_tokens` scored)."""
    from terminalworld.core.assets import SMOLLM2, load_hf_model
    from terminalworld.eval.scoring import HFScorer

    scorer = HFScorer(load_hf_model(SMOLLM2, "float32"))
    rng = np.random.default_rng(1)
    scorer.batch_logprobs([(rng.integers(100, 49000, size=64), np.arange(32, 64))])  # warm-up
    out = []
    for n in lengths:
        ids = rng.integers(100, 49000, size=n)
        start = time.monotonic()
        scorer.batch_logprobs([(ids, np.arange(n - target_tokens, n))])
        out.append({"tokens": n, "seconds": time.monotonic() - start, "load": load()})
    return out


def generation_tokens_per_s(prefixes: list[int], new_tokens: int, dtype: str = "float32") -> list[dict]:
    """Greedy HF generation with the KV cache in `dtype`, tokens/s after a prefix of each length
    (prefill excluded: timed as generate(new) minus generate(1))."""
    import torch

    from terminalworld.core.assets import SMOLLM2, load_hf_model

    model = load_hf_model(SMOLLM2, dtype).eval()
    rng = np.random.default_rng(2)
    out = []
    for n in prefixes:
        ids = torch.as_tensor(rng.integers(100, 49000, size=(1, n)))
        times = {}
        for k in (1, new_tokens):
            start = time.monotonic()
            with torch.inference_mode():
                model.generate(ids, max_new_tokens=k, min_new_tokens=k, do_sample=False)
            times[k] = time.monotonic() - start
        out.append(
            {
                "prefix": n,
                "dtype": dtype,
                "threads": torch.get_num_threads(),
                "prefill_s": times[1],
                "tokens_per_s": (new_tokens - 1) / (times[new_tokens] - times[1]),
                "load": load(),
            }
        )
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--sft-steps", type=int, default=4)
    p.add_argument("--sft-seq-len", type=int, default=2048)
    p.add_argument("--sft-batch", type=int, default=1)
    p.add_argument("--lengths", default="2048,4096,8192")
    p.add_argument("--prefixes", default="512,2048,4096")
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--only", choices=["sft", "score", "generate"], default=None)
    p.add_argument("--sft-mp", default="f32", help="Levanter's mixed-precision policy (f32, p=f32,c=bfloat16)")
    p.add_argument("--dtype", default="float32", help="generation precision (float32, bfloat16)")
    args = p.parse_args()
    result: dict = {"cpus": os.cpu_count()}
    if os.path.exists(args.out):
        with open(args.out) as f:
            result = json.load(f)
    if args.only in (None, "score"):
        result["scoring"] = scoring_seconds([int(x) for x in args.lengths.split(",")], target_tokens=256)
        print(json.dumps(result["scoring"]))
    if args.only in (None, "generate"):
        result["generation"] = generation_tokens_per_s(
            [int(x) for x in args.prefixes.split(",")], args.new_tokens, args.dtype
        )
        print(json.dumps(result["generation"]))
    if args.only in (None, "sft"):
        with tempfile.TemporaryDirectory(prefix="tw-sft-bench-") as work:
            result["sft"] = sft_tokens_per_s(
                steps=args.sft_steps, seq_len=args.sft_seq_len, batch=args.sft_batch, work=work, mp=args.sft_mp
            )
        print(json.dumps(result["sft"]))
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
