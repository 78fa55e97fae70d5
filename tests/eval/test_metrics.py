import json
import math
import subprocess
import sys

import pytest

from terminalworld.errors import ResultsError
from terminalworld.eval.metrics import compare, read_results
from terminalworld.report.probe import write_comparison
from tests.paths import REPO_ROOT


def write_results(path, name, rows):
    """rows: (instance_id, n_target_tokens, mean_nll)"""
    with open(path, "w") as f:
        tot_n = tot_s = 0
        for iid, n, m in rows:
            f.write(
                json.dumps(
                    {
                        "instance_id": iid,
                        "repo": f"r/{iid}",
                        "n_target_tokens": n,
                        "sum_nll": n * m,
                        "mean_nll": m,
                        "ppl": math.exp(m),
                        "depths": [{"depth": 1, "n_target_tokens": n, "sum_nll": n * m}],
                    }
                )
                + "\n"
            )
            tot_n, tot_s = tot_n + n, tot_s + n * m
        f.write(json.dumps({"instance_id": "long", "skipped": "too long"}) + "\n")
        f.write(json.dumps({"_summary": True, "model_name": name}) + "\n")
    return str(path)


@pytest.fixture
def three(tmp_path):
    ids = [("a", 5, 3.0), ("b", 50, 0.5), ("c", 500, 0.2), ("d", 10, 1.0)]
    base = write_results(tmp_path / "base.jsonl", "base", ids)
    better = write_results(tmp_path / "full.jsonl", "full", [(i, n, m / 2) for i, n, m in ids])
    worse = write_results(
        tmp_path / "assistant.jsonl", "assistant", [(i, n, m * 1.5) for i, n, m in ids[:3]] + [("d", 10, 0.1)]
    )
    return base, better, worse


def test_probe_table_values(three):
    table = compare([read_results(p) for p in three], base="base", reference="full")
    base, full, asst = table["checkpoints"]
    assert table["n_common"] == 4
    tokens = 5 + 50 + 500 + 10
    assert base["tokens"] == tokens
    assert base["token_weighted_ppl"] == pytest.approx(math.exp((15 + 25 + 100 + 10) / tokens))
    assert base["median_ppl"] == pytest.approx((math.exp(0.5) + math.exp(1.0)) / 2)
    assert base["n_ppl_gt_10"] == 1 and base["worst"]["instance_id"] == "a" and base["worst"]["repo"] == "r/a"
    assert full["beats_base"] == 4 and asst["beats_base"] == 1
    assert asst["degrades_vs_reference"] == 3 and "beats_base" not in base
    assert base["buckets"]["<=20"]["n"] == 2 and base["buckets"][">200"]["token_share"] == pytest.approx(500 / tokens)
    # full halves every NLL: the change per trajectory is -sum_nll/2; top-5 of 4 trajectories carry all of it.
    assert full["top5_share_of_change_vs_base"] == pytest.approx(1.0)
    lo, hi = base["token_weighted_ppl_ci95"]
    assert lo <= base["token_weighted_ppl"] <= hi and lo < hi


def test_compare_cli_writes_report_and_plots(three, tmp_path):
    out = tmp_path / "cmp"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "terminalworld.cli",
            "compare",
            *three,
            "--base",
            "base",
            "--reference",
            "full",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert r.returncode == 0, r.stderr
    md = (out / "report.md").read_text()
    assert "| assistant |" in md and "1 of 4" in md and "3 of 4" in md
    for png in ("ppl_distribution.png", "paired_vs_base.png", "depth_curves.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    assert json.loads((out / "metrics.json").read_text())["base"] == "base"


def test_unfinished_results_and_bad_names_are_clear_errors(three, tmp_path):
    partial = tmp_path / "partial.jsonl"
    partial.write_text('{"instance_id": "a", "n_target_tokens": 1, "sum_nll": 1, "mean_nll": 1, "ppl": 2.7}\n')
    with pytest.raises(ResultsError, match="did not finish"):
        read_results(str(partial))
    with pytest.raises(ResultsError, match="--base 'nope'"):
        write_comparison(list(three), "nope", None, str(tmp_path / "o"))


# Skewed per-bucket PPLs, so that every median differs from the mean: 3 rows of <= 20 target
# tokens, 4 of 21-200 (an even count: the median averages the middle two), 1 of > 200.
SKEWED = [
    ("a", 5, 0.1),
    ("b", 10, 0.2),
    ("c", 15, 4.0),
    ("d", 30, 0.5),
    ("e", 100, 1.0),
    ("f", 150, 0.7),
    ("g", 200, 5.0),
    ("h", 500, 0.3),
]


def test_bucket_and_overall_medians_by_hand(tmp_path):
    import statistics

    path = write_results(tmp_path / "m.jsonl", "m", SKEWED)
    (m,) = compare([read_results(path)], base="m")["checkpoints"]
    ppl = {i: math.exp(x) for i, _, x in SKEWED}
    assert m["median_ppl"] == pytest.approx(statistics.median(ppl.values()), rel=1e-12)
    assert m["mean_ppl"] == pytest.approx(statistics.fmean(ppl.values()), rel=1e-12)
    assert m["median_ppl"] != pytest.approx(m["mean_ppl"])
    expected = {
        "<=20": (3, statistics.median([ppl["a"], ppl["b"], ppl["c"]]), 30),
        "21-200": (4, statistics.median([ppl[k] for k in "defg"]), 480),
        ">200": (1, ppl["h"], 500),
    }
    tokens = sum(n for _, n, _ in SKEWED)
    for label, (count, median, bucket_tokens) in expected.items():
        got = m["buckets"][label]
        assert got["n"] == count
        assert got["median_ppl"] == pytest.approx(median, rel=1e-12), label
        assert got["token_share"] == pytest.approx(bucket_tokens / tokens, rel=1e-12)
    # The even bucket: the average of its two middle values, 0.7 and 1.0.
    assert m["buckets"]["21-200"]["median_ppl"] == pytest.approx((math.exp(0.7) + math.exp(1.0)) / 2)


def test_bootstrap_intervals_by_hand(tmp_path):
    """The same resampling indices (numpy's default_rng(0), 2000 draws of 8 trajectories in sorted
    id order), with the statistics recomputed in plain Python."""
    import statistics

    import numpy as np

    path = write_results(tmp_path / "m.jsonl", "m", SKEWED)
    (m,) = compare([read_results(path)], base="m")["checkpoints"]
    rows = sorted(SKEWED)
    idx = np.random.default_rng(0).integers(0, len(rows), size=(2000, len(rows)))
    medians, pooled = [], []
    for draw in idx.tolist():
        sample = [rows[i] for i in draw]
        medians.append(statistics.median(math.exp(x) for _, _, x in sample))
        pooled.append(math.exp(sum(n * x for _, n, x in sample) / sum(n for _, n, _ in sample)))
    want_median = tuple(np.percentile(medians, [2.5, 97.5]))
    want_pooled = tuple(np.percentile(pooled, [2.5, 97.5]))
    assert m["median_ppl_ci95"] == pytest.approx(want_median, rel=1e-9)
    assert m["token_weighted_ppl_ci95"] == pytest.approx(want_pooled, rel=1e-9)
    # Resampled means give a different interval: the check above tells the two statistics apart.
    means = [statistics.fmean(math.exp(rows[i][2]) for i in draw) for draw in idx.tolist()]
    assert tuple(np.percentile(means, [2.5, 97.5])) != pytest.approx(want_median, rel=1e-3)


def test_change_vs_base_and_bucket_edges_by_hand(tmp_path):
    """Eight trajectories (more than the top 5) whose summed-NLL changes against the base are known,
    one unchanged (a tie beats nothing), target lengths on every bucket edge (20 | 21, 200 | 201)."""
    lengths = [20, 21, 200, 201, 1, 50, 300, 5]
    base_nll = [1.0, 2.0, 0.5, 0.25, 3.0, 1.5, 0.1, 0.7]
    deltas = [-0.5, 0.25, -0.1, 0.5, 1.0, -0.02, 0.05, 0.0]  # per-token NLL change of the arm
    ids = [f"t{k}" for k in range(8)]
    base = write_results(tmp_path / "b.jsonl", "base", list(zip(ids, lengths, base_nll, strict=True)))
    arm_rows = [(i, n, m + d) for i, n, m, d in zip(ids, lengths, base_nll, deltas, strict=True)]
    arm = write_results(tmp_path / "a.jsonl", "arm", arm_rows)
    _, got = compare([read_results(base), read_results(arm)], base="base")["checkpoints"]
    change = [n * d for n, d in zip(lengths, deltas, strict=True)]  # [-10, 5.25, -20, 100.5, 1, -1, 15, 0]
    assert got["aggregate_nll_change_vs_base"] == pytest.approx(sum(change))
    top5 = sorted((abs(c) for c in change), reverse=True)[:5]
    assert got["top5_share_of_change_vs_base"] == pytest.approx(sum(top5) / sum(abs(c) for c in change))
    assert got["beats_base"] == 3
    assert {k: v["n"] for k, v in got["buckets"].items()} == {"<=20": 3, "21-200": 3, ">200": 2}
