"""Scoring held-out rows: the seeds' method against ours, whole process, on CPU.

    uv run python benchmarks/scoring.py [--only smollm2,qwen3,depths] [--out benchmarks/results/scoring.json]
    uv run python benchmarks/scoring.py --smoke   # one short row per measurement, a minute; results to a temp file

Three measurements, each method in a fresh process (imports and model load included) that reports
its own peak RSS:

- `smollm2`: SmolLM2-135M-Instruct (real weights, float32) on real SWE-ZERO rows cut to the longest
  context that fits its 8,192-token window (about 7K tokens each);
- `qwen3`: the Qwen3-0.6B architecture (randomly initialised, seeded; the real Qwen3 tokenizer,
  chat template and 152K vocabulary, i.e. the head the seeds' Qwen3 checkpoints carry) on real
  nebius SWE-agent rows of about 10K tokens, the seeds' row length;
- `depths`: a perplexity-by-depth curve for one SmolLM2 row: the seeds' method needs one forward per
  observation, ours scores every observation in one forward (`--all-depths`).

The seeds' method: render the prefix (up to the target command) and the full conversation, one
forward with full-vocabulary float32 logits and log-softmax at every position, score
`full[len(prefix):]`. Its forward is timed in parts (body, then the LM head at every position, then
the log-softmax; the same work as `model(ids).logits`), which shows how much of its time is the
body that any exact scorer must run once per forward. The seeds' process runs only the seeds' own
code (transformers and torch; the model and tokenizer folders are resolved beforehand): our span
positions are computed here, before it starts, and passed in, and it reads our span's NLL from its
own full logits outside the timed parts, which gives the NLL agreement on the same tokens. It runs
twice: as the seeds ran it (the body's default `use_cache`, which builds a KV cache nobody reads),
and with `use_cache=False` as ours does, so peak memory is reported both ways.

Ours: `terminalworld.eval.scoring.score` (body once, head + float32 log-softmax at span positions only).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the fixtures' one path: tests.paths
from tests.paths import FIXTURES, SWE_ZERO  # noqa: E402

NEBIUS = FIXTURES / "adp-fork_nebius-swe-agent-trajectories" / "sample_raw.json"
DATA = HERE / ".data"

# The published Qwen3-0.6B shape.
QWEN3_0_6B = dict(
    vocab_size=151936,
    hidden_size=1024,
    intermediate_size=3072,
    num_hidden_layers=28,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    max_position_embeddings=40960,
    rope_theta=1000000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
)

SEEDS = r"""
import json, resource, sys, time, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
tok_dir, model_dir, heldout, spans, out, depths, cache = sys.argv[1:8]
depths, kw = depths == "1", ({} if cache == "default" else {"use_cache": False})
tok = AutoTokenizer.from_pretrained(tok_dir)
model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
ours = iter(json.load(open(spans)))
res = []
for line in open(heldout):
    row = json.loads(line)
    pairs = [*row["prefix"], [row["target_cmd"], row["target_env"]]]
    for d in range(1 if depths else len(pairs), len(pairs) + 1):
        t0 = time.perf_counter()
        msgs = [{"role": "system", "content": row["system"]}] if row["system"] is not None else []
        msgs.append({"role": "user", "content": row["task"]})
        for c, e in pairs[: d - 1]:
            msgs += [{"role": "assistant", "content": c}, {"role": "user", "content": e}]
        msgs.append({"role": "assistant", "content": pairs[d - 1][0]})
        prefix = tok.apply_chat_template(msgs, tokenize=False)
        full = tok.apply_chat_template(msgs + [{"role": "user", "content": pairs[d - 1][1]}], tokenize=False)
        p_ids = tok(prefix, add_special_tokens=False)["input_ids"]
        ids = tok(full, add_special_tokens=False)["input_ids"]
        t1 = time.perf_counter()
        with torch.inference_mode():
            hidden = model.model(input_ids=torch.tensor([ids]), **kw).last_hidden_state
            t2 = time.perf_counter()
            logits = model.lm_head(hidden)[0].float()
            t3 = time.perf_counter()
            logp = torch.log_softmax(logits, dim=-1)
            t4 = time.perf_counter()
        window = list(range(len(p_ids), len(ids)))
        seeds_nll = [-float(logp[p - 1, ids[p]]) for p in window]
        # Our span (positions computed before this process started), read from these full logits.
        span = next(ours)
        assert (span["instance_id"], span["depth"]) == (row["instance_id"], d)
        ours_nll = [-float(logp[p - 1, ids[p]]) for p in span["positions"]]
        del hidden, logits, logp
        res.append({"instance_id": row["instance_id"], "depth": d, "full_len": len(ids), "seeds_n": len(window),
                    "seeds_mean_nll": sum(seeds_nll) / len(window), "span_n": len(ours_nll),
                    "span_mean_nll_full_logits": sum(ours_nll) / len(ours_nll),
                    "same_tokens_as_ours": ids == span["input_ids"], "render_tokenize_s": t1 - t0,
                    "body_s": t2 - t1, "head_s": t3 - t2, "log_softmax_s": t4 - t3})
json.dump(res, open(out, "w"))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""

OURS = r"""
import resource, sys
from terminalworld.eval.scoring import ScoreConfig, score
score(ScoreConfig(model_path=sys.argv[1], heldout=sys.argv[2], out=sys.argv[3], mode="agent", all_depths=sys.argv[4] == "1"))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def qwen3_random() -> str:
    """An HF folder with the Qwen3-0.6B architecture, seeded random weights and the real Qwen3
    tokenizer and chat template; built once under benchmarks/.data."""
    from terminalworld.core.assets import build_once, load_tokenizer

    def build(out: str) -> None:
        import torch
        from transformers import AutoModelForCausalLM, Qwen3Config

        torch.manual_seed(0)
        AutoModelForCausalLM.from_config(Qwen3Config(**QWEN3_0_6B), dtype=torch.float32).save_pretrained(out)
        load_tokenizer("qwen3").save_pretrained(out)

    return build_once(str(DATA / "qwen3-0.6b-random"), build)


def build_heldout(path: Path, tokenizer: str, source: Path, n_rows: int, target_len: int) -> None:
    """Real rows cut to the longest context whose full render fits `target_len` tokens."""
    from terminalworld.core.assets import load_tokenizer
    from terminalworld.core.formats import load_trajectories
    from terminalworld.core.heldout import heldout_row, heldout_trajectory, observed_prefix
    from terminalworld.core.render import Renderer

    renderer = Renderer(load_tokenizer(tokenizer))
    candidates = []  # (tokens, row): per trajectory, its longest context that fits
    for k, t in enumerate(load_trajectories(str(source))):
        best = None
        for c in range(1, observed_prefix(t)):
            row = dict(heldout_row(t, c), instance_id=f"{t.instance_id}#{k}")
            n = len(renderer.render(heldout_trajectory(row)).input_ids)
            if n <= target_len:
                best = (n, row)
        if best:
            candidates.append(best)
    if not candidates:
        raise SystemExit(f"no trajectory of {source} has a held-out row within {target_len} tokens")
    rows = [row for _, row in sorted(candidates, key=lambda c: -c[0])[:n_rows]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def our_spans(path: Path, heldout: Path, tokenizer: str, depths: bool) -> None:
    """Our target span of every (row, depth) the seeds' process scores, in its order: the whole
    render's ids and the span's positions, written for that process to read."""
    from terminalworld.core.assets import load_tokenizer
    from terminalworld.core.heldout import heldout_trajectory
    from terminalworld.core.render import Renderer
    from terminalworld.eval.scoring import observation_spans

    renderer, out = Renderer(load_tokenizer(tokenizer)), []
    for line in heldout.read_text().splitlines():
        row = json.loads(line)
        pairs = [*row["prefix"], [row["target_cmd"], row["target_env"]]]
        for d in range(1 if depths else len(pairs), len(pairs) + 1):
            cut = dict(row, prefix=pairs[: d - 1], target_cmd=pairs[d - 1][0], target_env=pairs[d - 1][1])
            traj = heldout_trajectory(cut)
            r = renderer.render(traj)
            (span,) = observation_spans(r, traj, all_depths=False)
            out.append(
                {
                    "instance_id": row["instance_id"],
                    "depth": d,
                    "input_ids": r.input_ids.tolist(),
                    "positions": span.positions.tolist(),
                }
            )
    path.write_text(json.dumps(out))


def run(code: str, *args: str) -> dict[str, float]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"measurement process failed:\n{proc.stderr[-4000:]}")
    return {"wall_s": time.perf_counter() - t0, "peak_rss_mib": int(proc.stdout.split()[-1]) / 1024}


def measure(name: str, model: str, model_label: str, source: Path, n_rows: int, target_len: int, depths: bool) -> dict:
    from terminalworld.core.assets import hf_folder, load_tokenizer

    load_tokenizer(model)  # convert a GGUF once, outside the timings
    folders = [hf_folder(model, "tokenizer"), hf_folder(model, "model")]
    with tempfile.TemporaryDirectory() as tmp:
        heldout, spans = Path(tmp) / "heldout.jsonl", Path(tmp) / "spans.json"
        build_heldout(heldout, model, source, n_rows, target_len)
        flag = "1" if depths else "0"
        our_spans(spans, heldout, model, depths)  # outside the seeds' process: it runs only their code
        print(f"{name}: seeds' method ...", flush=True)
        seeds = run(SEEDS, *folders, str(heldout), str(spans), f"{tmp}/seeds.json", flag, "default")
        print(f"{name}: seeds' method, use_cache=False ...", flush=True)
        seeds_no_cache = run(SEEDS, *folders, str(heldout), str(spans), f"{tmp}/seeds_no_cache.json", flag, "off")
        print(f"{name}: ours ...", flush=True)
        ours = run(OURS, model, str(heldout), f"{tmp}/ours.jsonl", flag)
        seeds_rows = json.loads(Path(f"{tmp}/seeds.json").read_text())
        no_cache_rows = json.loads(Path(f"{tmp}/seeds_no_cache.json").read_text())
        ours_rows = [json.loads(x) for x in Path(f"{tmp}/ours.jsonl").read_text().splitlines()][:-1]
    assert all(s["same_tokens_as_ours"] for s in seeds_rows), "the seeds' tokens must be ours to compare spans"
    cache_effect = max(
        abs(a["seeds_mean_nll"] - b["seeds_mean_nll"]) for a, b in zip(seeds_rows, no_cache_rows, strict=True)
    )
    assert cache_effect < 1e-5, f"use_cache changed the seeds' NLLs by {cache_effect}"
    ours_spans = [(d["n_target_tokens"], d["mean_nll"]) for o in ours_rows for d in (o["depths"] if depths else [o])]
    assert len(ours_spans) == len(seeds_rows), "both methods must score the same spans"
    head_and_softmax = sum(s["head_s"] + s["log_softmax_s"] for s in seeds_rows)
    return {
        "model": model_label,
        "rows": len(ours_rows),
        "forwards": {"seeds": len(seeds_rows), "ours": len(ours_rows)},
        "full_len": [o["full_len"] for o in ours_rows],
        "spans": [{**s, "ours_n": n, "ours_mean_nll": m} for s, (n, m) in zip(seeds_rows, ours_spans, strict=False)],
        "seeds": seeds,
        "seeds_no_cache": seeds_no_cache,
        "ours": ours,
        "seeds_head_and_log_softmax_s": head_and_softmax,
        "time_ratio_ours_over_seeds": ours["wall_s"] / seeds["wall_s"],
        "memory_ratio_ours_over_seeds": ours["peak_rss_mib"] / seeds["peak_rss_mib"],
        "memory_ratio_ours_over_seeds_no_cache": ours["peak_rss_mib"] / seeds_no_cache["peak_rss_mib"],
        "time_ratio_ours_over_seeds_no_cache": ours["wall_s"] / seeds_no_cache["wall_s"],
        # The seeds' process less its full-vocabulary head and log-softmax: what skipping that work
        # alone gives at the same forwards (the rest is the body, which an exact scorer must run).
        "time_ratio_seeds_less_head": (seeds["wall_s"] - head_and_softmax) / seeds["wall_s"],
        "token_counts_equal_on_our_span": all(
            s["span_n"] == n for s, (n, _) in zip(seeds_rows, ours_spans, strict=False)
        ),
        "max_abs_mean_nll_diff_same_span": max(
            abs(s["span_mean_nll_full_logits"] - m) for s, (_, m) in zip(seeds_rows, ours_spans, strict=False)
        ),
        "seeds_window_minus_span_tokens": sorted({s["seeds_n"] - s["span_n"] for s in seeds_rows}),
    }


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report["measurements"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, key, label in (
        (axes[0], "wall_s", "wall time (s), whole process"),
        (axes[1], "peak_rss_mib", "peak RSS (MiB)"),
    ):
        x = range(len(names))
        ms = [report["measurements"][n] for n in names]
        seeds = [m["seeds"][key] for m in ms]
        # Results from before the use_cache=False run have no such bar (height 0).
        no_cache = [m.get("seeds_no_cache", {}).get(key, 0) for m in ms]
        ours = [m["ours"][key] for m in ms]
        ax.bar([i - 0.27 for i in x], seeds, 0.27, label="seeds' method", color="#b0b0b0")
        ax.bar(list(x), no_cache, 0.27, label="seeds' method, use_cache=False", color="#707070")
        ax.bar([i + 0.27 for i in x], ours, 0.27, label="ours", color="#2a6fb0")
        for i, (s, o) in enumerate(zip(seeds, ours, strict=False)):
            ax.text(i + 0.27, o, f"{o / s:.2f}×", ha="center", va="bottom", fontsize=9)
        ax.set_xticks(list(x), names)
        ax.set_title(label, fontsize=10)
    axes[0].legend(fontsize=8)
    fig.suptitle("Env-token scoring on CPU (2 cores): ours / seeds' method", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


# name -> (model, label, rows' source, rows, tokens per row at most, every depth)
MEASUREMENTS = {
    "smollm2": ("smollm2", "SmolLM2-135M-Instruct (float32)", SWE_ZERO, 3, 8000, False),
    "qwen3": (qwen3_random, "Qwen3-0.6B architecture, random init (float32)", NEBIUS, 2, 10240, False),
    "depths": ("smollm2", "SmolLM2-135M-Instruct (float32), every depth", SWE_ZERO, 1, 8000, True),
}


def main() -> None:
    from terminalworld.core.records import write_json

    p = argparse.ArgumentParser()
    p.add_argument("--only", default=None, help=f"comma-separated, of {list(MEASUREMENTS)} (default: all)")
    p.add_argument("--out", default=None, help="default: benchmarks/results/scoring.json (smoke: a temp file)")
    p.add_argument("--smoke", action="store_true", help="one row of at most 1,500 tokens per measurement")
    a = p.parse_args()
    # A smoke run checks the harness end to end in about a minute; its numbers mean nothing, so it
    # skips the 0.6B model build by default and never writes over the published results.
    names = (a.only or ("smollm2,depths" if a.smoke else ",".join(MEASUREMENTS))).split(",")
    if a.out is None:
        a.out = tempfile.mkdtemp() + "/scoring-smoke.json" if a.smoke else str(HERE / "results" / "scoring.json")
    if unknown := [n for n in names if n not in MEASUREMENTS]:
        raise SystemExit(f"unknown measurement(s) {unknown}; choose from {list(MEASUREMENTS)}")
    out = Path(a.out)
    # Measurements not rerun are kept from the last run, so one can be refreshed alone.
    earlier = json.loads(out.read_text()).get("measurements", {}) if out.exists() else {}
    report = {"machine": f"{os.cpu_count()} CPU cores", "measurements": earlier}
    out.parent.mkdir(parents=True, exist_ok=True)
    for name in names:
        model, label, source, n_rows, target_len, depths = MEASUREMENTS[name]
        if a.smoke:
            n_rows, target_len = 1, min(target_len, 1500)
        m = measure(name, model() if callable(model) else model, label, source, n_rows, target_len, depths)
        report["measurements"][name] = m
        print(json.dumps({k: v for k, v in m.items() if k != "spans"}, indent=2), flush=True)
        write_json(str(out), report)
    plot(report, out.with_suffix(".png"))


if __name__ == "__main__":
    main()
