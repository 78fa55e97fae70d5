"""The simulator grade beside the probe: tier-1, tier-2 and tier-3 tables per checkpoint and their
plots (similarity by command family, degeneration rate per checkpoint, the turn where closed-loop
episodes first diverge), from `sim-eval` outputs (the summary is each file's last row)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from terminalworld.core.paths import named_files
from terminalworld.core.records import parse_json
from terminalworld.core.targets import CLASSES
from terminalworld.errors import InputError
from terminalworld.report.figures import model_colors, save_plot
from terminalworld.report.tables import Block, Heading, Table, fixed, pct

WEAK = (
    "Free-running similarity is below 0.5 for every checkpoint: these simulators do not reproduce terminal "
    "output, so the tables rank failure modes, not fidelity."
)
ONE_OUTCOME = (
    "The real runs hold one outcome only, so outcome agreement says whether the simulator printed what the "
    "agent needed to submit, not whether it can tell a fix from a failure."
)
UNMEASURED = (
    "No generated output was longer than 800 characters, so the write-up's degeneration rule could not fire: "
    "at this token cap the degeneration rate is not measured (0% here means nothing)."
)


def read_summary(path: str) -> dict[str, Any]:
    """The `_summary` row of a `sim-eval` output, checked: its tier (1, 2 or 3), per-family rates for
    tiers 1 and 2, and every number finite. Raises `InputError` naming the file otherwise."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: not a readable sim-eval output ({type(e).__name__})") from None
    last, problem, _ = parse_json(lines[-1]) if lines else ({}, None, 1)
    if problem:
        raise InputError(f"{path}:{len(lines)}: {problem}")
    if not isinstance(last, dict) or not last.get("_summary"):
        raise InputError(f"{path}: not a finished sim-eval output (no summary row last)")
    if last.get("tier") not in (1, 2, 3):
        raise InputError(f"{path}:{len(lines)}: tier is {last.get('tier')!r}, not 1, 2 or 3")
    if last["tier"] != 3 and not isinstance(last.get("by_family"), dict):
        raise InputError(f"{path}:{len(lines)}: a tier-{last['tier']} summary has no by_family rates")
    if bad := next((k for k, v in _numbers(last) if not math.isfinite(v)), None):
        raise InputError(f"{path}:{len(lines)}: {bad} is not a finite number")
    return last


def _numbers(value: Any, key: str = "") -> Iterator[tuple[str, float]]:
    """Every float in a JSON value, with its dotted key."""
    if isinstance(value, float):
        yield key, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _numbers(v, f"{key}.{k}" if key else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _numbers(v, f"{key}[{i}]")


def read_sims(pairs: list[str]) -> dict[str, dict[int, dict[str, Any]]]:
    """`NAME=PATH` pairs of `sim-eval` outputs, read into {checkpoint: {tier: summary}}."""
    sims: dict[str, dict[int, dict[str, Any]]] = {}
    for name, path in named_files(pairs, "--sim", "a sim-eval output"):
        summary = read_summary(path)
        sims.setdefault(name, {})[summary["tier"]] = summary
    return sims


def in_model_order[V](by_model: dict[str, V], names: list[str]) -> dict[str, V]:
    """`by_model` in the models' one order, `names` (base, then the arms in the recipe's order; the
    probe's checkpoint list), any other model after them as given. JSON files sort their keys, so a
    reader of `metrics.json` restores the order with this."""
    return dict(sorted(by_model.items(), key=lambda kv: names.index(kv[0]) if kv[0] in names else len(names)))


def sim_table(sims: dict[str, dict[int, dict[str, Any]]]) -> dict[str, Any]:
    """Per checkpoint and tier, the rates the tables and `report.json` show."""
    keys = ("n", "exact_match", "similarity", "line_f1", "degenerate_rate", "degenerate_rate_long", "capped_rate")
    loop = ("episodes", "turn_similarity", "diverged_episodes", "first_divergence", "outcome_agreement")
    loop += ("reward_against_simulator", "reward_against_sandbox", "sim_to_real_gap")
    loop += ("seconds_per_simulated_turn", "tokens_per_simulated_turn", "seconds_per_sandbox_turn")
    loop += ("wrong_share", "real_outcomes_both", "confusion", "belief_confusion")
    rows = {}
    for name, tiers in sims.items():
        row: dict[str, Any] = {}
        for tier in (1, 2):
            if s := tiers.get(tier):
                row[f"tier{tier}"] = {k: s.get(k) for k in keys}
                row[f"tier{tier}"]["by_family"] = {f: v.get("similarity") for f, v in s["by_family"].items()}
                row[f"tier{tier}"]["headline"] = _class_rates(s.get("headline"))
                row[f"tier{tier}"]["by_class"] = {c: _class_rates(v) for c, v in (s.get("by_class") or {}).items()}
        if s := tiers.get(3):
            row["tier3"] = {k: s.get(k) for k in loop}
        rows[name] = row
    free = [r[t] for r in rows.values() for t in ("tier1", "tier2") if t in r]
    notes = []
    if free and max(r["similarity"] for r in free) < 0.5:
        notes.append(WEAK)
    if free and all(r["degenerate_rate_long"] is None for r in free):
        notes.append(UNMEASURED)
    return {"checkpoints": rows, "note": " ".join(notes) or None}


def _class_rates(rates: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if rates is None else {k: rates.get(k) for k in ("n", "exact_match", "similarity")}


def _f(x: float | None) -> str:
    return fixed(x, 3)


def sim_blocks(table: dict[str, Any]) -> list[Block]:
    """The simulator grade's tables under one heading, its tiers one level below."""
    blocks: list[Block] = [Heading("Simulator grade")]
    cps = table["checkpoints"]
    for tier, title in ((1, "Tier 1, held-out rows"), (2, "Tier 2, probes")):
        have = {n: r[f"tier{tier}"] for n, r in cps.items() if f"tier{tier}" in r}
        if not have:
            continue
        rows = []
        for n, r in have.items():
            cells = [pct(r["exact_match"]), _f(r["similarity"]), _f(r["line_f1"]), pct(r["degenerate_rate"])]
            rows.append([n, r["n"], *cells, pct(r["degenerate_rate_long"]), pct(r["capped_rate"])])
        columns = ["model", "n", "exact match", "similarity", "line F1", "degenerate", "degenerate (long)", "capped"]
        blocks += [Heading(title, 1), Table(columns, rows, "l" + "r" * 7), *class_blocks(have)]
        families = sorted({f for r in have.values() for f in r["by_family"]})
        rows = [[n, *(_f(r["by_family"].get(f)) for f in families)] for n, r in have.items()]
        blocks += ["Similarity by command family:", Table(["model", *families], rows, "l" + "r" * len(families))]
    loops = {n: r["tier3"] for n, r in cps.items() if "tier3" in r}
    if loops:
        rows = [
            [
                n,
                r["episodes"],
                _f(r["turn_similarity"]),
                r["diverged_episodes"],
                pct(r["outcome_agreement"]),
                f"{_f(r['reward_against_simulator'])} vs {_f(r['reward_against_sandbox'])}",
            ]
            for n, r in loops.items()
        ]
        columns = ["simulator", "episodes", "turn similarity", "diverged", "outcome agreement"]
        blocks += [Heading("Tier 3, the closed loop with a real shadow", 1)]
        blocks += [Table([*columns, "reward: loop vs sandbox"], rows, "lrrrrr")]
        keys = ("seconds_per_simulated_turn", "tokens_per_simulated_turn", "seconds_per_sandbox_turn")
        rows = [[n, *(_f(r[k]) for k in keys)] for n, r in loops.items()]
        columns = ["simulator", "s / simulated turn", "tokens / simulated turn", "s / sandbox turn"]
        blocks += [Table(columns, rows, "lrrr"), *confusion_blocks(loops)]
    if table["note"]:
        blocks.append(f"*{table['note']}*")
    return blocks


def class_blocks(have: dict[str, dict[str, Any]]) -> list[Block]:
    """Similarity per target class (n), the headline first: read + predict, what a simulator has to
    read or predict; sentinel and copy beside it, never mixed in."""
    graded = {n: r for n, r in have.items() if r.get("headline")}
    if not graded:
        return []
    classes = sorted({c for r in graded.values() for c in r["by_class"]}, key=CLASSES.index)
    rows = []
    for n, r in graded.items():
        h = r["headline"]
        cells = [pct(h["exact_match"]), f"{_f(h['similarity'])} ({h['n']})"]
        rows.append(
            [n, *cells, *(f"{_f(r['by_class'][c].get('similarity'))} ({r['by_class'][c]['n']})" for c in classes)]
        )
    columns = ["model", "headline exact match", "headline similarity", *classes]
    return [
        "Similarity by target class (n); the headline is read + predict:",
        Table(columns, rows, "l" + "r" * (len(columns) - 1)),
    ]


def confusion_blocks(loops: dict[str, dict[str, Any]]) -> list[Block]:
    """Tier 3's confusion tables: episodes by the agent's real solve (against the sandbox alone) and
    its solve against the simulator, and its belief (it submitted); with a note where the real runs
    hold one outcome only, when agreement cannot tell a simulator that judges from one that echoes."""
    have = {n: r for n, r in loops.items() if r.get("confusion")}
    if not have:
        return []
    rows = []
    for n, r in have.items():
        c, b = r["confusion"], r.get("belief_confusion") or {}
        cells = [c["real_solved_sim_solved"], c["real_solved_sim_failed"], c["real_failed_sim_solved"]]
        cells += [
            c["real_failed_sim_failed"],
            b.get("real_solved_sim_solved", "—"),
            b.get("real_failed_sim_solved", "—"),
        ]
        rows.append([n, pct(r.get("wrong_share")), *cells])
    columns = ["simulator", "wrong fixes", "real ✓ sim ✓", "real ✓ sim ✗", "real ✗ sim ✓", "real ✗ sim ✗"]
    columns += ["real ✓ believed ✓", "real ✗ believed ✓"]
    blocks: list[Block] = [
        "Real solve against simulated solve (episodes; the agent's wrong-fix share where scripted):",
        Table(columns, rows, "l" + "r" * 7),
    ]
    if not all(r.get("real_outcomes_both") for r in have.values()):
        blocks.append(f"*{ONE_OUTCOME}*")
    return blocks


def sim_plots(table: dict[str, Any], out: str) -> list[str]:
    """The three plots (each only when its tier was graded)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    cps, written = table["checkpoints"], []
    colors = model_colors(list(cps))
    graded = {n: r.get("tier2") or r.get("tier1") for n, r in cps.items() if r.get("tier2") or r.get("tier1")}
    if graded:
        families = sorted({f for r in graded.values() for f in r["by_family"]})
        fig, ax = plt.subplots(figsize=(max(6, len(families) * 0.7), 3.6))
        width = 0.8 / len(graded)
        for k, (n, r) in enumerate(graded.items()):
            values = [r["by_family"].get(f) or 0 for f in families]
            ax.bar(np.arange(len(families)) + k * width, values, width, label=n, color=colors[n])
        ax.set_xticks(np.arange(len(families)) + 0.4 - width / 2, families, rotation=45, ha="right")
        ax.set(ylabel="similarity", ylim=(0, 1), title="Similarity to the real output by command family")
        ax.title.set_fontsize(9)
        ax.legend(fontsize=7)
        written.append(save_plot(fig, out, "sim_similarity_by_family.png"))
        fig, ax = plt.subplots(figsize=(5.5, 3.2))
        rates = [r["degenerate_rate"] or 0 for r in graded.values()]
        bars = ax.bar(list(graded), rates, color=[colors[n] for n in graded])
        # A zero bar is invisible: label each, and say where the 800-character rule could not fire.
        shown = [
            f"{x:.0%}" if r.get("degenerate_rate_long") is not None else "not measured"
            for x, r in zip(rates, graded.values(), strict=True)
        ]
        ax.bar_label(bars, shown, fontsize=8)
        ax.set(ylabel="degenerate share", ylim=(0, 1), title="Share of generated outputs flagged degenerate")
        ax.title.set_fontsize(9)
        written.append(save_plot(fig, out, "sim_degeneration.png"))
    loops = {n: r["tier3"] for n, r in cps.items() if "tier3" in r}
    if loops:
        fig, ax = plt.subplots(figsize=(5.5, 3.2))
        for n, r in loops.items():
            turns = [t if t is not None else 0 for t in r["first_divergence"]]
            ax.hist(turns, bins=np.arange(-0.5, max(turns) + 1.5), alpha=0.6, label=n, color=colors[n])
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # turns are whole
        ax.set(
            xlabel="first diverging turn (0: never)",
            ylabel="episodes",
            title="First diverging turn of each closed-loop episode",
        )
        ax.title.set_fontsize(9)
        ax.legend(fontsize=7)
        written.append(save_plot(fig, out, "sim_divergence.png"))
    return written
