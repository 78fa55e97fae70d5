"""The write-up's findings as trends over scale: the probe table with a scale axis, paired sign
tests between arms, the agent grade's steps of a fix per checkpoint, and the findings checked.

Checkpoints are named `{arm}-{scale}` (`assistant-x1`, `full-x9`, ...), scales listed smallest
first; the base has no scale. Every number is over the trajectories every checkpoint scored
(`metrics.compare`), so only the weights differ between cells.

- Per arm and scale: median and token-weighted PPL with bootstrap intervals, PPL > 10, the worst
  trajectory, beats base, and degrades vs the arm's own smallest scale (the write-up's "(a) 1M
  degrades on 96 of 100 relative to its own 10K checkpoint").
- Paired sign tests at each scale, per pair of arms: trajectories where one arm's PPL is below the
  other's, ties dropped, two-sided exact binomial p-value.
- The findings, each `holds` true or false on these numbers: (a) forgets with scale (its median
  rises from its smallest to its largest scale), (b) sharpens (its median falls), and
  (c) ≤ (b) < (a) at the largest scale.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from terminalworld.eval.metrics import Results
from terminalworld.report.tables import Block, Heading, Table, fixed, of, pct

ARM_LABELS = {"assistant": "(a) assistant", "full": "(b) full", "user": "(c) user"}


STEP_LABELS = {
    "valid_action": "valid action",
    "valid_reply_share": "valid replies",
    "file_localised": "file named",
    "function_localised": "function named",
    "file_found": "file found",
    "body_shown": "function shown",
    "line_shown": "buggy line shown",
    "reproduced": "reproduced",
    "edited_lines": "edited the bug's lines",
    "edited_file": "edited bug file",
    "diff": "non-empty diff",
    "solved": "solved",
}


def name(arm: str, scale: str) -> str:
    """A checkpoint's model name in the grid."""
    return f"{arm}-{scale}"


def sign_test(x: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """Paired two-sided exact sign test of x < y: counts of x below, above and tied, and p."""
    below, above = int((x < y).sum()), int((x > y).sum())
    n, k = below + above, min(below, above)
    p = min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n) if n else 1.0
    return {"below": below, "above": above, "ties": int(len(x) - n), "p": p}


def scale_table(
    table: dict[str, Any], results: dict[str, Results], *, arms: list[str], scales: list[str]
) -> dict[str, Any]:
    """The scale axis from a `metrics.compare` table (`checkpoints` by name) and the results behind it."""
    by_name = {c["name"]: c for c in table["checkpoints"]}
    ids = sorted(set.intersection(*(set(r.rows) for r in results.values())))
    ppl = {n: np.array([r.rows[i]["ppl"] for i in ids]) for n, r in results.items()}
    cells = []
    for arm in arms:
        smallest = name(arm, scales[0])
        for scale in scales:
            n = name(arm, scale)
            if n not in by_name:
                continue
            c = by_name[n]
            cell = {
                "arm": arm,
                "scale": scale,
                "name": n,
                **{k: c.get(k) for k in ("median_ppl", "median_ppl_ci95", "token_weighted_ppl")},
                **{k: c.get(k) for k in ("token_weighted_ppl_ci95", "n_ppl_gt_10", "worst", "beats_base")},
                "degrades_vs_smallest": None if scale == scales[0] else int((ppl[n] > ppl[smallest]).sum()),
            }
            cells.append(cell)
    tests = []
    for scale in scales:
        for i, x in enumerate(arms):
            for y in arms[i + 1 :]:
                a, b = name(x, scale), name(y, scale)
                if a in ppl and b in ppl:
                    tests.append({"scale": scale, "x": x, "y": y, **sign_test(ppl[a], ppl[b])})
    return {"n": len(ids), "arms": arms, "scales": scales, "cells": cells, "sign_tests": tests}


def findings(axis: dict[str, Any]) -> list[dict[str, Any]]:
    """The write-up's three findings on the scale axis, each with whether it holds here."""
    med = {(c["arm"], c["scale"]): c["median_ppl"] for c in axis["cells"]}
    first, last = axis["scales"][0], axis["scales"][-1]
    out = []
    if ("assistant", first) in med and ("assistant", last) in med:
        a0, a1 = med["assistant", first], med["assistant", last]
        out.append({"finding": "(a) forgets the world model as SFT grows", "holds": a1 > a0, "values": [a0, a1]})
    if ("full", first) in med and ("full", last) in med:
        b0, b1 = med["full", first], med["full", last]
        out.append({"finding": "(b) sharpens it as SFT grows", "holds": b1 < b0, "values": [b0, b1]})
    if all((arm, last) in med for arm in ("assistant", "full", "user")):
        a, b, c = (med[arm, last] for arm in ("assistant", "full", "user"))
        found = {"finding": f"(c) ≤ (b) < (a) at {last}", "holds": c <= b < a, "values": [c, b, a]}
        # (c) against (b) paired: a sign test that cannot tell them apart makes "(c) ≤ (b)" a tie.
        test = next(
            (t for t in axis.get("sign_tests", []) if t["scale"] == last and {t["x"], t["y"]} == {"full", "user"}),
            None,
        )
        if test is not None:
            found["c_vs_b_sign_test_p"] = test["p"]
            found["c_b_tie"] = test["p"] >= TIE_P
        out.append(found)
    return out


TIE_P = 0.05  # a paired sign test at or above this p reads as a tie


def process_table(grades: dict[str, dict[str, Any]], order: list[str]) -> list[dict[str, Any]]:
    """Per graded checkpoint (in `order`): pass@1, pass@k and the rate of each step of a fix."""
    rows = []
    for n in order:
        g = grades.get(n)
        if g is None:
            continue
        steps = {k: v["rate"] for k, v in (g.get("process") or {}).items()}
        rows.append(
            {
                "name": n,
                "pass_at_1": g["pass_at_1"],
                "pass_at_k": g.get("pass_at_k") or {},
                "scored": g["scored_trials"],
                **steps,
            }
        )
    return rows


def _ci(v: float | None, ci: list[float] | None) -> str:
    return f"{fixed(v)} [{fixed(ci[0])}, {fixed(ci[1])}]" if ci else fixed(v)


def scale_blocks(axis: dict[str, Any], found: list[dict[str, Any]], process: list[dict[str, Any]]) -> list[Block]:
    """The scale axis, the sign tests, the findings and the steps of a fix."""
    m = axis["n"]
    rows = [
        [
            ARM_LABELS.get(c["arm"], c["arm"]),
            c["scale"],
            _ci(c["median_ppl"], c["median_ppl_ci95"]),
            _ci(c["token_weighted_ppl"], c["token_weighted_ppl_ci95"]),
            c["n_ppl_gt_10"],
            fixed((c["worst"] or {}).get("ppl"), 1),
            of(c["beats_base"], m),
            of(c["degrades_vs_smallest"], m),
        ]
        for c in axis["cells"]
    ]
    columns = ["arm", "scale", "median PPL [95% CI]", "token-weighted PPL [95% CI]", "PPL > 10", "worst"]
    blocks: list[Block] = [
        Heading(f"The scale axis ({m} held-out trajectories, every checkpoint)"),
        Table([*columns, "beats base", "degrades vs own smallest"], rows, "llllrrrr"),
        "Paired sign tests (per trajectory, ties dropped): x below y on how many, two-sided p.",
        Table(
            ["scale", "x", "y", "x lower", "y lower", "ties", "p"],
            [
                [t["scale"], t["x"], t["y"], t["below"], t["above"], t["ties"], f"{t['p']:.3g}"]
                for t in axis["sign_tests"]
            ],
            "lllrrrr",
        ),
    ]
    if found:
        said = []
        for f in found:
            values = " → ".join(fixed(v) for v in f["values"])
            tie = f" — (c) and (b) tie: sign test p = {f['c_vs_b_sign_test_p']:.2g}" if f.get("c_b_tie") else ""
            said.append(f"- {f['finding']}: **{'holds' if f['holds'] else 'does not hold'}** ({values}){tie}")
        blocks += ["The write-up's findings on these numbers:", "\n".join(said)]
    if process:
        ks = sorted({k for r in process for k in r["pass_at_k"]}, key=int)
        # The columns a run recorded: the steps of `agent.process`, or an older run's named steps.
        steps = [s for s in STEP_LABELS if any(s in r for r in process)]
        head = ["checkpoint", *(f"pass@{k}" for k in ks), *(STEP_LABELS[s] for s in steps)]
        rows = [
            [r["name"], *(fixed(r["pass_at_k"].get(k), 3) for k in ks), *(pct(r.get(s)) for s in steps)]
            for r in process
        ]
        blocks += [
            Heading("Agent grade: the steps of a fix (share of scored trials)"),
            Table(head, rows, "l" + "r" * (len(head) - 1)),
        ]
    return blocks
