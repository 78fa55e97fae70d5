"""The scale axis on results with known answers: sign tests, degradation against the arm's own
smallest scale, the findings checked, the steps of a fix per checkpoint, and the depth curve."""

import math

import numpy as np
import pytest

from terminalworld.eval.metrics import Results, compare
from terminalworld.report.depth import depth_curve
from terminalworld.report.scale import findings, process_table, scale_blocks, scale_table, sign_test
from terminalworld.report.tables import to_markdown


def _results(name: str, ppls: list[float]) -> Results:
    rows = {}
    for i, p in enumerate(ppls):
        n = 10 + i
        rows[f"t{i}"] = {"ppl": p, "sum_nll": math.log(p) * n, "n_target_tokens": n, "repo": f"r/{i}"}
        rows[f"t{i}"]["depths"] = [{"depth": 0, "ppl": p * 2, "sum_nll": math.log(p * 2) * 5, "n_target_tokens": 5}]
    return Results(name, name, rows, {"model_name": name})


def test_sign_test_matches_the_exact_binomial():
    x, y = np.array([1, 1, 1, 1, 1, 2.0]), np.array([2, 2, 2, 2, 2, 2.0])
    t = sign_test(x, y)
    assert (t["below"], t["above"], t["ties"]) == (5, 0, 1)
    assert t["p"] == pytest.approx(2 / 32)  # two-sided: 2 * P(X <= 0), X ~ Bin(5, 1/2)
    assert sign_test(np.array([1.0, 2.0]), np.array([2.0, 1.0]))["p"] == 1.0


def _grid():
    base = [2.0, 2.0, 2.0, 2.0]
    data = {
        "base": base,
        # (a) forgets: worse at x3 than at x1 on 3 of 4; (b) and (c) sharpen.
        "assistant-x1": [1.8, 1.8, 1.8, 1.8],
        "assistant-x3": [2.5, 2.5, 2.5, 1.0],
        "full-x1": [1.5, 1.5, 1.5, 1.5],
        "full-x3": [1.2, 1.2, 1.2, 1.2],
        "user-x1": [1.4, 1.4, 1.4, 1.4],
        "user-x3": [1.1, 1.1, 1.1, 1.1],
    }
    results = {n: _results(n, v) for n, v in data.items()}
    return compare(list(results.values()), "base"), results


def test_the_scale_axis_counts_and_the_findings_hold_where_they_should():
    table, results = _grid()
    axis = scale_table(table, results, arms=["assistant", "full", "user"], scales=["x1", "x3"])
    cells = {c["name"]: c for c in axis["cells"]}
    assert axis["n"] == 4 and len(cells) == 6
    assert cells["assistant-x3"]["degrades_vs_smallest"] == 3 and cells["full-x3"]["degrades_vs_smallest"] == 0
    assert cells["assistant-x1"]["degrades_vs_smallest"] is None
    assert cells["assistant-x3"]["beats_base"] == 1 and cells["full-x1"]["beats_base"] == 4
    t = next(t for t in axis["sign_tests"] if t["scale"] == "x3" and (t["x"], t["y"]) == ("full", "user"))
    assert (t["below"], t["above"]) == (0, 4)
    found = {f["finding"]: f["holds"] for f in findings(axis)}
    assert found == {
        "(a) forgets the world model as SFT grows": True,
        "(b) sharpens it as SFT grows": True,
        "(c) ≤ (b) < (a) at x3": True,
    }
    swapped = scale_table(table, results, arms=["assistant", "full", "user"], scales=["x3", "x1"])
    trends = [f["holds"] for f in findings(swapped) if "grows" in f["finding"]]
    assert trends == [False, False]  # the same numbers read backwards
    text = to_markdown(scale_blocks(axis, findings(axis), []))
    assert "3 of 4" in text and "**holds**" in text


def test_steps_of_a_fix_and_the_depth_curve():
    grades = {
        "base": {
            "pass_at_1": 0.0,
            "pass_at_k": {"1": 0.0, "2": 0.0},
            "scored_trials": 4,
            "process": {"valid_action": {"rate": 0.5, "n": 4}, "solved": {"rate": 0.0, "n": 4}},
        }
    }
    rows = process_table(grades, ["base", "full-x1"])
    assert rows == [
        {
            "name": "base",
            "pass_at_1": 0.0,
            "pass_at_k": {"1": 0.0, "2": 0.0},
            "scored": 4,
            "valid_action": 0.5,
            "solved": 0.0,
        }
    ]
    _, results = _grid()
    curve = depth_curve(results, ["t0", "t1"])
    assert curve["base"] == [
        {
            "depth": 0,
            "rows": 2,
            "tokens": 10,
            "median_ppl": pytest.approx(4.0),
            "token_weighted_ppl": pytest.approx(4.0),
        }
    ]


def test_c_below_b_with_a_sign_test_that_cannot_tell_them_apart_is_a_tie():
    cells = [
        {"arm": arm, "scale": s, "median_ppl": m}
        for (arm, s), m in {
            ("assistant", "x1"): 2.0,
            ("assistant", "x9"): 2.4,
            ("full", "x1"): 1.8,
            ("full", "x9"): 1.503,
            ("user", "x1"): 1.8,
            ("user", "x9"): 1.497,
        }.items()
    ]
    axis = {
        "cells": cells,
        "scales": ["x1", "x9"],
        "sign_tests": [{"scale": "x9", "x": "full", "y": "user", "p": 0.06}],
    }
    third = findings(axis)[2]
    assert third["holds"] and third["c_b_tie"] and third["c_vs_b_sign_test_p"] == 0.06
    axis["sign_tests"][0]["p"] = 0.001
    assert findings(axis)[2]["c_b_tie"] is False
