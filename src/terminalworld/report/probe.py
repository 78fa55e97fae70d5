"""`terminalworld compare`: the probe table as data (`metrics.json`), its one rendering
(`probe_blocks`, for `report.md` and the site) and its plots."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from terminalworld.core.paths import check_outputs, named_files, readable_file
from terminalworld.core.records import atomic_output, read_json, write_json
from terminalworld.core.targets import CLASSES
from terminalworld.core.terminal import for_terminal
from terminalworld.errors import InputError
from terminalworld.eval.metrics import BUCKET_LABELS, Results, compare, read_results
from terminalworld.options import option
from terminalworld.report.depth import depth_curve, depth_scope
from terminalworld.report.figures import log_axis, model_colors, save_plot
from terminalworld.report.joint import joint_blocks, joint_plot, joint_table
from terminalworld.report.simgrade import in_model_order, read_sims, sim_blocks, sim_plots, sim_table
from terminalworld.report.tables import Block, Heading, Table, fixed, of, pct, section, to_markdown


def probe_blocks(table: dict[str, Any]) -> list[Block]:
    """A `metrics.compare` table (`metrics.json`) as the report shows it, in `report.md` and on the
    site alike: the PPL table, the per-trajectory table, the target classes, the length buckets,
    then the agent grade (`joint`) and the simulator grade (`simgrade`) when the table has them."""
    n, cps = table["n_common"], table["checkpoints"]
    ref = f", reference `{table['reference']}`" if table.get("reference") else ""
    blocks: list[Block] = [
        f"Env-token perplexity on the **{n}** held-out trajectories every model scored; base `{table['base']}`{ref}.\n"
        "Lower is better; brackets hold 95% bootstrap intervals over trajectories.",
        Table(
            ["model", "median PPL", "token-weighted PPL", "mean PPL"],
            [[c["name"], *(_ci(c[k], c.get(f"{k}_ci95")) for k in PPL_KEYS), fixed(c["mean_ppl"], 1)] for c in cps],
            "lrrr",
        ),
        "Per trajectory: the tail, the pairs against the base and the reference, and the worst case.",
    ]
    rows = []
    for c in cps:
        worst = f"{fixed(c['worst']['ppl'], 1)} ({c['worst']['repo']})" if c.get("worst") else "—"
        rows.append(
            [c["name"], *(of(c.get(k), n) for k in COUNT_KEYS), worst, pct(c.get("top5_share_of_change_vs_base"))]
        )
    columns = ["model", "PPL > 10", "beats base", "worse than reference", "worst PPL (repo)", "top-5 share of change"]
    blocks.append(Table(columns, rows, "lrrrrr"))
    if cps and cps[0].get("by_class"):
        blocks += class_blocks(cps)
    if labels := [b for b in BUCKET_LABELS if any(b in c.get("buckets", {}) for c in cps)]:
        blocks.append("By target length in tokens: median PPL · the bucket's share of scored tokens · trajectories.")
        blocks.append(
            Table(["model", *labels], [[c["name"], *(_bucket(c["buckets"].get(b)) for b in labels)] for c in cps])
        )
    if agent := table.get("agent"):
        blocks += joint_blocks(agent)
    if sim := table.get("sim"):
        blocks += sim_blocks({**sim, "checkpoints": in_model_order(sim["checkpoints"], [c["name"] for c in cps])})
    return blocks


PPL_KEYS = ("median_ppl", "token_weighted_ppl")  # shown with their 95% intervals
COUNT_KEYS = ("n_ppl_gt_10", "beats_base", "degrades_vs_reference")  # per-trajectory counts, "k of n"


def _ci(x: float | None, ci: list[float] | None) -> str:
    return fixed(x, 1) + (f" [{fixed(ci[0], 1)}, {fixed(ci[1], 1)}]" if ci else "")


def _bucket(b: dict[str, Any] | None) -> str:
    return f"{fixed(b['median_ppl'], 1)} · {b['token_share']:.0%} · n={b['n']}" if b else "—"


def _by_class(x: dict[str, Any]) -> str:
    return f"{fixed(x['token_weighted_ppl'], 1)} / {fixed(x['median_ppl'], 1)} · n={x['n']}" if x["n"] else "— · n=0"


def class_blocks(cps: list[dict[str, Any]]) -> list[Block]:
    """The probe by target class (`core.targets`): the headline on read + predict, then each class."""
    rows = []
    for c in cps:
        head = c["headline"]
        rows.append(
            [
                c["name"],
                _by_class(head),
                of(head.get("beats_base"), head["n"]),
                *(_by_class(c["by_class"][k]) for k in CLASSES),
            ]
        )
    return [
        Heading("By target class"),
        "Token-weighted PPL / median PPL · rows. The headline pools **read** (repository content not yet in "
        "context: what grounding serves) and **predict** (errors, execution output, everything else); "
        "**copy** targets are already in the context and **sentinel** targets are fixed harness output, "
        "so neither measures prediction.",
        Table(["model", "headline: read + predict", "beats base", *CLASSES], rows, "lrr" + "r" * len(CLASSES)),
    ]


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
    if grades:
        table["agent"] = joint_table(table["checkpoints"], grades)
    if sims:
        table["sim"] = sim_table(in_model_order(sims, [c["name"] for c in table["checkpoints"]]))
    text = to_markdown(
        section(f"World-model probe: env-token PPL on {table['n_common']} held-out trajectories", probe_blocks(table))
    )
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

    results: list[str] = option(positional=True, help="scorer outputs (one JSONL per checkpoint)")
    base: str = option(help="model name of the base checkpoint")
    out: str = option(help="output folder: report.md, metrics.json, plots")
    reference: str | None = option(None, help="model name to count degradations against")
    agent: list[str] = option([], help="NAME=PATH of an agent-eval summary.json; repeat for each checkpoint")
    sim: list[str] = option([], help="NAME=PATH of a sim-eval output (any tier); repeat for each")

    def check_paths(self) -> None:
        """Refuse, before any work, an unreadable result or an output that touches an input."""
        for path in self.results:
            readable_file("results", path)
        named = [
            (flag, pair.partition("=")[2])
            for flag, pairs in (("--agent", self.agent), ("--sim", self.sim))
            for pair in pairs
        ]
        check_outputs([("--out", self.out, "dir", ())], [*[("results", p) for p in self.results], *named])


def compare_main(cfg: CompareConfig) -> None:
    """Write the comparison and print its tables."""
    table = write_comparison(cfg.results, cfg.base, cfg.reference, cfg.out, read_grades(cfg.agent), read_sims(cfg.sim))
    print(for_terminal(table["markdown"]))
