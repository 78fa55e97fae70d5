"""The pilot over its seeds as tables: the findings with their verdicts, the probe per arm x scale x
seed, and the agent ladder's paired tests (`report.seeds` computes them; `report.tables` renders)."""

from __future__ import annotations

from typing import Any

from terminalworld.report.seeds import SHOWN_CLASSES
from terminalworld.report.tables import Block, Heading, Table, fixed


def _ci(v: float | None, ci: list[float] | None) -> str:
    return fixed(v) + (f" [{fixed(ci[0])}, {fixed(ci[1])}]" if ci else "")


def _p(p: float | None) -> str:
    return "—" if p is None else f"{p:.3g}"


def _effect(x: float | None) -> str:
    """An effect to 3 decimals, or to 3 significant digits when that would show it as 0.000."""
    if x is None or x == 0 or abs(x) >= 0.0005:
        return fixed(x, 3)
    return f"{x:.3g}"


def findings_lines(found: list[dict[str, Any]]) -> str:
    """Each finding's verdict, then each part's with the statistic that decides it, as a markdown
    list (the Pilot page's and the README's)."""
    lines = []
    for f in found:
        lines.append(f"- **{f['finding']}: {f['verdict']}.**")
        for p in f["parts"]:
            seeds = ", ".join(f"{s}: {_effect(e)}" for s, e in p["seed_effects"].items()) or "not graded"
            stat = p.get("statistic", "no test")
            lines.append(
                f"    - {p['claim']}: {p['verdict']} ({stat}: pooled p = {_p(p['p'])}, effect "
                f"{_effect(p['effect'])}; per seed {seeds})"
            )
    return "\n".join(lines)


def findings_blocks(found: list[dict[str, Any]], needed: list[str]) -> list[Block]:
    """The findings in plain words: each verdict, its parts and the statistic that decides each."""
    rule = (
        "The rule, fixed in code before the run (`report.verdict`): a part holds when the pooled paired test "
        "(unit x seed) has p < 0.05 in the stated direction and both seeds' effects have that sign; it does "
        "not hold when p < 0.05 in the opposite direction with both seeds agreeing; otherwise it cannot be "
        "told at this size. A finding holds when every part holds and does not hold when any part does not."
    )
    blocks: list[Block] = [Heading("The write-up's findings"), rule, findings_lines(found)]
    if needed:
        blocks += [
            "What this run cannot settle, and what a larger run would need:",
            "\n".join(f"- {n}" for n in needed),
        ]
    return blocks


def probe_blocks(probe: dict[str, Any]) -> list[Block]:
    """The probe per arm x scale x seed: per class, the spread, the tests and the depth curve per class."""
    n = probe["headline_targets"]
    floor = (
        f"{n} read + predict targets were scored by every checkpoint (floor {probe['floor']}: met)."
        if probe["meets_floor"]
        else f"Only {n} read + predict targets were scored by every checkpoint, **below the floor of "
        f"{probe['floor']}**: the probe's tests are weaker than planned."
    )
    counts = ", ".join(f"{k} {v}" for k, v in probe["class_counts"].items())
    blocks: list[Block] = [
        Heading("The probe per arm, scale and seed"),
        f"{floor} Rows every model scored: {probe['rows']} ({counts}; sentinels are never drawn). Median and "
        "token-weighted PPL with 95 % percentile bootstrap intervals over rows (2,000 resamples). "
        "*Beats base* and *beats control* count read + predict rows below the base's and the base control's PPL.",
    ]
    rows = []
    for m in probe["models"]:
        h = m["headline"]
        rows.append(
            [
                m["name"],
                _ci(h["median_ppl"], h["median_ppl_ci95"]),
                _ci(h["token_weighted_ppl"], h["tw_ci95"]),
                *(f"{fixed(m[c]['token_weighted_ppl'])} / {fixed(m[c]['median_ppl'])}" for c in SHOWN_CLASSES),
                "—" if "beats_base" not in m else f"{m['beats_base']} of {n}",
                "—" if "beats_control" not in m else f"{m['beats_control']} of {n}",
            ]
        )
    # Each class's target count in its header: a class of one row shows one row's PPL, not a median.
    k = probe["class_counts"]
    head = ["model", f"read + predict ({n}): median", f"read + predict ({n}): token-weighted"]
    head += [f"{c} ({k[c]}): token-weighted / median" for c in SHOWN_CLASSES] + ["beats base", "beats control"]
    blocks.append(Table(head, rows, "l" + "r" * (len(head) - 1)))
    if probe["spread"]:
        rows = [
            [
                s["arm"],
                s["scale"],
                *(" / ".join(fixed(v) for v in s[k]["values"]) for k in ("median_ppl", "token_weighted_ppl")),
                *(fixed(s[k]["difference"]) for k in ("median_ppl", "token_weighted_ppl")),
            ]
            for s in probe["spread"]
        ]
        blocks += [
            "Between-seed spread on read + predict rows: each seed's value, and the last seed's minus the first's.",
            Table(
                ["arm", "scale", "median per seed", "token-weighted per seed", "median diff", "tw diff"], rows, "llrrrr"
            ),
        ]
    if probe["tests"]:
        rows = []
        for t in probe["tests"]:
            per_seed = "; ".join(
                f"{s}: {v['x_lower']}-{v['y_lower']}, p {_p(v['p'])}" for s, v in t["per_seed"].items()
            )
            pool = t["pooled"]
            rows.append(
                [
                    t["x"],
                    t["y"],
                    t["kind"],
                    per_seed,
                    f"{pool['x_lower']}-{pool['y_lower']}",
                    fixed(pool["effect"], 3),
                    _p(pool["p"]),
                ]
            )
        blocks += [
            "Paired Wilcoxon signed-rank tests on read + predict rows (x against y, per-row log PPL difference, "
            "two-sided): per seed, rows where x is lower - where y is lower and p; pooled over seeds by pairing "
            "row x seed, with the mean log PPL ratio (below 0: x lower).",
            Table(["x", "y", "test", "per seed", "pooled x-y lower", "mean log ratio", "pooled p"], rows, "lllrrrr"),
        ]
    for cls, curve in probe["depth_by_class"].items():
        if not curve:
            continue
        depths = sorted({p["depth"] for pts in curve.values() for p in pts})
        rows = []
        for name, pts in curve.items():
            at = {p["depth"]: p for p in pts}
            rows.append(
                [name, *(f"{fixed(at[d]['median_ppl'], 1)} ({at[d]['rows']})" if d in at else "—" for d in depths)]
            )
        blocks += [
            Heading(f"Depth curve: {cls} observations", 1),
            f"Median PPL of the k-th observation of a row, {cls} observations only (rows scored at that depth).",
            Table(["model", *(str(d) for d in depths)], rows, "l" + "r" * len(depths)),
        ]
    return blocks


def ladder_seed_blocks(ladder: dict[str, Any], opposite: list[dict[str, Any]]) -> list[Block]:
    """The ladder's pass@1..k per model and level, the paired tests per seed and pooled, and the
    opposite-directions table."""
    blocks: list[Block] = [Heading("Agent grade on the ladder, per seed")]
    if not ladder["solved_any"]:
        blocks.append(
            "**No checkpoint solved any task at any level.** pass@k is 0 everywhere, so the paired tests cannot "
            "separate the arms; the evidence-based steps of a fix (file found, function shown, buggy line shown) "
            "are the grade that carries information here."
        )
    for level, t in ladder["levels"].items():
        ks = sorted({k for m in t["models"] for k in m["pass_at_k"]}, key=int)
        rows = []
        for m in t["models"]:
            cells = []
            for k in ks:
                v = m["pass_at_k"].get(k)
                cells.append("—" if v is None else f"{v['value']:.3f} [{v['ci95'][0]:.3f}, {v['ci95'][1]:.3f}]")
            steps = [fixed(m.get(s), 3) for s in ("file_found", "body_shown", "line_shown")]
            rows.append([m["name"], *cells, f"{m['solved']} / {m['scored']}", *steps])
        head = ["model", *(f"pass@{k}" for k in ks), "solved / scored", "file found", "function shown", "line shown"]
        blocks += [Heading(f"Level: {level}", 1), Table(head, rows, "l" + "r" * (len(head) - 1))]
        if t["paired"]:
            blocks.append(_paired_table(t["paired"]))
    if ladder["pooled"]:
        blocks += ["Pooled over every level too (unit: level x task x seed):", _paired_table(ladder["pooled"])]
    if opposite:
        rows = [
            [
                o["scale"],
                fixed(o["probe_effect"], 3),
                _p(o["probe_p"]),
                o["probe_favours"],
                fixed(o["agent_effect"], 3),
                _p(o["agent_p"]),
                o["agent_favours"],
                "yes" if o["opposite"] else "no",
            ]
            for o in opposite
        ]
        blocks += [
            Heading("Opposite directions: the probe against the agent grade", 1),
            "Per scale, pooled over seeds: the probe's (a) against (b) on read + predict rows (mean log PPL "
            "ratio, Wilcoxon p) and the agent grade's (a) minus (b) per-task solve rate over every level "
            "(permutation p); an arm is favoured only by the findings' rule (p < 0.05, both seeds agreeing).",
            Table(
                [
                    "scale",
                    "probe: log ratio a/b",
                    "probe p",
                    "probe favours",
                    "agent: a - b",
                    "agent p",
                    "agent favours",
                    "opposite",
                ],
                rows,
                "lrrlrrll",
            ),
        ]
    return blocks


def _paired_table(tests: list[dict[str, Any]]) -> Table:
    rows = []
    for t in tests:
        seeds = "; ".join(
            f"{s}: {fixed(v['mean_difference'], 3)} ({v['a_higher']}-{v['b_higher']}), p {_p(v['permutation_p'])}"
            for s, v in t["per_seed"].items()
        )
        p = t["pooled"]
        rows.append(
            [
                t["scale"],
                seeds,
                p["tasks"],
                fixed(p["mean_difference"], 3),
                f"{p['a_higher']}-{p['b_higher']}",
                _p(p["sign_p"]),
                _p(p["permutation_p"]),
            ]
        )
    return Table(
        [
            "scale",
            "per seed: a - b (a higher-b higher), p",
            "pooled units",
            "a - b",
            "a higher-b higher",
            "sign p",
            "permutation p",
        ],
        rows,
        "llrrrrr",
    )
