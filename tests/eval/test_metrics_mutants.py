"""Edge cases of the probe table's rules that the main metrics tests do not reach: error messages
with their line numbers, the empty and tied cases, and the exact shape of each row."""

import json
import math

import pytest

from terminalworld.errors import ResultsError
from terminalworld.eval.metrics import Results, compare, ppl_stats, read_results


def row(iid, n, ppl, **extra):
    return {
        "instance_id": iid,
        "repo": f"r/{iid}",
        "n_target_tokens": n,
        "sum_nll": n * math.log(ppl),
        "ppl": ppl,
        **extra,
    }


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def test_read_results_skips_blank_lines_and_keeps_path_and_summary(tmp_path):
    """A blank line in the middle does not end the file; the result keeps its path and summary row."""
    summary = {"_summary": True, "model_name": "m"}
    path = write_lines(
        tmp_path / "s.jsonl", [json.dumps(row("a", 2, 3.0)), "", json.dumps(row("b", 4, 5.0)), json.dumps(summary)]
    )
    r = read_results(path)
    assert r.name == "m" and r.path == path and r.summary == summary
    assert sorted(r.rows) == ["a", "b"]


def test_read_results_errors_name_the_line(tmp_path):
    """Invalid JSON and a row without instance_id are errors naming the file and its 1-based line."""
    bad_json = write_lines(tmp_path / "j.jsonl", [json.dumps(row("a", 1, 2.0)), "{oops"])
    with pytest.raises(ResultsError, match=r"j\.jsonl:2: invalid JSON"):
        read_results(bad_json)
    no_id = write_lines(tmp_path / "i.jsonl", ["{}"])
    with pytest.raises(ResultsError, match=r"i\.jsonl:1: not a scorer row \(no instance_id\)"):
        read_results(no_id)
    not_a_dict = write_lines(tmp_path / "l.jsonl", [json.dumps(row("a", 1, 2.0)), "[1, 2]"])
    with pytest.raises(ResultsError, match=r"l\.jsonl:2: not a scorer row"):
        read_results(not_a_dict)


def test_ppl_stats_of_no_rows():
    """No rows: zero counts and None statistics, under the same keys as a non-empty result."""
    assert ppl_stats([]) == {
        "tokens": 0,
        "sum_nll": 0.0,
        "token_weighted_ppl": None,
        "median_ppl": None,
        "mean_ppl": None,
        "n_ppl_gt_10": 0,
        "worst": None,
    }


def test_ppl_stats_threshold_worst_and_sums():
    """PPL > 10 is strict (exactly 10 does not count, 10.5 does); the worst row is the highest PPL
    wherever it is, reported with its id, repo, PPL and length; summed NLL is the plain sum."""
    rows = [row("a", 2, 10.0), row("b", 3, 10.5), row("c", 5, 40.0), row("d", 1, 1.0)]
    got = ppl_stats(rows)
    assert got["n_ppl_gt_10"] == 2
    assert got["worst"] == {"instance_id": "c", "repo": "r/c", "ppl": 40.0, "n_target_tokens": 5}
    assert got["tokens"] == 11
    want_sum = 2 * math.log(10) + 3 * math.log(10.5) + 5 * math.log(40)
    assert got["sum_nll"] == pytest.approx(want_sum)
    assert got["token_weighted_ppl"] == pytest.approx(math.exp(want_sum / 11))


def _results(name, rows):
    return Results(name, f"{name}.jsonl", rows, {"_summary": True, "model_name": name})


def test_checkpoint_row_names_trajectories_by_their_ids():
    """The worst trajectory is named by its id in the common set, even when the row does not repeat
    it; the row carries the checkpoint's name and the number of common trajectories."""
    rows = {
        "x": {"n_target_tokens": 4, "sum_nll": 4.0, "ppl": math.e},
        "y": {"n_target_tokens": 2, "sum_nll": 6.0, "ppl": math.e**3},
    }
    table = compare([_results("m", rows)], base="m")
    assert table["base"] == "m" and table["reference"] is None and table["n_common"] == 2
    (got,) = table["checkpoints"]
    assert got["name"] == "m" and got["n"] == 2
    assert got["worst"]["instance_id"] == "y"


def test_empty_bucket_median_is_none():
    """A length bucket with no trajectory has count 0, no median (None) and a token share of 0."""
    rows = {"a": row("a", 5, 2.0), "b": row("b", 300, 3.0)}
    (got,) = compare([_results("m", rows)], base="m")["checkpoints"]
    assert got["buckets"]["21-200"] == {"n": 0, "median_ppl": None, "token_share": 0.0}


def test_no_change_vs_base_and_ties_with_reference():
    """An arm equal to the base has a top-5 share of 0 (not a division by zero), beats it nowhere,
    and a tie with the reference is not a degradation."""
    rows = {"a": row("a", 5, 2.0), "b": row("b", 30, 3.0)}
    base, same, ref = _results("base", rows), _results("same", dict(rows)), _results("ref", dict(rows))
    _, got, _ = compare([base, same, ref], base="base", reference="ref")["checkpoints"]
    assert got["top5_share_of_change_vs_base"] == 0.0
    assert got["aggregate_nll_change_vs_base"] == 0.0
    assert got["beats_base"] == 0
    assert got["degrades_vs_reference"] == 0


def test_compare_error_messages():
    """Duplicate names, an unknown reference (listing the known names) and no common trajectory are
    errors that say which."""
    a = _results("a", {"x": row("x", 1, 2.0)})
    b = _results("b", {"y": row("y", 1, 2.0)})
    with pytest.raises(ResultsError, match=r"^two result files carry the same model name; pass distinct --model-name"):
        compare([a, _results("a", {})], base="a")
    with pytest.raises(ResultsError, match=r"^--reference 'zz' is not one of \['a', 'b'\]$"):
        compare([a, b], base="a", reference="zz")
    with pytest.raises(ResultsError, match=r"^no trajectory was scored by every checkpoint$"):
        compare([a, b], base="a")
