"""The corpus-scale stages on Zephyr against today's single process and the load-all script.

    uv run python benchmarks/zephyr.py [--trajectories 200000] [--out benchmarks/results/zephyr.json]
    uv run python benchmarks/zephyr.py --smoke   # 2,000 rows in a temp folder: checks the harness only

Sampler (nested subsets of 10K and 100K, then 100 held-out rows), on the generated 200k-trajectory
corpus of `benchmarks/sampling.py` (20 shards), each method in its own process:
- `single`: `make_subsets` + `sample_heldout`, one process, as before the Zephyr jobs;
- `load_all`: the obvious load-everything script (`benchmarks/sampling.py`);
- `zephyr_1`: the Zephyr jobs with one worker (shards run inline in the driver's process);
- `zephyr_2`: the Zephyr jobs with two local worker processes, one shard each.
Every method's files are compared byte for byte with `single`'s.

Render (the assistant arm with the Qwen3 tokenizer, packed to 8192) on real-shaped rows: the
SWE-ZERO fixture rows repeated with new ids, `render_file` against the tokenize job with 1 and 2
workers. Peak memory per worker is each shard's own process peak (`ru_maxrss`).
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
from tests.paths import SWE_ZERO  # noqa: E402

sys.path.insert(0, str(HERE))
from sampling import LOAD_ALL, ensure_corpus, write_report  # noqa: E402

SINGLE = """
import resource, sys
from terminalworld.corpus.sampling import SubsetsConfig, HeldoutConfig, make_subsets, sample_heldout
corpus, out, sizes, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
make_subsets(SubsetsConfig(corpus=[corpus], out=out, sizes=sizes, seed=42))
largest = max(int(s) for s in sizes.split(","))
sample_heldout(HeldoutConfig(corpus=[corpus], train=[f"{out}/subset-{largest}.jsonl.gz"], out=f"{out}/heldout.jsonl", n=n, seed=42))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""

ZEPHYR = """
import json, resource, sys
from terminalworld.corpus.sampling import SubsetsConfig, HeldoutConfig
from terminalworld.corpus.sharded import HeldoutJob, SubsetsJob, make_subsets_sharded, sample_heldout_sharded
from terminalworld.pipeline import zephyr
corpus, out, sizes, n, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
peaks = []
run = zephyr.run_shards
def recording(*args, **kwargs):
    results = run(*args, **kwargs)
    peaks.extend(r["peak_rss_mib"] for r in results if isinstance(r, dict))
    return results
zephyr.run_shards = recording
import terminalworld.corpus.sharded as sharded
sharded.run_shards = recording
w = zephyr.local_workers(workers)
make_subsets_sharded(SubsetsJob(SubsetsConfig(corpus=[corpus], out=out, sizes=sizes, seed=42), w))
largest = max(int(s) for s in sizes.split(","))
sample_heldout_sharded(HeldoutJob(HeldoutConfig(corpus=[corpus], train=[f"{out}/subset-{largest}.jsonl.gz"], out=f"{out}/heldout.jsonl", n=n, seed=42), w))
print(json.dumps({"worker_peak_rss_mib": max(peaks)}))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""

RENDER_SINGLE = """
import resource, sys
from terminalworld.train.render_rows import RenderConfig, render_file
render_file(RenderConfig(tokenizer="qwen3", inputs=[sys.argv[1]], out=sys.argv[2] + "/rows.jsonl.gz", arm="assistant", max_len=8191))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""

RENDER_ZEPHYR = """
import json, resource, sys
from terminalworld.pipeline.zephyr import local_workers
from terminalworld.train.tokenize_job import ShardedTokenize, TokenizeJob, tokenize_sharded
src, out, workers, shard_rows = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
job = TokenizeJob(inputs=[src], out=out, arm="assistant", tokenizer="qwen3", max_len=8191, seq_len=8192, shard_rows=shard_rows)
stats = tokenize_sharded(ShardedTokenize(job, local_workers(workers)))
print(json.dumps({"worker_peak_rss_mib": max(s["peak_rss_mib"] for s in stats["shards"])}))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def measure(code: str, args: list[str]) -> dict[str, float]:
    """Wall time, the driver's peak RSS and (for Zephyr) the largest worker peak of one child run."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], check=True, stderr=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True
    )
    wall = time.perf_counter() - t0
    lines = proc.stdout.split()
    out = {"wall_s": wall, "driver_peak_rss_mib": int(lines[-1]) / 1024}
    extra = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return out | (extra[-1] if extra else {})


def same_output(a: Path, b: Path) -> bool:
    """Byte-identical files; the held-out manifest names its own training file, which lies in
    each method's own folder, so that one field is left out there."""
    if a.name.endswith(".manifest.json"):
        x, y = json.loads(a.read_text()), json.loads(b.read_text())
        return {**x, "train": None} == {**y, "train": None} and len(x) == len(y)
    return a.read_bytes() == b.read_bytes()


def render_inputs(path: Path, n: int) -> None:
    raw = json.loads(SWE_ZERO.read_text())
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps(dict(raw[i % len(raw)], instance_id=f"real-shaped-{i}")) + "\n")


def bench_sampler(a: argparse.Namespace, tmp: Path) -> dict:
    """Every sampler method on the generated corpus, and whether the jobs wrote the same files."""
    corpus = str(ensure_corpus(Path(a.data), a.trajectories) / "corpus-*.jsonl.gz")
    sampler, outs = {}, {}
    for name, code, extra in (
        ("single", SINGLE, []),
        ("load_all", LOAD_ALL, []),
        ("zephyr_1", ZEPHYR, ["1"]),
        ("zephyr_2", ZEPHYR, ["2"]),
    ):
        outs[name] = tmp / name
        outs[name].mkdir()
        print(f"sampler: {name}", flush=True)
        sampler[name] = measure(code, [corpus, str(outs[name]), a.sizes, str(a.n), *extra])
        sampler[name]["trajectories_per_s"] = a.trajectories / sampler[name]["wall_s"]
    names = sorted(os.listdir(outs["single"]))
    for name in ("zephyr_1", "zephyr_2"):
        sampler[name]["byte_identical_to_single"] = sorted(os.listdir(outs[name])) == names and all(
            same_output(outs[name] / f, outs["single"] / f) for f in names
        )
    return sampler


def bench_render(a: argparse.Namespace, tmp: Path) -> dict:
    """`render` against the tokenize job with 1 and 2 workers (two shards), and row identity."""
    import gzip

    src = tmp / "render-inputs.jsonl"
    render_inputs(src, a.render_rows)
    shard_rows = -(-a.render_rows // 2)
    render: dict = {"rows": a.render_rows, "shard_rows": shard_rows}
    for name, code, extra in (
        ("single", RENDER_SINGLE, []),
        ("zephyr_1", RENDER_ZEPHYR, ["1", str(shard_rows)]),
        ("zephyr_2", RENDER_ZEPHYR, ["2", str(shard_rows)]),
    ):
        out = tmp / f"render-{name}"
        out.mkdir()
        print(f"render: {name}", flush=True)
        render[name] = measure(code, [str(src), str(out), *extra])
        render[name]["trajectories_per_s"] = a.render_rows / render[name]["wall_s"]
    single = gzip.decompress((tmp / "render-single" / "rows.jsonl.gz").read_bytes())
    for name in ("zephyr_1", "zephyr_2"):
        shards = sorted((tmp / f"render-{name}" / "rows").glob("rows-*.jsonl.gz"))
        render[name]["byte_identical_to_single"] = b"".join(gzip.decompress(x.read_bytes()) for x in shards) == single
    return render


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--trajectories", type=int, default=200_000)
    p.add_argument("--sizes", default="10000,100000")
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--render-rows", type=int, default=1200)
    p.add_argument("--data", default=str(HERE / ".data" / "sampling"))
    p.add_argument("--out", default=str(HERE / "results" / "zephyr.json"))
    p.add_argument("--parts", default="sampler,render", help="which to measure; the others keep their last figures")
    p.add_argument("--smoke", action="store_true")
    a = p.parse_args()
    if a.smoke:
        tmp = tempfile.mkdtemp()
        a.trajectories, a.sizes, a.n, a.render_rows = 2000, "100,500", 5, 4
        a.data, a.out = f"{tmp}/data", f"{tmp}/zephyr.json"
    previous = json.loads(Path(a.out).read_text()) if Path(a.out).exists() else {}
    with tempfile.TemporaryDirectory() as tmp:
        sampler = bench_sampler(a, Path(tmp)) if "sampler" in a.parts else previous["sampler"]
        render = bench_render(a, Path(tmp)) if "render" in a.parts else previous["render"]
    s, r = sampler, render
    report = {
        "trajectories": a.trajectories,
        "sizes": a.sizes,
        "n": a.n,
        "cpus": os.cpu_count(),
        "sampler": sampler,
        "render": render,
        "sampler_zephyr_1_over_single": s["zephyr_1"]["wall_s"] / s["single"]["wall_s"],
        "sampler_zephyr_2_speedup_over_1": s["zephyr_1"]["wall_s"] / s["zephyr_2"]["wall_s"],
        "sampler_zephyr_2_speedup_over_single": s["single"]["wall_s"] / s["zephyr_2"]["wall_s"],
        "sampler_zephyr_2_over_load_all": s["zephyr_2"]["wall_s"] / s["load_all"]["wall_s"],
        "render_zephyr_1_over_single": r["zephyr_1"]["wall_s"] / r["single"]["wall_s"],
        "render_zephyr_2_speedup_over_1": r["zephyr_1"]["wall_s"] / r["zephyr_2"]["wall_s"],
    }
    write_report(a.out, report)


if __name__ == "__main__":
    main()
