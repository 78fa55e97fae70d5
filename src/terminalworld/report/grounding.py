"""The grounding report: env PPL per grounding mode and length bucket, fidelity per mode and family,
and the share of observation tokens the hybrid router serves exactly; and grounding measured for
what it is: per target class (a read target's output stands in its retrieved block: that is
emulation, not prediction), replayed against retrieved on the rows whose sessions edit the
repository before the target (elsewhere the two blocks are the same by construction), and which
rows each model trained on the repos of (unseen is per model).

Inputs are the scorer's and `sim-eval`'s rows files, one per mode, on the same rows (and the
scores files' summary rows, for the breakdown by family). PPL is token-weighted over the rows a
mode scored; in hybrid mode the rows the shadow served exactly are not scored (their output is the
real one) and are reported as a served share instead. `benchmarks/grounding.py` writes the page
from these tables.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Iterator
from typing import Any

from terminalworld.core.heldout import heldout_trajectory
from terminalworld.core.records import iter_lines
from terminalworld.core.routing import edits, family, route
from terminalworld.core.trajectories import Trajectory, extract_command
from terminalworld.eval.metrics import BUCKET_LABELS, token_bucket
from terminalworld.report.figures import save_plot
from terminalworld.report.tables import Table, fixed, table_markdown

MODES = ("none", "retrieved", "replayed", "hybrid")


def _rows(path: str) -> Iterator[dict[str, Any]]:
    """Each row of a rows file, compressed (as committed) or not (as the tools write it)."""
    return (json.loads(raw) for _, raw in iter_lines(path))


def read_rows(path: str) -> list[dict[str, Any]]:
    """The non-summary rows of a scores or sim-eval file (`.gz` or not)."""
    return [r for r in _rows(path) if not r.get("_summary")]


def read_summary(path: str) -> dict[str, Any] | None:
    """The summary row of a rows file (`.gz` or not), or None when the file is missing."""
    import os

    if not os.path.exists(path):
        return None
    return next((r for r in _rows(path) if r.get("_summary")), None)


def _ppl(rows: list[dict[str, Any]]) -> float | None:
    n = sum(r["n_target_tokens"] for r in rows)
    return math.exp(sum(r["sum_nll"] for r in rows) / n) if n else None


def ppl_by_bucket(rows_by_mode: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per mode and length bucket (and `all`): token-weighted PPL of the scored rows, their count,
    and (hybrid) the rows and target tokens the shadow served exactly. Skipped rows and empty
    targets are left out."""
    out: dict[str, dict[str, Any]] = {}
    for mode, rows in rows_by_mode.items():
        # An empty target (scored on its end-of-turn token alone) is skipped, as the scorer skips it.
        rows = [r for r in rows if "skipped" not in r and r.get("target_chars") != 0]
        per: dict[str, Any] = {}
        for label in [*BUCKET_LABELS, "all"]:
            inside = [r for r in rows if label == "all" or token_bucket(r["n_target_tokens"]) == label]
            scored = [r for r in inside if "ppl" in r]
            served = [r for r in inside if r.get("route") == "exact" and "ppl" not in r]
            tokens = sum(r["n_target_tokens"] for r in inside)
            per[label] = {
                "rows": len(inside),
                "scored": len(scored),
                "ppl": _ppl(scored),
                "served_rows": len(served),
                "served_token_share": sum(r["n_target_tokens"] for r in served) / tokens if tokens else None,
            }
        out[mode] = per
    return out


def ppl_table(table: dict[str, dict[str, Any]], *, label: str = "grounding") -> str:
    """The PPL-by-bucket table as Markdown, one line per key of `table` (a mode, or what `label` names)."""
    labels = [*BUCKET_LABELS, "all"]
    rows = []
    for mode, per in table.items():
        cells = []
        for b in labels:
            c = per[b]
            text = "–" if c["ppl"] is None else f"{c['ppl']:.2f} ({c['scored']})"
            if c["served_rows"]:
                text += f"; {c['served_rows']} served exactly"
            cells.append(text)
        rows.append([mode, *cells])
    return table_markdown(Table([label, *(f"{b} tokens" if b != "all" else "all" for b in labels)], rows))


def fidelity_by_family(rows_by_mode: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per mode and family: rows, exact-match rate and mean similarity of `sim-eval` rows."""
    out: dict[str, dict[str, Any]] = {}
    for mode, rows in rows_by_mode.items():
        out[mode] = {}
        for fam in sorted({r["family"] for r in rows}):
            inside = [r for r in rows if r["family"] == fam]
            out[mode][fam] = {
                "n": len(inside),
                "exact_match": sum(r["exact_match"] for r in inside) / len(inside),
                "similarity": sum(r["similarity"] for r in inside) / len(inside),
                "route": inside[0].get("route"),
            }
    return out


def _by_family_and_mode(table: dict[str, dict[str, Any]], cell) -> str:
    """A Markdown table, a row per family and a column per mode, each cell `cell(value or None)`."""
    modes = list(table)
    families = sorted({f for per in table.values() for f in per})
    return table_markdown(
        Table(["family", *modes], [[fam, *(cell(table[m].get(fam)) for m in modes)] for fam in families])
    )


def fidelity_table(table: dict[str, dict[str, Any]]) -> str:
    """Similarity (exact-match rate) per family and mode, as Markdown."""
    return _by_family_and_mode(table, lambda c: "–" if c is None else f"{c['similarity']:.2f} ({c['exact_match']:.0%})")


def route_share(trajectories: Iterable[Trajectory], count) -> dict[str, Any]:
    """The share of observation tokens (`count`: the tokenizer's) whose command the router sends to
    the shadow, over every observation of `trajectories`, with the split by router family."""
    tokens: dict[str, int] = {}
    exact = total = turns = 0
    for traj in trajectories:
        for t in traj.turns:
            if t.observation is None:
                continue
            command = extract_command(t.action) or ""
            n = count(t.observation)
            turns += 1
            total += n
            tokens[family(command)] = tokens.get(family(command), 0) + n
            exact += n if route(command) == "exact" else 0
    return {
        "observations": turns,
        "tokens": total,
        "exact_tokens": exact,
        "exact_token_share": exact / total if total else None,
        "by_family": dict(sorted(tokens.items())),
    }


def ppl_by_family(summaries: dict[str, dict[str, Any] | None]) -> dict[str, dict[str, Any]]:
    """Per mode and target family, from the scores files' summary rows: token-weighted PPL of the
    scored rows, their count, and (hybrid) the rows the shadow served exactly."""
    out: dict[str, dict[str, Any]] = {}
    for mode, s in summaries.items():
        if not s:
            continue
        served = s.get("served_by_family", {})
        out[mode] = {
            fam: {"n": c["n"] if c else 0, "ppl": c["ppl"] if c else None, "served": served.get(fam, 0)}
            for fam in sorted(set(s["by_family"]) | set(served))
            for c in [s["by_family"].get(fam)]
        }
    return out


def family_table(table: dict[str, dict[str, Any]]) -> str:
    """Token-weighted PPL (rows scored) per target family and mode, as Markdown."""

    def cell(c: dict[str, Any] | None) -> str:
        text = "–" if c is None or c["ppl"] is None else f"{c['ppl']:.2f} ({c['n']})"
        return text + (f"; {c['served']} served exactly" if c is not None and c["served"] else "")

    return _by_family_and_mode(table, cell)


def ppl_plot(tables: dict[str, dict[str, dict[str, Any]]], out: str, name: str, title: str) -> str:
    """One panel per row set: grouped bars of PPL per length bucket, one bar per mode (hybrid's over
    its generated rows). A cell with nothing scored draws no bar; where the shadow served it all,
    "served" is written at the panel's foot instead."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from terminalworld.report.figures import log_axis

    labels = list(BUCKET_LABELS)
    fig, axes = plt.subplots(1, len(tables), figsize=(4.2 * len(tables), 3.6), squeeze=False)
    for ax, (set_name, table) in zip(axes[0], tables.items(), strict=True):
        width = 0.8 / len(table)
        for k, (mode, per) in enumerate(table.items()):
            xs = [i + k * width for i in range(len(labels))]
            shown = [(x, per[b]["ppl"]) for x, b in zip(xs, labels, strict=True) if per[b]["ppl"] is not None]
            # The mode's colour is fixed by its place, so a mode with no bar in a panel keeps its colour.
            ax.bar([x for x, _ in shown], [v for _, v in shown], width, label=mode, color=f"C{k}")
            for x, b in zip(xs, labels, strict=True):
                if per[b]["served_rows"] and not per[b]["scored"]:
                    # Axes-fraction height: on a log axis a data height near zero is off the plot.
                    ax.text(
                        x,
                        0.03,
                        "served",
                        transform=ax.get_xaxis_transform(),
                        ha="center",
                        va="bottom",
                        fontsize=7,
                        rotation=90,
                        color=f"C{k}",
                    )
        ax.set_xticks([i + width * (len(table) - 1) / 2 for i in range(len(labels))], [f"{b} tokens" for b in labels])
        # Every mode's slot stays in view, drawn or not, so a "served" mark is never cut off.
        ax.set_xlim(-0.6 * width, len(labels) - 1 + (len(table) - 0.4) * width)
        ax.set_title(set_name, fontsize=9)
        values = [per[b]["ppl"] for per in table.values() for b in labels if per[b]["ppl"] is not None]
        if values:
            # PPL 1 (the real output, certain) is the floor: a bar's height is then its log PPL.
            ax.set_yscale("log")
            ax.set_ylim(1, max(values) * 1.2)
            log_axis(ax.yaxis)
    axes[0][0].set_ylabel("env PPL (token-weighted)")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    return save_plot(fig, out, name)


def ppl_by_class(rows_by_mode: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per mode and target class (`core.targets`), from the scores rows: token-weighted PPL of the
    scored rows and their count, the headline (read + predict) beside them, and (hybrid) the rows the
    shadow served, and (rows that record it) how many scored targets stand verbatim in their block.
    Rows without a class (scores made before it) are left out."""
    from terminalworld.core.targets import CLASSES, HEADLINE

    out: dict[str, dict[str, Any]] = {}
    for mode, rows in rows_by_mode.items():
        rows = [r for r in rows if "skipped" not in r and "target_class" in r]
        per: dict[str, Any] = {}
        for cls in (*CLASSES, "headline"):
            inside = [r for r in rows if r["target_class"] in (HEADLINE if cls == "headline" else (cls,))]
            scored = [r for r in inside if "ppl" in r]
            per[cls] = {"n": len(scored), "ppl": _ppl(scored), "served": len(inside) - len(scored)}
            if any("target_in_block" in r for r in scored):
                per[cls]["in_block"] = sum(bool(r.get("target_in_block")) for r in scored)
        out[mode] = per
    return out


CLASS_LABELS = {
    "headline": "headline: read + predict",
    "read": "read (served by emulation: the block holds the output)",
    "predict": "predict",
    "copy": "copy (already in context)",
    "sentinel": "sentinel (fixed output)",
}


def class_table(table: dict[str, dict[str, Any]]) -> str:
    """Token-weighted PPL (rows scored) per target class and mode, as Markdown: with grounding, a
    read target's output is in its retrieved block, so its PPL measures copying from the block
    (emulation), not prediction."""
    modes = list(table)
    rows = []
    for cls, label in CLASS_LABELS.items():
        cells = []
        for m in modes:
            c = table[m][cls]
            text = "–" if c["ppl"] is None else f"{c['ppl']:.2f} ({c['n']})"
            text += f"; {c['in_block']} verbatim in block" if c.get("in_block") else ""
            cells.append(text + (f"; {c['served']} served exactly" if c["served"] else ""))
        rows.append([label, *cells])
    return table_markdown(Table(["target class", *modes], rows))


# Replayed against retrieved: only a session that changes the repository before its target can
# make the two blocks differ, so they are compared on those rows alone.

PAIRED_MODES = ("none", "retrieved", "replayed")  # hybrid serves read and edit targets: another row set


def edits_before(traj: Trajectory, index: int) -> list[int]:
    """The 0-based turns before `index` whose command edits the repository (`core.routing.edits`)."""
    return [t for t, turn in enumerate(traj.turns[:index]) if edits(extract_command(turn.action) or "")]


def edited_rows(heldout: Iterable[dict[str, Any]]) -> dict[str, list[int]]:
    """The held-out rows whose session edits the repository before the target, by instance id, each
    with the context turns that edit: only there can `replayed` (the state after the session's
    commands) differ from `retrieved` (the state as the episode began)."""
    out: dict[str, list[int]] = {}
    for row in heldout:
        traj = heldout_trajectory(row)
        if turns := edits_before(traj, len(traj.turns) - 1):
            out[row["instance_id"]] = turns
    return out


def modes_on(
    rows_by_mode: dict[str, list[dict[str, Any]]], ids: Iterable[str], modes: tuple[str, ...] = PAIRED_MODES
) -> dict[str, Any]:
    """The grounding modes on the rows of `ids` that every one of `modes` scored (paired: the same
    rows and target tokens, only the block differs): per mode the tokens, token-weighted and median
    PPL; how many rows replayed scores below retrieved; on how many the two blocks differ in length
    (the edit touched what the target's command reads)."""
    wanted = set(ids)
    present = [m for m in modes if m in rows_by_mode]
    scored = {
        m: {r["instance_id"]: r for r in rows_by_mode[m] if r["instance_id"] in wanted and "ppl" in r} for m in present
    }
    common = sorted(set.intersection(*(set(s) for s in scored.values()))) if present else []
    out: dict[str, Any] = {"rows": len(wanted), "scored": len(common), "ids": common, "modes": {}}
    for m in present:
        mine = [scored[m][i] for i in common]
        out["modes"][m] = {
            "tokens": sum(r["n_target_tokens"] for r in mine),
            "ppl": _ppl(mine),
            "median_ppl": statistics.median(r["ppl"] for r in mine) if mine else None,
        }
    if {"retrieved", "replayed"} <= set(present):
        a, b = scored["retrieved"], scored["replayed"]
        out["replayed_below_retrieved"] = sum(b[i]["ppl"] < a[i]["ppl"] for i in common)
        out["blocks_differ"] = sum(b[i].get("grounding_tokens") != a[i].get("grounding_tokens") for i in common)
    return out


def edited_table(result: dict[str, Any]) -> str:
    """`modes_on`'s result as Markdown: a line per mode."""
    rows = [
        [m, str(result["scored"]), str(c["tokens"]), fixed(c["ppl"]), fixed(c["median_ppl"])]
        for m, c in result["modes"].items()
    ]
    return table_markdown(Table(["grounding", "rows", "target tokens", "token-weighted PPL", "median PPL"], rows))


def edited_sentence(result: dict[str, Any], total: int) -> str:
    """What `modes_on` found on the edited rows, in words: how many rows there are, of `total`."""
    n = result["rows"]
    head = f"{n} of the {total} rows' sessions edit the repository before the target"
    if not n:
        return head + ": retrieved and replayed read the same state on every row, so they cannot differ here."
    text = f"{head}; {result['scored']} of them are scored in every mode."
    if "replayed_below_retrieved" in result:
        text += (
            f" Replayed scores below retrieved on {result['replayed_below_retrieved']} of them, and its block "
            f"differs in length from retrieved's on {result['blocks_differ']}."
        )
    return text


# Unseen per model: a held-out row is unseen by a model only when the model never trained on its repo.


def training_repos(files: list[str] | str, skip: int = 0) -> set[str]:
    """The repos of records `skip`.. of a training subset (what a tokenize step with this `skip`
    reads: the pretraining text of a demo base skips the SFT rows)."""
    from terminalworld.core.formats import iter_trajectories
    from terminalworld.core.records import BadLine

    repos: set[str] = set()
    for k, item in enumerate(iter_trajectories(files)):
        if k >= skip and not isinstance(item, BadLine) and item[1].repo:
            repos.add(item[1].repo)
    return repos


def seen_rows(
    heldout: Iterable[dict[str, Any]], repos_by_model: dict[str, set[str]], ids: Iterable[str] | None = None
) -> dict[str, list[str]]:
    """Per model, the held-out rows (of `ids` when given, e.g. the scored ones) whose repo the model
    trained on (`repos_by_model`: every training subset it saw, its init's included): for that model
    those rows are not unseen."""
    wanted = None if ids is None else set(ids)
    rows = [r for r in heldout if wanted is None or r["instance_id"] in wanted]
    return {
        model: sorted(r["instance_id"] for r in rows if r.get("repo") in repos)
        for model, repos in repos_by_model.items()
    }


def unseen_table(seen: dict[str, list[str]], total: int) -> str:
    """Per model, the rows from repos it trained on and the rows unseen by it, of `total`."""
    rows = [[m, f"{len(ids)} of {total}", str(total - len(ids))] for m, ids in seen.items()]
    return table_markdown(Table(["model", "rows from repos it trained on", "unseen rows"], rows))
