"""Env-token PPL by context depth: every observation of a held-out row scored in the same forward
(`terminalworld score --all-depths`), so a row of 14 context turns gives one point at each depth
1..15 (depth k: the k-th observation, after k - 1 earlier command/observation pairs; 15 is the
probe's target).

Each depth's observation has its target class (`core.targets`). The curve pools only the headline's
classes (read + predict): an empty observation is scored on its end-of-turn token alone, and copies
and sentinels measure no prediction, so mixing them in moves a depth's point with the share of
such observations there rather than with the model. `depth_composition` counts the classes per depth.
Scores made before classes existed carry none; their curve pools every non-empty observation and
says so (`depth_scope`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from terminalworld.core.targets import HEADLINE
from terminalworld.eval.metrics import Results
from terminalworld.report.tables import Block, Heading, Table, fixed


def _kept(d: dict[str, Any], classes: tuple[str, ...]) -> bool:
    cls = d.get("target_class")
    return bool(d.get("n_target_tokens")) and (cls is None or cls in classes)


def depth_curve(
    results: dict[str, Results], ids: list[str], classes: tuple[str, ...] = HEADLINE
) -> dict[str, list[dict[str, Any]]]:
    """Per checkpoint, per depth: the median and token-weighted PPL over the observations of the rows
    `ids` at that depth whose class is one of `classes` (an unclassed one counts), and how many rows
    and tokens that is. Empty for scores made without `--all-depths`."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name, r in results.items():
        by_depth: dict[int, list[dict[str, Any]]] = {}
        for i in ids:
            for d in r.rows[i].get("depths") or []:
                by_depth.setdefault(int(d["depth"]), []).append(d)
        points = []
        for depth in sorted(by_depth):
            ds = [d for d in by_depth[depth] if _kept(d, classes)]
            if not ds:
                continue
            s = sum(d["sum_nll"] for d in ds)
            n = sum(d["n_target_tokens"] for d in ds)
            points.append(
                {
                    "depth": depth,
                    "rows": len(ds),
                    "tokens": n,
                    "median_ppl": float(
                        np.median([d.get("ppl") or np.exp(d["sum_nll"] / d["n_target_tokens"]) for d in ds])
                    ),
                    "token_weighted_ppl": float(np.exp(s / n)),
                }
            )
        if points:
            out[name] = points
    return out


def depth_composition(results: dict[str, Results], ids: list[str]) -> dict[int, dict[str, int]]:
    """Per depth, how many of the rows' observations there are of each class (from the first
    checkpoint's rows: every checkpoint scores the same rows); empty without `--all-depths` or classes."""
    first = next(iter(results.values()), None)
    out: dict[int, dict[str, int]] = {}
    for i in ids if first else []:
        for d in first.rows[i].get("depths") or []:
            if "target_class" in d:
                at = out.setdefault(int(d["depth"]), {})
                at[d["target_class"]] = at.get(d["target_class"], 0) + 1
    return dict(sorted(out.items()))


def depth_scope(results: list[Results] | dict[str, Results], ids: list[str]) -> str:
    """What the depth curve pools, in words."""
    rs = results.values() if isinstance(results, dict) else results
    classed = all("target_class" in d for r in rs for i in ids for d in r.rows[i].get("depths") or [])
    return "read + predict observations" if classed else "every observation; scores without target classes"


def depth_blocks(
    curve: dict[str, list[dict[str, Any]]], scope: str | None, composition: dict[Any, dict[str, int]] | None
) -> list[Block]:
    """The depth curve as a table: per model, each depth's median PPL (rows scored there), then, when
    the scores carry classes, how many observations of each class every depth holds."""
    depths = sorted({p["depth"] for points in curve.values() for p in points})
    scope = scope or "every observation; scores without target classes"
    rows = []
    for name, points in curve.items():
        at = {p["depth"]: p for p in points}
        rows.append([name, *(f"{fixed(at[d]['median_ppl'], 1)} ({at[d]['rows']})" if d in at else "—" for d in depths)])
    by_depth = {str(d): counts for d, counts in (composition or {}).items()}  # JSON keys are strings
    for cls in ("read", "predict", "copy", "sentinel", "empty") if by_depth else ():
        rows.append([f"*{cls} observations*", *(str(by_depth.get(str(d), {}).get(cls, 0)) for d in depths)])
    return [
        Heading("Env PPL by context depth"),
        f"Median PPL of the k-th observation of a row (rows scored at that depth), over {scope}.",
        Table(["model", *(str(d) for d in depths)], rows, "l" + "r" * len(depths)),
    ]
