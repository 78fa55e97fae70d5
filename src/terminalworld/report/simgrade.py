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


def _f(x: float | None, pct: bool = False) -> str:
    return "—" if x is None else f"{x:.0%}" if pct else f"{x:.3f}"


def sim_markdown(table: dict[str, Any], level: int = 2) -> str:
    """The simulator grade's tables, under a heading of `level` (its tiers one level below)."""
    h, sub = "#" * level, "#" * (level + 1)
    lines = [f"{h} Simulator grade", ""]
    cps = table["checkpoints"]
    for tier, title in ((1, "Tier 1, held-out rows"), (2, "Tier 2, probes")):
        have = {n: r[f"tier{tier}"] for n, r in cps.items() if f"tier{tier}" in r}
        if not have:
            continue
        lines += [
            f"{sub} {title}",
            "",
            "| model | n | exact match | similarity | line F1 | degenerate | degenerate (long) | capped |",
        ]
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for n, r in have.items():
            cells = [_f(r["exact_match"], True), _f(r["similarity"]), _f(r["line_f1"]), _f(r["degenerate_rate"], True)]
            cells += [_f(r["degenerate_rate_long"], True), _f(r["capped_rate"], True)]
            lines.append(f"| {n} | {r['n']} | " + " | ".join(cells) + " |")
        lines += class_markdown(have)
        families = sorted({f for r in have.values() for f in r["by_family"]})
        lines += ["", "Similarity by command family:", "", "| model | " + " | ".join(families) + " |"]
        lines.append("|---|" + "---:|" * len(families))
        for n, r in have.items():
            lines.append(f"| {n} | " + " | ".join(_f(r["by_family"].get(f)) for f in families) + " |")
        lines.append("")
    loops = {n: r["tier3"] for n, r in cps.items() if "tier3" in r}
    if loops:
        lines += [f"{sub} Tier 3, the closed loop with a real shadow", ""]
        lines += ["| simulator | episodes | turn similarity | diverged | outcome agreement | reward: loop vs sandbox |"]
        lines += ["|---|---:|---:|---:|---:|---:|"]
        for n, r in loops.items():
            rewards = f"{_f(r['reward_against_simulator'])} vs {_f(r['reward_against_sandbox'])}"
            lines.append(
                f"| {n} | {r['episodes']} | {_f(r['turn_similarity'])} | {r['diverged_episodes']} | "
                f"{_f(r['outcome_agreement'], True)} | {rewards} |"
            )
        lines += [
            "",
            "| simulator | s / simulated turn | tokens / simulated turn | s / sandbox turn |",
            "|---|---:|---:|---:|",
        ]
        for n, r in loops.items():
            lines.append(
                f"| {n} | {_f(r['seconds_per_simulated_turn'])} | {_f(r['tokens_per_simulated_turn'])} | "
                f"{_f(r['seconds_per_sandbox_turn'])} |"
            )
        lines.append("")
        lines += confusion_markdown(loops)
    if table["note"]:
        lines += [f"*{table['note']}*", ""]
    return "\n".join(lines)


def class_markdown(have: dict[str, dict[str, Any]]) -> list[str]:
    """Similarity per target class (n), the headline first: read + predict, what a simulator has to
    read or predict; sentinel and copy beside it, never mixed in."""
    graded = {n: r for n, r in have.items() if r.get("headline")}
    if not graded:
        return []
    classes = sorted({c for r in graded.values() for c in r["by_class"]}, key=CLASSES.index)
    lines = ["", "Similarity by target class (n); the headline is read + predict:", ""]
    lines += ["| model | headline exact match | headline similarity | " + " | ".join(classes) + " |"]
    lines += ["|---|---:|---:|" + "---:|" * len(classes)]
    for n, r in graded.items():
        h = r["headline"]
        cells = [f"{_f(h['exact_match'], True)}", f"{_f(h['similarity'])} ({h['n']})"]
        cells += [f"{_f(r['by_class'][c].get('similarity'))} ({r['by_class'][c]['n']})" for c in classes]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return lines


def confusion_markdown(loops: dict[str, dict[str, Any]]) -> list[str]:
    """Tier 3's confusion tables: episodes by the agent's real solve (against the sandbox alone) and
    its solve against the simulator, and its belief (it submitted); with a note where the real runs
    hold one outcome only, when agreement cannot tell a simulator that judges from one that echoes."""
    have = {n: r for n, r in loops.items() if r.get("confusion")}
    if not have:
        return []
    lines = ["Real solve against simulated solve (episodes; the agent's wrong-fix share where scripted):", ""]
    lines += ["| simulator | wrong fixes | real ✓ sim ✓ | real ✓ sim ✗ | real ✗ sim ✓ | real ✗ sim ✗ | "]
    lines[-1] += "real ✓ believed ✓ | real ✗ believed ✓ |"
    lines += ["|---|---:|---:|---:|---:|---:|---:|---:|"]
    for n, r in have.items():
        c, b = r["confusion"], r.get("belief_confusion") or {}
        cells = [c["real_solved_sim_solved"], c["real_solved_sim_failed"], c["real_failed_sim_solved"]]
        cells += [
            c["real_failed_sim_failed"],
            b.get("real_solved_sim_solved", "—"),
            b.get("real_failed_sim_solved", "—"),
        ]
        share = "—" if r.get("wrong_share") is None else f"{r['wrong_share']:.0%}"
        lines.append(f"| {n} | {share} | " + " | ".join(map(str, cells)) + " |")
    if not all(r.get("real_outcomes_both") for r in have.values()):
        lines += ["", f"*{ONE_OUTCOME}*"]
    return [*lines, ""]


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
