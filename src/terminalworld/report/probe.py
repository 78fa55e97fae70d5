"""`terminalworld compare`: the probe table as Markdown, JSON and plots."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from terminalworld.core.paths import named_files
from terminalworld.core.records import atomic_output, read_json, write_json
from terminalworld.core.terminal import for_terminal
from terminalworld.errors import InputError
from terminalworld.eval.metrics import BUCKETS, Results, compare, read_results
from terminalworld.options import option, readable_file
from terminalworld.report.depth import depth_curve, depth_scope
from terminalworld.report.figures import log_axis, model_colors, save_plot
from terminalworld.report.joint import joint_markdown, joint_plot, joint_table
from terminalworld.report.pages import cell
from terminalworld.report.simgrade import in_model_order, read_sims, sim_markdown, sim_plots, sim_table


def _f(x: float | None, nd: int = 2) -> str:
    return "—" if x is None else f"{x:.{nd}f}"


def markdown(table: dict[str, Any]) -> str:
    """A `metrics.compare` table as Markdown: the headline table (one row per checkpoint, "—" for
    an absent value), then the length-bucket table."""
    cps = table["checkpoints"]
    m = table["n_common"]
    lines = [
        f"# World-model probe: env-token PPL on {m} held-out trajectories",
        "",
        f"Base: `{table['base']}`" + (f"; reference: `{table['reference']}`" if table["reference"] else ""),
        "",
        "| checkpoint | token-weighted PPL [95% CI] | median PPL [95% CI] | mean PPL | PPL > 10 | worst (repo) | beats base | degrades vs ref | top-5 share of change |",
        "|---|---|---|---:|---:|---|---:|---:|---:|",
    ]
    for c in cps:
        tw, md = c["token_weighted_ppl_ci95"], c["median_ppl_ci95"]
        worst = c["worst"]
        lines.append(
            f"| {cell(c['name'])} | {_f(c['token_weighted_ppl'])} [{_f(tw[0])}, {_f(tw[1])}] | {_f(c['median_ppl'])} "
            f"[{_f(md[0])}, {_f(md[1])}] | {_f(c['mean_ppl'])} | {c['n_ppl_gt_10']} | {_f(worst['ppl'], 1)} "
            f"({cell(worst['repo'])}) | {_bn(c.get('beats_base'), m)} | {_bn(c.get('degrades_vs_reference'), m)} | "
            f"{_pct(c.get('top5_share_of_change_vs_base'))} |"
        )
    lines += [
        "",
        "Length buckets (target tokens): median PPL / share of scored tokens",
        "",
        "| checkpoint | " + " | ".join(label for label, *_ in BUCKETS) + " |",
        "|---|" + "---|" * len(BUCKETS),
    ]
    for c in cps:
        cells = [
            f"{_f(c['buckets'][label]['median_ppl'])} / {c['buckets'][label]['token_share']:.0%} (n={c['buckets'][label]['n']})"
            for label, *_ in BUCKETS
        ]
        lines.append(f"| {cell(c['name'])} | " + " | ".join(cells) + " |")
    lines += class_markdown(cps, m)
    return "\n".join(lines) + "\n"


def class_markdown(cps: list[dict[str, Any]], m: int) -> list[str]:
    """The per-class table (`core.targets`): the headline on read + predict first, then each class,
    as token-weighted PPL / median PPL (rows); nothing when the scores carry no class."""
    from terminalworld.core.targets import CLASSES

    if not cps or "by_class" not in cps[0]:
        return []

    def cell(x: dict[str, Any]) -> str:
        return f"{_f(x['token_weighted_ppl'])} / {_f(x['median_ppl'])} (n={x['n']})" if x["n"] else "— (n=0)"

    lines = [
        "",
        "Target classes (token-weighted PPL / median PPL, rows): the headline is read + predict; copy "
        "(text already in context) and sentinel (fixed harness output) measure no prediction",
        "",
        "| checkpoint | headline: read + predict | beats base (headline) | " + " | ".join(CLASSES) + " |",
        "|---|---|---:|" + "---|" * len(CLASSES),
    ]
    for c in cps:
        head = c["headline"]
        beats = _bn(head.get("beats_base"), head["n"])
        lines.append(
            f"| {c['name']} | {cell(head)} | {beats} | " + " | ".join(cell(c["by_class"][k]) for k in CLASSES) + " |"
        )
    return lines


def _bn(x: int | None, m: int) -> str:
    return "—" if x is None else f"{x} of {m}"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.0%}"


def plots(results: list[Results], table: dict[str, Any], out: str) -> list[str]:
    """Write PNGs into the existing folder `out`, each atomically, and return their paths: the
    per-trajectory PPL distribution, PPL paired against the base (when there are other checkpoints)
    and PPL by depth (when any row has `depths`), over the trajectories every result scored."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ids = sorted(set.intersection(*(set(r.rows) for r in results)))
    colors = model_colors([r.name for r in results])
    written = []
    fig, ax = plt.subplots(figsize=(1.6 * len(results) + 2, 4))
    data = [np.log10([r.rows[i]["ppl"] for i in ids]) for r in results]
    ax.boxplot(data, showfliers=False)
    for k, (r, d) in enumerate(zip(results, data, strict=True), start=1):
        ax.scatter(np.random.default_rng(k).normal(k, 0.05, len(d)), d, s=8, alpha=0.6, color=colors[r.name])
    ax.set_xticks(range(1, len(results) + 1), [r.name for r in results], rotation=20)
    ax.set_ylabel("log10 per-trajectory PPL")
    ax.set_title("Per-trajectory env-token PPL")
    written.append(save_plot(fig, out, "ppl_distribution.png"))

    base = next(r for r in results if r.name == table["base"])
    others = [r for r in results if r is not base]
    if others:
        fig, ax = plt.subplots(figsize=(5, 5))
        b = np.array([base.rows[i]["ppl"] for i in ids])
        for r in others:
            ax.scatter(b, [r.rows[i]["ppl"] for i in ids], s=10, alpha=0.7, label=r.name, color=colors[r.name])
        ax.set_xscale("log")
        ax.set_yscale("log")
        lim = [min(ax.get_xlim()[0], ax.get_ylim()[0]), max(ax.get_xlim()[1], ax.get_ylim()[1])]
        ax.plot(lim, lim, "k--", lw=0.8)
        ax.set(xlim=lim, ylim=lim)
        log_axis(ax.xaxis)
        log_axis(ax.yaxis)
        ax.set_xlabel(f"{base.name} PPL")
        ax.set_ylabel("checkpoint PPL")
        ax.set_title("Paired per-trajectory PPL\n(below the diagonal: better than base)", fontsize=10)
        ax.legend(fontsize=8)
        written.append(save_plot(fig, out, "paired_vs_base.png"))

    curve = depth_curve({r.name: r for r in results}, ids)
    if curve:
        fig, ax = plt.subplots(figsize=(6, 4))
        for name, points in curve.items():
            ax.plot(
                [p["depth"] for p in points],
                [p["token_weighted_ppl"] for p in points],
                "o-",
                label=name,
                color=colors[name],
            )
        ax.set_xlabel("observation depth (turn)")
        ax.set_ylabel("token-weighted PPL")
        ax.set_title(f"Env-token PPL by depth ({depth_scope(results, ids)})")
        ax.legend(fontsize=8)
        written.append(save_plot(fig, out, "depth_curves.png"))
    return written


def write_comparison(
    paths: list[str],
    base: str,
    reference: str | None,
    out: str,
    grades: dict[str, dict[str, Any]] | None = None,
    sims: dict[str, dict[int, dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """Write `metrics.json`, `report.md` and the plots into `out` (created if needed), and return the
    table with the plot paths under `plots`. With agent `grades` ({checkpoint: agent-eval summary}),
    the table gains `agent` (the joint view) and report.md its tables; with simulator grades `sims`
    ({checkpoint: {tier: sim-eval summary}}), `sim` and its tables. Raises `ResultsError` as
    `read_results` and `compare` do."""
    results = [read_results(p) for p in paths]
    table = compare(results, base, reference)
    text = markdown(table)
    if grades:
        table["agent"] = joint_table(table["checkpoints"], grades)
        text += "\n" + joint_markdown(table["agent"])
    if sims:
        table["sim"] = sim_table(in_model_order(sims, [c["name"] for c in table["checkpoints"]]))
        text += "\n" + sim_markdown(table["sim"])
    os.makedirs(out, exist_ok=True)
    write_json(os.path.join(out, "metrics.json"), table, allow_nan=False)
    with atomic_output(os.path.join(out, "report.md")) as f:
        f.write(text.encode())
    table["plots"] = plots(results, table, out)
    if grades and (scatter := joint_plot(table["agent"], out)):
        table["plots"].append(scatter)
    if sims:
        table["plots"] += sim_plots(table["sim"], out)
    table["markdown"] = text
    return table


def grade_problem(summary: Any) -> str | None:
    """Why an agent-eval summary cannot enter the tables (not an object; a missing or non-finite
    pass@1 or its standard error; trial counts that are not whole numbers), or None."""
    if not isinstance(summary, dict):
        return "not an agent-eval summary (a JSON object)"
    for k in ("pass_at_1", "pass_at_1_stderr"):
        v = summary.get(k, "missing")
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)):
            return f"{k} is {v!r}, not a finite number"
    for k in ("solved_trials", "scored_trials"):
        if isinstance(summary.get(k), bool) or not isinstance(summary.get(k), int) or summary[k] < 0:
            return f"{k} is {summary.get(k)!r}, not a count"
    return None


def read_grades(pairs: list[str]) -> dict[str, dict[str, Any]]:
    """`NAME=PATH` pairs of agent-eval summaries, read; raises `InputError` on a bad pair or file."""
    grades = {}
    for name, path in named_files(pairs, "--agent", "an agent-eval summary.json"):
        grades[name] = read_json(path)
        if problem := grade_problem(grades[name]):
            raise InputError(f"{path}: {problem}")
    return grades


@dataclass(frozen=True)
class CompareConfig:
    """The probe table from scorer outputs, and the agent grades beside it."""

    results: list[str] = option(
        positional=True, path="input", check=readable_file, help="scorer outputs (one JSONL per checkpoint)"
    )
    base: str = option(help="model name of the base checkpoint")
    out: str = option(path="output-dir", help="output folder: report.md, metrics.json, plots")
    reference: str | None = option(None, help="model name to count degradations against")
    agent: list[str] = option(
        [], path="named-input", help="NAME=PATH of an agent-eval summary.json; repeat for each checkpoint"
    )
    sim: list[str] = option([], path="named-input", help="NAME=PATH of a sim-eval output (any tier); repeat for each")


def compare_main(cfg: CompareConfig) -> None:
    """Write the comparison and print its tables."""
    table = write_comparison(cfg.results, cfg.base, cfg.reference, cfg.out, read_grades(cfg.agent), read_sims(cfg.sim))
    print(for_terminal(table["markdown"]))
