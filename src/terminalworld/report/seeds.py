"""The pilot over its seeds: the probe per arm x scale x seed with the between-seed spread and the
base control, the paired tests per seed and pooled, the agent ladder's paired tests per seed and
pooled, the opposite-directions table, and the write-up's two findings with their verdicts.

Everything is computed from score rows (`eval.metrics.Results`) and the agent summaries' per-task
counts (from the trial rows), so a test can recompute each figure. Checkpoints are named
`{arm}-{scale}-{seed}` (`assistant-x9-s2`); the tests and the rule are in `report.verdict`.
Intervals are 95 % percentile bootstraps over rows (2,000 resamples, seeded; `metrics.bootstrap_ci`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from terminalworld.agent.compare import paired
from terminalworld.core.targets import HEADLINE, MEANING
from terminalworld.eval.metrics import Results, bootstrap_ci
from terminalworld.report.depth import depth_curve
from terminalworld.report.ladder import PAIRED_ARMS, ladder_table
from terminalworld.report.verdict import UNTOLD, combine, paired_over_seeds, verdict

TARGET_FLOOR = 40  # read + predict targets every checkpoint scores, at least (the floor)
SHOWN_CLASSES = ("read", "predict", "copy")  # per class, beside the headline; sentinels are never drawn
CLASS_SETS = {"headline": HEADLINE, **{c: (c,) for c in SHOWN_CLASSES}}


def checkpoint(arm: str, scale: str, seed: str) -> str:
    """A seeded checkpoint's model name."""
    return f"{arm}-{scale}-{seed}"


def _stats(r: Results, ids: list[str]) -> dict[str, Any]:
    if not ids:
        return {"n": 0, "median_ppl": None, "median_ppl_ci95": None, "token_weighted_ppl": None, "tw_ci95": None}
    ppl = np.array([r.rows[i]["ppl"] for i in ids], dtype=np.float64)
    s = np.array([r.rows[i]["sum_nll"] for i in ids], dtype=np.float64)
    n = np.array([r.rows[i]["n_target_tokens"] for i in ids], dtype=np.float64)
    return {
        "n": len(ids),
        "median_ppl": float(np.median(ppl)),
        "median_ppl_ci95": list(bootstrap_ci({"ppl": ppl}, lambda ppl: np.median(ppl))),
        "token_weighted_ppl": float(math.exp(s.sum() / n.sum())),
        "tw_ci95": list(bootstrap_ci({"s": s, "n": n}, lambda s, n: math.exp(s.sum() / n.sum()))),
    }


def _log_diff(results: dict[str, Results], x: str, y: str, ids: list[str]) -> np.ndarray:
    return np.array([math.log(results[x].rows[i]["ppl"]) - math.log(results[y].rows[i]["ppl"]) for i in ids])


def probe_over_seeds(
    results: dict[str, Results],
    *,
    arms: list[str],
    scales: list[str],
    seeds: list[str],
    base: str,
    control: str | None,
) -> dict[str, Any]:
    """The probe over seeds, on the rows every result scored: per class (`CLASS_SETS`) the stats of
    each model; the headline's between-seed spread per arm x scale; the headline's paired tests
    between arms at each scale and against each arm's smallest scale, per seed and pooled; the
    depth curve per class; the read + predict targets count against `TARGET_FLOOR`."""
    ids = sorted(set.intersection(*(set(r.rows) for r in results.values())))
    classed = all("target_class" in r.rows[i] for r in results.values() for i in ids)
    by_class = {
        k: [i for i in ids if not classed or results[base].rows[i]["target_class"] in cs]
        for k, cs in CLASS_SETS.items()
    }
    head = by_class["headline"]
    names = [base, *([control] if control in results else [])]
    names += [checkpoint(a, sc, sd) for a in arms for sc in scales for sd in seeds if checkpoint(a, sc, sd) in results]
    models = []
    for n in names:
        row = {"name": n, **{k: _stats(results[n], sel) for k, sel in by_class.items()}}
        for ref, key in ((base, "beats_base"), (control, "beats_control")):
            if ref in results and ref != n:
                row[key] = int(sum(results[n].rows[i]["ppl"] < results[ref].rows[i]["ppl"] for i in head))
        models.append(row)
    stats = {m["name"]: m["headline"] for m in models}
    spread = []
    for a in arms:
        for sc in scales:
            cells = {sd: stats[checkpoint(a, sc, sd)] for sd in seeds if checkpoint(a, sc, sd) in stats}
            if len(cells) < 2:
                continue
            row = {"arm": a, "scale": sc}
            for k in ("median_ppl", "token_weighted_ppl"):
                values = [cells[sd][k] for sd in seeds if sd in cells]
                row[k] = {"values": values, "difference": values[-1] - values[0]}
            spread.append(row)

    def test(kind: str, scale: str, x: tuple[str, str], y: tuple[str, str]) -> dict[str, Any] | None:
        pairs = {sd: (checkpoint(*x, sd), checkpoint(*y, sd)) for sd in seeds}
        pairs = {sd: p for sd, p in pairs.items() if p[0] in results and p[1] in results}
        if not pairs:
            return None
        diffs = {sd: _log_diff(results, a, b, head) for sd, (a, b) in pairs.items()}
        return {"kind": kind, "scale": scale, "x": "-".join(x), "y": "-".join(y), **paired_over_seeds(diffs)}

    tests = []
    for sc in scales:
        for i, a in enumerate(arms):
            for b in arms[i + 1 :]:
                tests.append(test("between arms", sc, (a, sc), (b, sc)))
    for a in arms:
        for sc in scales[1:]:
            tests.append(test("against own smallest", sc, (a, sc), (a, scales[0])))
    return {
        "rows": len(ids),
        "classed": classed,
        "headline_targets": len(head),
        "floor": TARGET_FLOOR,
        "meets_floor": len(head) >= TARGET_FLOOR,
        "class_counts": {k: len(v) for k, v in by_class.items()},
        "models": models,
        "spread": spread,
        "tests": [t for t in tests if t],
        "depth_by_class": {c: depth_curve(results, ids, (c,)) for c in SHOWN_CLASSES} if classed else {},
    }


def ladder_over_seeds(
    levels: dict[str, dict[str, dict[str, Any]]], *, scales: list[str], seeds: list[str]
) -> dict[str, Any]:
    """Per level: each model's pass@1..k with intervals and steps (`ladder.ladder_table`), and the
    paired per-task tests of (a) against (b) at each graded scale, per seed and pooled (task x seed);
    then the same pooled over levels too (level x task x seed), and whether anything was solved."""

    def counts(s: dict[str, Any]) -> dict[str, tuple[int, int]]:
        return {t: (int(n), int(c)) for t, (n, c) in (s.get("per_task") or {}).items()}

    out: dict[str, Any] = {"levels": {}, "pooled": []}
    tables = ladder_table(levels, [])
    across: dict[str, dict[str, tuple[dict, dict]]] = {}
    for level, summaries in levels.items():
        tests = []
        for sc in scales:
            per_seed, pool_a, pool_b = {}, {}, {}
            for sd in seeds:
                a, b = (summaries.get(checkpoint(arm, sc, sd)) for arm in PAIRED_ARMS)
                if not (a and b and a.get("per_task") and b.get("per_task")):
                    continue
                ca, cb = counts(a), counts(b)
                per_seed[sd] = paired(ca, cb)
                pool_a |= {f"{sd}/{t}": v for t, v in ca.items()}
                pool_b |= {f"{sd}/{t}": v for t, v in cb.items()}
                acc = across.setdefault(sc, {}).setdefault(sd, ({}, {}))
                acc[0].update({f"{level}/{t}": v for t, v in ca.items()})
                acc[1].update({f"{level}/{t}": v for t, v in cb.items()})
            if per_seed:
                tests.append({"scale": sc, "per_seed": per_seed, "pooled": paired(pool_a, pool_b)})
        out["levels"][level] = {"models": tables[level]["models"], "paired": tests}
    for sc, by_seed in across.items():
        pool_a = {f"{sd}/{t}": v for sd, (a, _) in by_seed.items() for t, v in a.items()}
        pool_b = {f"{sd}/{t}": v for sd, (_, b) in by_seed.items() for t, v in b.items()}
        out["pooled"].append(
            {
                "scale": sc,
                "per_seed": {sd: paired(a, b) for sd, (a, b) in by_seed.items()},
                "pooled": paired(pool_a, pool_b),
            }
        )
    out["solved_any"] = any(m["solved"] for t in out["levels"].values() for m in t["models"])
    return out


def _probe_test(probe: dict[str, Any], kind: str, x: str, y: str) -> dict[str, Any] | None:
    return next((t for t in probe["tests"] if (t["kind"], t["x"], t["y"]) == (kind, x, y)), None)


def _part(claim: str, t: dict[str, Any] | None, expected: int, agent: bool = False) -> dict[str, Any]:
    """One part of a finding: its claim, the deciding test's pooled p, effect and the seeds' effects."""
    if t is None:
        return {"claim": claim, "verdict": UNTOLD, "p": None, "effect": None, "seed_effects": {}, "missing": True}
    p_key, e_key = ("permutation_p", "mean_difference") if agent else ("p", "effect")
    seeds = {sd: s[e_key] for sd, s in t["per_seed"].items()}
    p, effect = t["pooled"][p_key], t["pooled"][e_key]
    return {
        "claim": claim,
        "verdict": verdict(p, effect, list(seeds.values()), expected),
        "p": p,
        "effect": effect,
        "seed_effects": seeds,
        "statistic": "permutation p, mean solve-rate difference (a - b)"
        if agent
        else f"Wilcoxon p, mean log PPL ratio {t['x']} / {t['y']}",
    }


def opposite_directions(probe: dict[str, Any], ladder: dict[str, Any], scales: list[str]) -> list[dict[str, Any]]:
    """Per graded scale, pooled over seeds (and the ladder's levels): which arm the probe favours
    ((a) against (b) on read + predict rows) and which the agent grade favours, each by the rule."""
    rows = []
    a, b = PAIRED_ARMS
    for t in ladder["pooled"]:
        sc = t["scale"]
        wm = _part("", _probe_test(probe, "between arms", f"{a}-{sc}", f"{b}-{sc}"), +1)
        ag = _part("", t, +1, agent=True)
        rows.append(
            {
                "scale": sc,
                "probe_effect": wm["effect"],
                "probe_p": wm["p"],
                "probe_favours": _favours(wm, higher_is_a=False),
                "agent_effect": ag["effect"],
                "agent_p": ag["p"],
                "agent_favours": _favours(ag, higher_is_a=True),
                "opposite": _favours(wm, False) not in ("neither", _favours(ag, True))
                and _favours(ag, True) != "neither",
            }
        )
    return rows


def _favours(part: dict[str, Any], higher_is_a: bool) -> str:
    """The arm a part's test favours by the rule (pooled p < ALPHA, seeds agreeing), else "neither"."""
    if part["verdict"] == UNTOLD:
        return "neither"
    lower = (part["effect"] or 0) < 0  # probe: x = (a) lower PPL favours (a); agent: a - b > 0 favours (a)
    return "(a)" if (not lower if higher_is_a else lower) else "(b)"


def findings(probe: dict[str, Any], ladder: dict[str, Any] | None, scales: list[str]) -> list[dict[str, Any]]:
    """The write-up's two findings, each with its parts and verdict by `report.verdict`'s rule, at
    the largest scale (the write-up's 1M), pooled over seeds.

    (1) Loss on observations makes a better world model than action-only loss, and scaling
    action-only SFT makes it worse: (b) below (a) on read + predict rows at the largest scale, and
    (a) at its largest scale above (a) at its smallest.
    (2) Probe and agent grade point in opposite directions: the probe favours (b) at the largest
    scale, and the agent grade (pooled over the ladder's levels and the seeds) favours (a)."""
    a, b = PAIRED_ARMS
    first, last = scales[0], scales[-1]
    wm = _part(
        f"(b) predicts observations better than (a) at {last}",
        _probe_test(probe, "between arms", f"{a}-{last}", f"{b}-{last}"),
        +1,
    )
    forgets = _part(
        f"(a) at {last} predicts observations worse than (a) at {first}",
        _probe_test(probe, "against own smallest", f"{a}-{last}", f"{a}-{first}"),
        +1,
    )
    one = {
        "finding": "(1) loss on observations makes a better world model than action-only loss, and scaling "
        "action-only SFT makes it worse",
        "parts": [wm, forgets],
    }
    agent_test = next((t for t in (ladder or {}).get("pooled", []) if t["scale"] == last), None)
    agent_part = _part(f"(a) solves more tasks than (b) at {last} (every level)", agent_test, +1, agent=True)
    two = {
        "finding": "(2) the probe and the agent grade move in opposite directions between arms: (b) the better "
        "world model, (a) the (slightly) better agent",
        "parts": [wm, agent_part],
    }
    for f in (one, two):
        f["verdict"] = combine([p["verdict"] for p in f["parts"]])
    return [one, two]


def needs(found: list[dict[str, Any]], probe: dict[str, Any], ladder: dict[str, Any] | None) -> list[str]:
    """What this run cannot settle and a larger run would need: from what left a part untold, and
    from what the probe's verdicts stand on when its predict targets are too few to test alone."""
    out = []
    if not probe["meets_floor"]:
        out.append(
            f"More held-out rows: {probe['headline_targets']} read + predict targets were scored by every "
            f"checkpoint, below the floor of {TARGET_FLOOR}."
        )
    counts = probe["class_counts"]
    if probe["classed"] and counts["predict"] < TARGET_FLOOR:
        # The headline pools both classes: with few predict targets its verdicts are about reading, and
        # the page says so rather than let "predicts observations" stand wider than its rows.
        out.append(
            f"For execution output: the probe's verdicts rest on {counts['read']} read targets "
            f"({MEANING['read']}) and {counts['predict']} predict targets ({MEANING['predict']}); held-out rows "
            f"with at least {TARGET_FLOOR} predict targets would let that class be tested on its own."
        )
    untold = [p for f in found for p in f["parts"] if p["verdict"] == UNTOLD]
    if any(p.get("statistic", "").startswith("Wilcoxon") for p in untold):
        out.append(
            "For the probe: scales that move the weights further (the write-up's 10K-1M trajectories against "
            "tens of packed sequences here, 10x apart rather than 3x) and more read + predict rows, so a paired "
            "test can separate the arms in both seeds."
        )
    if ladder is not None and not ladder["solved_any"]:
        out.append(
            "For the agent grade: a model that solves a measurable share of the ladder's tasks (no checkpoint "
            "solved any here), i.e. the write-up's Qwen3-1.7B-Base or larger, with more turns per attempt and "
            "more attempts per task, so (a) and (b) can differ in solves at all."
        )
    elif any(p.get("statistic", "").startswith("permutation") for p in untold):
        out.append(
            "For the agent grade: more tasks per level and more attempts per task (six tasks one arm solves "
            "and the other does not give p = 0.031), so a per-task paired test can reach p < 0.05 in both seeds."
        )
    return out


# Rendering (`report.tables`): every table here is data, rendered by the one renderer.
