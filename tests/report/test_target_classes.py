"""The probe's tables by target class on known answers: the checkpoint's per-class metrics and
headline, the depth curve over read + predict only with its composition, and the grounding table."""

import math

import pytest

from terminalworld.eval.metrics import Results, compare
from terminalworld.report.depth import depth_composition, depth_curve, depth_scope
from terminalworld.report.grounding import class_table, ppl_by_class
from terminalworld.report.probe import class_blocks, probe_blocks
from terminalworld.report.tables import to_markdown

CLASSES = ["read", "predict", "copy", "sentinel"]


def _row(cls, ppl, n=10):
    return {"ppl": ppl, "sum_nll": math.log(ppl) * n, "n_target_tokens": n, "repo": "r", "target_class": cls}


def _depths(classes, ppl):
    return [
        {"depth": k + 1, "target_class": c, "ppl": ppl, "sum_nll": math.log(ppl) * 4, "n_target_tokens": 4}
        for k, c in enumerate(classes)
    ] + [
        {"depth": len(classes) + 1, "target_class": "empty", "ppl": 9e4, "sum_nll": math.log(9e4), "n_target_tokens": 1}
    ]


def _results(name, ppls):
    rows = {f"t{i}": _row(c, p) for i, (c, p) in enumerate(zip(CLASSES, ppls, strict=True))}
    for i, r in enumerate(rows.values()):
        r["depths"] = _depths(["read", "copy"] if i % 2 else ["predict", "sentinel"], ppls[i])
    return Results(name, name, rows, {"model_name": name})


def test_checkpoint_metrics_by_class_and_the_headline():
    base, ft = _results("base", [4.0, 8.0, 2.0, 1.5]), _results("ft", [2.0, 16.0, 1.1, 1.01])
    table = compare([base, ft], "base")
    c = table["checkpoints"][1]
    assert {k: v["n"] for k, v in c["by_class"].items()} == {"sentinel": 1, "copy": 1, "read": 1, "predict": 1}
    assert c["headline"]["n"] == 2 and c["headline"]["tokens"] == 20
    assert c["headline"]["token_weighted_ppl"] == pytest.approx(math.sqrt(2.0 * 16.0))
    assert c["headline"]["beats_base"] == 1  # read improved, predict worsened
    assert c["by_class"]["copy"]["token_weighted_ppl"] == pytest.approx(1.1)
    text = to_markdown(probe_blocks(table))
    assert "headline: read + predict" in text and "1 of 2" in text


def test_the_depth_curve_pools_read_and_predict_and_counts_each_class():
    results = {"base": _results("base", [4.0, 8.0, 2.0, 1.5])}
    ids = ["t0", "t1", "t2", "t3"]
    curve = depth_curve(results, ids)["base"]
    # Depth 1: t0 and t2 predict, t1 and t3 read; depth 2: only copies and sentinels; depth 3: empty.
    assert [p["depth"] for p in curve] == [1]
    assert curve[0]["rows"] == 4 and curve[0]["token_weighted_ppl"] == pytest.approx((4 * 8 * 2 * 1.5) ** 0.25)
    assert depth_composition(results, ids) == {
        1: {"predict": 2, "read": 2},
        2: {"sentinel": 2, "copy": 2},
        3: {"empty": 4},
    }
    assert depth_scope(results, ids) == "read + predict observations"
    everything = depth_curve(results, ids, classes=("read", "predict", "copy", "sentinel", "empty"))["base"]
    assert [p["depth"] for p in everything] == [1, 2, 3]


def test_grounding_by_class_marks_read_as_served_by_emulation():
    rows = {
        "none": [_row("read", 4.0), _row("predict", 9.0), _row("copy", 1.2), {"skipped": "x", "target_class": "empty"}],
        "retrieved": [_row("read", 1.1), _row("predict", 8.0), _row("copy", 1.1)],
    }
    table = ppl_by_class(rows)
    assert table["none"]["headline"]["ppl"] == pytest.approx(6.0) and table["none"]["headline"]["n"] == 2
    assert table["retrieved"]["read"]["ppl"] == pytest.approx(1.1)
    assert table["none"]["sentinel"] == {"n": 0, "ppl": None, "served": 0}
    text = class_table(table)
    assert "read (served by emulation" in text and "| headline: read + predict | 6.00 (2) |" in text


def test_the_probe_page_shows_the_headline_and_each_class(tmp_path):
    from terminalworld.report.pages import Page

    base, ft = _results("base", [4.0, 8.0, 2.0, 1.5]), _results("ft", [2.0, 16.0, 1.1, 1.01])
    page = Page(str(tmp_path), "p.md")
    page.put(*class_blocks(compare([base, ft], "base")["checkpoints"]))
    text = "\n".join(page.lines)
    assert "| model | headline: read + predict | beats base | sentinel | copy | read | predict |" in text
    assert "| ft | 5.7 / 9.0 · n=2 | 1 of 2 |" in text and page.tables == [["base", "ft"]]
