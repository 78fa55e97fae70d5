"""Env-token PPL by context depth: every observation of a held-out row scored in the same forward
(`terminalworld score --all-depths`), so a row of 14 context turns gives one point at each depth
1..15 (depth k: the k-th observation, after k - 1 earlier command/observation pairs; 15 is the
probe's target)."""

from __future__ import annotations

from typing import Any

import numpy as np

from terminalworld.eval.metrics import Results


def depth_curve(results: dict[str, Results], ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Per checkpoint, per depth: the median and token-weighted PPL over the rows `ids` that have an
    observation at that depth, and how many rows and tokens that is. Empty for scores made without
    `--all-depths`."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name, r in results.items():
        by_depth: dict[int, list[dict[str, Any]]] = {}
        for i in ids:
            for d in r.rows[i].get("depths") or []:
                by_depth.setdefault(int(d["depth"]), []).append(d)
        points = []
        for depth in sorted(by_depth):
            ds = [d for d in by_depth[depth] if d.get("n_target_tokens")]
            if not ds:
                continue
            s = sum(d["sum_nll"] for d in ds)
            n = sum(d["n_target_tokens"] for d in ds)
            points.append(
                {
                    "depth": depth,
                    "rows": len(ds),
                    "tokens": n,
                    "median_ppl": float(np.median([d["ppl"] for d in ds])),
                    "token_weighted_ppl": float(np.exp(s / n)),
                }
            )
        if points:
            out[name] = points
    return out
