"""Scoring held-out rows: the seeds' method against ours, whole process, on CPU.

    uv run python benchmarks/scoring.py [--rows 3] [--target-len 8000] [--out benchmarks/results/scoring.json]

Rows are real SWE-ZERO trajectories (the fixture) cut to the longest context that fits SmolLM2's
8,192-token window, about 8K tokens each. Each method runs in a fresh process (model load
included) and reports its own peak RSS:

- seeds: render the prefix (up to the target command) and the full conversation, one forward
  with full-vocabulary float32 logits and log-softmax at every position, score `full[len(prefix):]`;
- ours: `terminalworld.scoring.score` (body once, head + log-softmax at span positions only).

The seeds' process also evaluates our span from its own full logits, which gives the NLL agreement.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURE = HERE.parent.parent / "shared" / "fixtures" / "real" / "adp_swe-zero-12m" / "sample_raw.json"

SEEDS = r"""
import json, resource, sys, torch
from transformers import AutoModelForCausalLM
from terminalworld.assets import hf_folder, load_tokenizer
from terminalworld.render import Renderer
from terminalworld.scoring import heldout_trajectory, observation_spans
heldout, out = sys.argv[1], sys.argv[2]
tok = load_tokenizer("smollm2")
model = AutoModelForCausalLM.from_pretrained(hf_folder("smollm2", "model"), dtype=torch.float32).eval()
res = []
for line in open(heldout):
    row = json.loads(line)
    msgs = [{"role": "system", "content": row["system"]}, {"role": "user", "content": row["task"]}]
    for c, e in row["prefix"]:
        msgs += [{"role": "assistant", "content": c}, {"role": "user", "content": e}]
    msgs.append({"role": "assistant", "content": row["target_cmd"]})
    prefix = tok.apply_chat_template(msgs, tokenize=False)
    full = tok.apply_chat_template(msgs + [{"role": "user", "content": row["target_env"]}], tokenize=False)
    p_ids = tok(prefix, add_special_tokens=False)["input_ids"]
    ids = tok(full, add_special_tokens=False)["input_ids"]
    with torch.inference_mode():
        logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), dim=-1)
    window = list(range(len(p_ids), len(ids)))
    seeds_nll = [-float(logp[p - 1, ids[p]]) for p in window]
    # Our span, from these full logits: for the agreement check.
    traj = heldout_trajectory(row)
    (span,) = observation_spans(Renderer(tok).render(traj), traj, all_depths=False)
    ours_nll = [-float(logp[p - 1, ids[p]]) for p in span.positions]
    res.append({"instance_id": row["instance_id"], "full_len": len(ids), "seeds_n": len(window),
                "seeds_mean_nll": sum(seeds_nll) / len(window), "span_n": len(ours_nll),
                "span_mean_nll_full_logits": sum(ours_nll) / len(ours_nll)})
json.dump(res, open(out, "w"))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""

OURS = r"""
import resource, sys
from terminalworld.scoring import ScoreConfig, score
score(ScoreConfig(model_path="smollm2", heldout=sys.argv[1], out_path=sys.argv[2], mode="agent"))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def build_heldout(path: Path, n_rows: int, target_len: int) -> None:
    from terminalworld.assets import load_tokenizer
    from terminalworld.formats import load_trajectories
    from terminalworld.render import Renderer
    from terminalworld.sampling import heldout_row
    from terminalworld.scoring import heldout_trajectory

    renderer = Renderer(load_tokenizer("smollm2"))
    rows = []
    for k, t in enumerate(load_trajectories(str(FIXTURE))[:n_rows]):
        best = None
        for c in range(1, len(t.turns)):
            row = dict(heldout_row(t, c), instance_id=f"{t.instance_id}#{k}")
            if len(renderer.render(heldout_trajectory(row)).input_ids) <= target_len:
                best = row
        rows.append(best)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def run(code: str, *args: str) -> dict[str, float]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, *args], check=True, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    return {"wall_s": time.perf_counter() - t0, "peak_rss_mib": int(proc.stdout.split()[-1]) / 1024}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=3)
    p.add_argument("--target-len", type=int, default=8000)
    p.add_argument("--out", default=str(HERE / "results" / "scoring.json"))
    a = p.parse_args()
    from terminalworld.assets import hf_folder, load_tokenizer

    load_tokenizer("smollm2"), hf_folder("smollm2", "model")  # convert the GGUF once, outside the timings
    with tempfile.TemporaryDirectory() as tmp:
        heldout = Path(tmp) / "heldout.jsonl"
        build_heldout(heldout, a.rows, a.target_len)
        seeds = run(SEEDS, str(heldout), f"{tmp}/seeds.json")
        ours = run(OURS, str(heldout), f"{tmp}/ours.jsonl")
        seeds_rows = json.loads(Path(f"{tmp}/seeds.json").read_text())
        ours_rows = [json.loads(x) for x in Path(f"{tmp}/ours.jsonl").read_text().splitlines()][:-1]
    agreement = [abs(o["mean_nll"] - s["span_mean_nll_full_logits"]) for o, s in zip(ours_rows, seeds_rows)]
    report = {
        "model": "SmolLM2-135M-Instruct (float32, CPU)",
        "rows": [{**s, "ours_n": o["n_target_tokens"], "ours_mean_nll": o["mean_nll"]} for s, o in zip(seeds_rows, ours_rows)],
        "seeds": seeds,
        "ours": ours,
        "time_ratio_ours_over_seeds": ours["wall_s"] / seeds["wall_s"],
        "memory_ratio_ours_over_seeds": ours["peak_rss_mib"] / seeds["peak_rss_mib"],
        "max_abs_mean_nll_diff_same_span": max(agreement),
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
