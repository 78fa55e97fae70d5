"""Sampler throughput and peak memory on a generated 200k-trajectory corpus.

    uv run python benchmarks/sampling.py [--trajectories 200000] [--out benchmarks/results/sampling.json]

The corpus is built from real recorded trajectories (recorded once, then re-labelled with new
instance ids and spread over up to 20,000 repos, with a long tail of rare repos), written as 20 jsonl.gz shards.
Each method runs in its own process so peak RSS is its own:

- ours: `make_subsets` (one streaming pass, bounded heap) and `sample_heldout`;
- load-all: the obvious script — read every row into a list, shuffle with the seed, slice the
  subsets, then scan for unseen repos — whose memory grows with the corpus. It does the same work
  as ours: every record parsed and validated as a trajectory by the same reader, bad records
  counted, every row scanned for held-out eligibility (no early stop), and the same files written
  (subsets, their manifest, held-out rows in the seeds' schema, the held-out manifest).

    uv run python benchmarks/sampling.py --smoke   # 2,000 rows in a temp folder: checks the harness only
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


def build_corpus(folder: Path, n: int, shards: int = 20) -> None:
    from terminalworld.core.formats import load_trajectories
    from terminalworld.corpus.recorder import RecordConfig, record_corpus

    sys.path.insert(0, str(HERE.parent))  # the generated corpus is the tests' (tests/synthetic.py)
    from tests.synthetic import write_generated_corpus

    seed_dir = folder / "seed"
    if not (seed_dir / "manifest.json").exists():
        record_corpus(RecordConfig(out=str(seed_dir), trajectories=40, seed=5))
    # Observations are cut to 400 characters so 200k rows fit a 24 GiB machine even for the
    # load-all method (about 10 KB per row; SWE-ZERO's average is larger, which favours us more).
    rows = []
    for t in load_trajectories(str(seed_dir / "*.jsonl.gz")):
        row = t.to_swe_zero_row()
        row["messages"] = [dict(m, content=m["content"][:400]) if m["role"] == "user" else m for m in row["messages"]]
        rows.append(row)
    write_generated_corpus(rows=rows, folder=str(folder), n=n, shards=shards)


def ensure_corpus(data: Path, n: int) -> Path:
    """The generated corpus of n trajectories in `data`, built unless it is already there."""
    data.mkdir(parents=True, exist_ok=True)
    marker = data / "n.json"
    if len(list(data.glob("corpus-*.jsonl.gz"))) != 20 or not marker.exists() or json.loads(marker.read_text()) != n:
        build_corpus(data, n)
        marker.write_text(json.dumps(n))
    return data


def write_report(path: str, report: dict) -> None:
    """Write a benchmark's JSON report and print it."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


OURS = """
import sys
from terminalworld.corpus.sampling import SubsetsConfig, HeldoutConfig, make_subsets, sample_heldout
corpus, out, sizes, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
make_subsets(SubsetsConfig(corpus=[corpus], out=out, sizes=sizes, seed=42))
largest = max(int(s) for s in sizes.split(","))
sample_heldout(HeldoutConfig(corpus=[corpus], train=[f"{out}/subset-{largest}.jsonl.gz"], out=f"{out}/heldout.jsonl", n=n, seed=42))
import resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""

# The same work as OURS (an earlier version parsed nothing, stopped at the n-th held-out row and
# wrote no held-out file, which flattered it): the project's reader and trajectory parser on every
# record, bad records counted, the full eligibility scan, and the same output files and manifests.
LOAD_ALL = """
import json, random, sys
from collections import Counter
from terminalworld.core.formats import iter_trajectories
from terminalworld.core.heldout import heldout_row, observed_prefix
from terminalworld.core.records import BadLine, atomic_jsonl, dumps_row, write_json
corpus, out, sizes, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
context_turns, counts, bad = 14, Counter(), []
rows = []  # (JSON line, trajectory) of every valid record
for item in iter_trajectories([corpus]):
    counts["scanned"] += 1
    if isinstance(item, BadLine):
        counts["malformed"] += 1
        bad.append(item.to_json())
    else:
        rows.append((item[0].line_bytes().decode(), item[1]))
rng = random.Random(42)
rng.shuffle(rows)
sizes = sorted(int(s) for s in sizes.split(","))
for s in sizes:
    with atomic_jsonl(f"{out}/subset-{s}.jsonl.gz") as f:
        for line, _ in rows[:s]:
            f.write(line)
write_json(f"{out}/manifest.json", {"corpus": corpus, "seed": 42, "sizes": sizes, "bad_lines": bad[:100], **counts})
train = [t for _, t in rows[: sizes[-1]]]
repos, ids = {t.repo for t in train}, {t.instance_id for t in train}
picked = {}  # repo -> its first eligible row in shuffled order
for _, t in rows:
    if observed_prefix(t) < context_turns + 1:
        counts["too_short"] += 1
    elif t.repo in repos:
        counts["excluded_repo"] += 1
    elif t.instance_id in ids:
        counts["excluded_instance"] += 1
    else:
        counts["eligible"] += 1
        if t.repo not in picked:
            picked[t.repo] = heldout_row(t, context_turns)
chosen = list(picked.values())[:n]
with atomic_jsonl(f"{out}/heldout.jsonl") as f:
    for row in chosen:
        f.write(dumps_row(row))
write_json(f"{out}/heldout.jsonl.manifest.json", {"n": n, "eligible_repos": len(picked), "selected": len(chosen), **counts})
import resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def measure(code: str, args: list[str]) -> dict[str, float]:
    """Wall time and peak RSS of one child process running `code`."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], check=True, stderr=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True
    )
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "peak_rss_mib": int(proc.stdout.split()[-1]) / 1024}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--trajectories", type=int, default=200_000)
    p.add_argument("--sizes", default="10000,100000")
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--data", default=str(HERE / ".data" / "sampling"))
    p.add_argument("--out", default=str(HERE / "results" / "sampling.json"))
    p.add_argument("--smoke", action="store_true", help="2,000 rows, small sizes, temp folders: checks the harness")
    a = p.parse_args()
    if a.smoke:  # its numbers mean nothing; it never touches the cached corpus or the published results
        tmp = tempfile.mkdtemp()
        a.trajectories, a.sizes, a.n, a.data, a.out = 2000, "100,500", 5, f"{tmp}/data", f"{tmp}/sampling.json"
    data = ensure_corpus(Path(a.data), a.trajectories)
    corpus = str(data / "corpus-*.jsonl.gz")
    corpus_bytes = sum(f.stat().st_size for f in data.glob("corpus-*.jsonl.gz"))
    results, written = {}, {}
    for name, code in (("ours", OURS), ("load_all", LOAD_ALL)):
        with tempfile.TemporaryDirectory() as out:
            results[name] = measure(code, [corpus, out, a.sizes, str(a.n)])
            written[name] = sorted(os.listdir(out))
        results[name]["trajectories_per_s"] = a.trajectories / results[name]["wall_s"]
    assert written["ours"] == written["load_all"], f"the methods wrote different files: {written}"
    report = {
        "trajectories": a.trajectories,
        "corpus_gz_mib": corpus_bytes / 2**20,
        "sizes": a.sizes,
        "n": a.n,
        "cpus": os.cpu_count(),
        **results,
        "time_ratio_ours_over_load_all": results["ours"]["wall_s"] / results["load_all"]["wall_s"],
        "memory_ratio_ours_over_load_all": results["ours"]["peak_rss_mib"] / results["load_all"]["peak_rss_mib"],
    }
    write_report(a.out, report)


if __name__ == "__main__":
    main()
