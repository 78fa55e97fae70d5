"""The pilot over two seeds on hand-made rows with known answers: the paired tests, the verdict rule
(identical arms cannot be told; a gap in both seeds holds; opposite signs between seeds cannot be
told; a gap the other way does not hold), the spread, the control, the floor and the ladder."""

import math

import numpy as np
import pytest

from terminalworld.eval.metrics import Results
from terminalworld.report.seeds import findings, ladder_over_seeds, needs, opposite_directions, probe_over_seeds
from terminalworld.report.seeds_tables import findings_blocks, ladder_seed_blocks, probe_blocks
from terminalworld.report.tables import to_markdown
from terminalworld.report.verdict import FAILS, HOLDS, UNTOLD, combine, verdict, wilcoxon

ARMS, SCALES, SEEDS = ["assistant", "full", "user"], ["x1", "x3", "x9"], ["s1", "s2"]
N = 48  # headline rows; two copy rows ride along


def _classes(n: int) -> list[str]:
    return ["read" if i % 2 else "predict" for i in range(n)] + ["copy", "copy"]


def _results(name: str, log_ppl: np.ndarray) -> Results:
    rows = {}
    for i, (lp, cls) in enumerate(zip(log_ppl, _classes(len(log_ppl) - 2), strict=True)):
        n = 10 + i % 7
        rows[f"t{i:02d}"] = {"ppl": math.exp(lp), "sum_nll": lp * n, "n_target_tokens": n, "target_class": cls}
    return Results(name, name, rows, {"model_name": name})


def _grid(shift: dict[str, float], n: int = N) -> dict[str, Results]:
    """Every checkpoint's per-row log PPL: the base's plus `shift[name]` (0 if absent) plus small noise."""
    rng = np.random.default_rng(0)
    base = rng.uniform(0.5, 1.5, n + 2)
    names = ["base", "base-control", *(f"{a}-{sc}-{sd}" for a in ARMS for sc in SCALES for sd in SEEDS)]
    out = {}
    for k, name in enumerate(names):
        noise = 0 if name == "base" else np.random.default_rng(k).normal(0, 0.02, n + 2)
        out[name] = _results(name, base + shift.get(name, 0.0) + noise)
    return out


def _probe(results):
    return probe_over_seeds(results, arms=ARMS, scales=SCALES, seeds=SEEDS, base="base", control="base-control")


def _gap(a_x9: dict[str, float], b_x9: dict[str, float]) -> dict[str, float]:
    shift = {"base-control": -0.1}
    for sd in SEEDS:
        shift |= {f"assistant-x1-{sd}": -0.2, f"assistant-x3-{sd}": -0.1, f"assistant-x9-{sd}": a_x9[sd]}
        shift |= {f"full-{sc}-{sd}": -0.3 for sc in ("x1", "x3")} | {f"full-x9-{sd}": b_x9[sd]}
    return shift


def test_wilcoxon_and_the_rule_on_known_answers():
    t = wilcoxon(np.arange(1, 11, dtype=float))  # ten positive differences: exact p = 2 / 2**10
    assert (t["pairs"], t["x_lower"], t["y_lower"], t["p"]) == (10, 0, 10, pytest.approx(2 / 1024))
    assert wilcoxon(np.zeros(5))["p"] == 1.0
    assert verdict(0.01, -0.3, [-0.2, -0.4], expected=-1) == HOLDS
    assert verdict(0.01, 0.3, [0.2, 0.4], expected=-1) == FAILS
    assert verdict(0.01, -0.3, [-0.2, 0.1], expected=-1) == UNTOLD  # the seeds disagree
    assert verdict(0.2, -0.3, [-0.2, -0.4], expected=-1) == UNTOLD
    assert verdict(0.01, 0.0, [0.0, 0.0], expected=-1) == UNTOLD
    assert combine([HOLDS, HOLDS]) == HOLDS and combine([HOLDS, UNTOLD]) == UNTOLD
    assert combine([HOLDS, FAILS, UNTOLD]) == FAILS


def test_identical_arms_cannot_be_told():
    probe = _probe(_grid({}))
    found = findings(probe, None, SCALES)
    assert [f["verdict"] for f in found] == [UNTOLD, UNTOLD]
    assert all(p["p"] > 0.05 for p in found[0]["parts"])


def test_a_gap_in_both_seeds_holds_with_the_pooled_p():
    probe = _probe(_grid(_gap({"s1": 0.3, "s2": 0.25}, {"s1": -0.3, "s2": -0.35})))
    one, _ = findings(probe, None, SCALES)
    assert one["verdict"] == HOLDS
    wm, forgets = one["parts"]
    assert wm["p"] < 1e-6 and wm["effect"] == pytest.approx(0.6, abs=0.02)  # log(a) - log(b) at x9
    assert set(wm["seed_effects"]) == {"s1", "s2"} and forgets["effect"] == pytest.approx(0.475, abs=0.02)
    t = next(t for t in probe["tests"] if (t["x"], t["y"]) == ("assistant-x9", "full-x9"))
    assert (t["pooled"]["pairs"], t["pooled"]["y_lower"]) == (2 * N, 2 * N) and t["per_seed"]["s1"]["pairs"] == N


def test_opposite_signs_between_seeds_cannot_be_told_and_a_reversed_gap_does_not_hold():
    split = _probe(_grid(_gap({"s1": 0.3, "s2": -0.5}, {"s1": -0.3, "s2": -0.3})))
    assert findings(split, None, SCALES)[0]["verdict"] == UNTOLD
    reversed_ = _probe(_grid(_gap({"s1": -0.5, "s2": -0.5}, {"s1": 0.2, "s2": 0.2})))
    one = findings(reversed_, None, SCALES)[0]
    assert one["parts"][0]["verdict"] == FAILS and one["verdict"] == FAILS


def test_the_cells_the_spread_the_control_and_the_floor():
    probe = _probe(_grid(_gap({"s1": 0.3, "s2": 0.25}, {"s1": -0.3, "s2": -0.35})))
    assert probe["headline_targets"] == N and probe["meets_floor"] and probe["class_counts"]["copy"] == 2
    models = {m["name"]: m for m in probe["models"]}
    assert list(models)[:2] == ["base", "base-control"] and len(models) == 2 + 18
    assert models["full-x9-s1"]["beats_base"] == N and models["full-x9-s1"]["beats_control"] == N
    assert models["assistant-x9-s1"]["beats_control"] == 0 and "beats_control" not in models["base-control"]
    h = models["base"]["headline"]
    assert h["median_ppl_ci95"][0] <= h["median_ppl"] <= h["median_ppl_ci95"][1] and h["n"] == N
    spread = next(s for s in probe["spread"] if (s["arm"], s["scale"]) == ("assistant", "x9"))
    s1, s2 = spread["token_weighted_ppl"]["values"]
    assert spread["token_weighted_ppl"]["difference"] == pytest.approx(s2 - s1) and s2 < s1
    assert set(probe["depth_by_class"]) == {"read", "predict", "copy"}
    md = to_markdown(probe_blocks(probe))
    assert f"{N} read + predict targets were scored by every checkpoint (floor 40: met)" in md
    assert f"| read + predict ({N}): median |" in md and "| predict (24): token-weighted / median |" in md
    small = _probe(_grid({}, n=20))
    assert not small["meets_floor"] and "**below the floor of 40**" in to_markdown(probe_blocks(small))
    assert any("below the floor of 40" in n for n in needs(findings(small, None, SCALES), small, None))


def test_few_predict_targets_are_named_beside_the_verdicts():
    # 24 read and 24 predict targets: the headline meets its floor, the predict class alone does not.
    probe = _probe(_grid(_gap({"s1": 0.3, "s2": 0.25}, {"s1": -0.3, "s2": -0.35})))
    found = findings(probe, None, SCALES)
    [scope] = [n for n in needs(found, probe, None) if n.startswith("For execution output")]
    assert "rest on 24 read targets" in scope and "and 24 predict targets" in scope
    assert "What this run cannot settle" in to_markdown(findings_blocks(found, needs(found, probe, None)))
    wide = _probe(_grid({}, n=90))  # 45 predict targets
    assert wide["class_counts"]["predict"] == 45
    assert not [n for n in needs(findings(wide, None, SCALES), wide, None) if n.startswith("For execution output")]


def _summary(solves: list[int]) -> dict:
    return {
        "per_task": {f"t{i:02d}": [1, s] for i, s in enumerate(solves)},
        "solved_trials": sum(solves),
        "scored_trials": len(solves),
        "valid_action_rate": 1.0,
        "process": {},
    }


def _ladder(a_solves: dict[str, list[int]], b_solves: dict[str, list[int]]):
    levels = {}
    for level in ("function", "pinpoint"):
        models = {"base": _summary([0] * 24)}
        for sd in SEEDS:
            for sc in ("x1", "x9"):
                models[f"assistant-{sc}-{sd}"] = _summary(a_solves[sd])
                models[f"full-{sc}-{sd}"] = _summary(b_solves[sd])
        levels[level] = models
    return ladder_over_seeds(levels, scales=["x1", "x9"], seeds=SEEDS)


def test_the_ladder_pools_task_by_seed_and_the_opposite_directions_table():
    six = [1] * 6 + [0] * 18  # (a) solves six tasks (b) does not: p = 2 / 2**6 per seed and level
    ladder = _ladder({"s1": six, "s2": six}, {"s1": [0] * 24, "s2": [0] * 24})
    assert ladder["solved_any"]
    [_x1, x9] = ladder["levels"]["function"]["paired"]
    assert x9["per_seed"]["s1"]["permutation_p"] == 2 / 64 and x9["pooled"]["tasks"] == 48
    assert x9["pooled"]["permutation_p"] == 2 / 4096 and x9["pooled"]["a_higher"] == 12
    pooled = next(t for t in ladder["pooled"] if t["scale"] == "x9")
    assert pooled["pooled"]["tasks"] == 96 and pooled["per_seed"]["s2"]["tasks"] == 48
    m = next(m for m in ladder["levels"]["pinpoint"]["models"] if m["name"] == "assistant-x9-s1")
    assert m["pass_at_k"]["1"]["value"] == 0.25
    probe = _probe(_grid(_gap({"s1": 0.3, "s2": 0.25}, {"s1": -0.3, "s2": -0.35})))
    one, two = findings(probe, ladder, SCALES)
    assert (one["verdict"], two["verdict"]) == (HOLDS, HOLDS)
    rows = {o["scale"]: o for o in opposite_directions(probe, ladder, SCALES)}
    assert (rows["x9"]["probe_favours"], rows["x9"]["agent_favours"], rows["x9"]["opposite"]) == ("(b)", "(a)", True)
    md = to_markdown(findings_blocks([one, two], []) + ladder_seed_blocks(ladder, list(rows.values())))
    assert "**(2) the probe and the agent grade move in opposite directions" in md and ": holds.**" in md
    assert "No checkpoint solved" not in md


def test_nothing_solved_says_so_and_cannot_tell_finding_two():
    ladder = _ladder({"s1": [0] * 24, "s2": [0] * 24}, {"s1": [0] * 24, "s2": [0] * 24})
    assert not ladder["solved_any"]
    probe = _probe(_grid(_gap({"s1": 0.3, "s2": 0.25}, {"s1": -0.3, "s2": -0.35})))
    found = findings(probe, ladder, SCALES)
    assert found[1]["verdict"] == UNTOLD and found[1]["parts"][1]["p"] == 1.0
    assert any("no checkpoint solved any here" in n for n in needs(found, probe, ladder))
    rows = opposite_directions(probe, ladder, SCALES)
    assert all(not o["opposite"] and o["agent_favours"] == "neither" for o in rows)
    assert "**No checkpoint solved any task at any level.**" in to_markdown(ladder_seed_blocks(ladder, rows))


def test_an_agent_grade_in_the_probe_s_direction_does_not_hold():
    six = [1] * 6 + [0] * 18
    ladder = _ladder({"s1": [0] * 24, "s2": [0] * 24}, {"s1": six, "s2": six})
    probe = _probe(_grid(_gap({"s1": 0.3, "s2": 0.25}, {"s1": -0.3, "s2": -0.35})))
    assert findings(probe, ladder, SCALES)[1]["verdict"] == FAILS
    x9 = next(o for o in opposite_directions(probe, ladder, SCALES) if o["scale"] == "x9")
    assert (x9["probe_favours"], x9["agent_favours"], x9["opposite"]) == ("(b)", "(b)", False)
