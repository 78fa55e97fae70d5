"""The grounding report: env PPL per grounding mode and length bucket, fidelity per mode and family,
and the share of observation tokens the hybrid router serves exactly.

Inputs are the scorer's and `sim-eval`'s rows files, one per mode, on the same rows. PPL is
token-weighted over the rows a mode scored; in hybrid mode the rows the shadow served exactly are
not scored (their output is the real one) and are reported as a served share instead.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from terminalworld.core.trajectories import Trajectory, extract_command
from terminalworld.eval.scoring import TOKEN_BUCKETS, token_bucket
from terminalworld.grounding.routing import family, route
from terminalworld.report.figures import save_plot

MODES = ("none", "retrieved", "replayed", "hybrid")


def read_rows(path: str) -> list[dict[str, Any]]:
    """The non-summary rows of a scores or sim-eval file."""
    with open(path, encoding="utf-8") as f:
        return [r for r in map(json.loads, f) if not r.get("_summary")]


def read_summary(path: str) -> dict[str, Any] | None:
    """The summary row of a rows file, or None when the file is missing."""
    import os

    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return next((r for r in map(json.loads, f) if r.get("_summary")), None)


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
        for label in [b for _, b in TOKEN_BUCKETS] + ["all"]:
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


def ppl_table(table: dict[str, dict[str, Any]]) -> str:
    """The PPL-by-bucket table as Markdown."""
    labels = [b for _, b in TOKEN_BUCKETS] + ["all"]
    lines = ["| grounding | " + " | ".join(f"{b} tokens" if b != "all" else "all" for b in labels) + " |"]
    lines.append("|---|" + "---|" * len(labels))
    for mode, per in table.items():
        cells = []
        for b in labels:
            c = per[b]
            text = "–" if c["ppl"] is None else f"{c['ppl']:.2f} ({c['scored']})"
            if c["served_rows"]:
                text += f"; {c['served_rows']} served exactly"
            cells.append(text)
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


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


def fidelity_table(table: dict[str, dict[str, Any]]) -> str:
    """Similarity (exact-match rate) per family and mode, as Markdown."""
    modes = list(table)
    families = sorted({f for per in table.values() for f in per})
    lines = ["| family | " + " | ".join(modes) + " |", "|---|" + "---|" * len(modes)]
    for fam in families:
        cells = []
        for m in modes:
            c = table[m].get(fam)
            cells.append("–" if c is None else f"{c['similarity']:.2f} ({c['exact_match']:.0%})")
        lines.append(f"| {fam} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


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


def ppl_plot(table: dict[str, dict[str, Any]], out: str, name: str, title: str) -> str:
    """Grouped bars: PPL per length bucket, one bar per mode (hybrid's over its generated rows)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [b for _, b in TOKEN_BUCKETS]
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    width = 0.8 / len(table)
    for k, (mode, per) in enumerate(table.items()):
        values = [per[b]["ppl"] or 0.0 for b in labels]
        bars = ax.bar([i + k * width for i in range(len(labels))], values, width, label=mode)
        for bar, b in zip(bars, labels, strict=True):
            if per[b]["served_rows"] and not per[b]["scored"]:
                ax.annotate("served", (bar.get_x() + width / 2, 0.2), ha="center", fontsize=7, rotation=90)
    ax.set_xticks([i + width * (len(table) - 1) / 2 for i in range(len(labels))], [f"{b} tokens" for b in labels])
    ax.set_ylabel("env PPL (token-weighted)")
    ax.set_yscale("log")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    return save_plot(fig, out, name)
