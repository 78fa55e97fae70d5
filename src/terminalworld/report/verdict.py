"""Paired tests over two seeds and the rule that turns them into a verdict, fixed before any data.

A comparison of x against y is paired per unit (a held-out row for the probe, a task for the agent
grade) within each seed, then pooled by pairing unit x seed: the pooled test treats the two seeds'
pairs of a unit as two pairs, so the seeds' agreement in sign is required beside it (`verdict`).

- Probe: the paired Wilcoxon signed-rank test (two-sided, zero differences dropped, exact below 50
  non-zero pairs, else the normal approximation; `scipy.stats.wilcoxon`) on per-row differences of
  log PPL (= mean NLL per target token); the effect is the mean of those differences, so exp(effect)
  is the geometric mean ratio of x's PPL to y's.
- Agent: `agent.compare.paired` on per-task solve rates (the exact sign-flip permutation test); the
  pooled counts key each task by its seed (and level), so the same function pools.

**The rule** (`verdict`): a part *holds* when the pooled test has p < `ALPHA` in the stated direction
and every seed's effect has that sign; it *does not hold* when the pooled test has p < `ALPHA` in the
opposite direction and every seed agrees with that; otherwise it *cannot be told* at this size
(including seeds of opposite signs and a test with no non-zero pair). A finding of several parts
holds when every part holds, does not hold when any part does not, and otherwise cannot be told.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

ALPHA = 0.05
HOLDS, FAILS, UNTOLD = "holds", "does not hold", "cannot be told at this size"


def wilcoxon(d: np.ndarray) -> dict[str, Any]:
    """The paired Wilcoxon signed-rank test of differences `d` (x - y): pairs, x lower, y lower,
    the mean difference and the two-sided p (1.0 with no non-zero difference)."""
    from scipy.stats import wilcoxon as _wilcoxon

    d = np.asarray(d, dtype=np.float64)
    nz = d[d != 0]
    p = float(_wilcoxon(nz, zero_method="wilcox", alternative="two-sided").pvalue) if len(nz) else 1.0
    return {
        "pairs": len(d),
        "x_lower": int((d < 0).sum()),
        "y_lower": int((d > 0).sum()),
        "effect": float(d.mean()) if len(d) else None,
        "p": 1.0 if math.isnan(p) else p,
    }


def paired_over_seeds(diffs: dict[str, np.ndarray]) -> dict[str, Any]:
    """Per seed and pooled (unit x seed) Wilcoxon tests of the per-unit differences `diffs` (seed →
    x - y per unit)."""
    per_seed = {s: wilcoxon(d) for s, d in diffs.items()}
    pooled = wilcoxon(np.concatenate(list(diffs.values()))) if diffs else wilcoxon(np.array([]))
    return {"per_seed": per_seed, "pooled": pooled}


def _sign(x: float | None) -> int:
    return 0 if not x else (1 if x > 0 else -1)


def verdict(p: float, effect: float | None, seed_effects: list[float | None], expected: int) -> str:
    """The rule of the module's docstring: `expected` is the sign the claim predicts for the effect
    (-1: x lower than y; +1: x higher)."""
    direction = _sign(effect)
    agree = direction != 0 and all(_sign(e) == direction for e in seed_effects)
    if p < ALPHA and agree:
        return HOLDS if direction == expected else FAILS
    return UNTOLD


def combine(parts: list[str]) -> str:
    """A finding's verdict from its parts' (every part holds; any fails; otherwise untold)."""
    if parts and all(v == HOLDS for v in parts):
        return HOLDS
    return FAILS if FAILS in parts else UNTOLD
