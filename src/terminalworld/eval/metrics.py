"""The write-up's probe table, computed from scorer outputs (one JSONL per checkpoint).

For each checkpoint: token-weighted PPL, median and mean per-trajectory PPL, trajectories with
PPL > 10, the worst trajectory; against the base: "beats base on N of M"; against a reference:
"degrades on N of M"; length buckets (≤ 20, 21–200, > 200 target tokens: median PPL and share of
tokens); the share of the aggregate change vs base carried by the top-5 trajectories; and
bootstrap 95 % intervals (paired resampling of trajectories) for the median and token-weighted PPL.
Only trajectories scored by every checkpoint are compared, so only the weights differ.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from terminalworld.errors import InputError, ResultsError

# Length buckets of a target in tokens, (label, lowest, highest): the one definition the scorer's
# summary, the probe table, the grounding page and the site share; > 200 is the write-up's ceiling.
BUCKETS = (("<=20", 0, 20), ("21-200", 21, 200), (">200", 201, math.inf))
BUCKET_LABELS = tuple(label for label, *_ in BUCKETS)


def token_bucket(n: int) -> str:
    """The length bucket of a target of `n` tokens."""
    return next(label for label, lo, hi in BUCKETS if lo <= n <= hi)


@dataclass
class Results:
    """One checkpoint's scores file: its model name, its path, the scored rows by instance id
    (skipped rows apart), and the summary row."""

    name: str
    path: str
    rows: dict[str, dict[str, Any]]  # instance_id -> scored row
    summary: dict[str, Any]
    skipped: dict[str, dict[str, Any]] = field(default_factory=dict)  # instance_id -> skipped row


def read_results(path: str) -> Results:
    """Read a scores file of `terminalworld score` (local or remote), named by the summary's
    `model_name`, else the path. Raises `ResultsError` naming the file (and line) when it cannot be
    read, on a line that is not JSON or holds NaN or infinity (never valid JSON), or when there is
    no summary row (an unfinished run)."""
    from terminalworld.core.records import iter_lines

    rows, skipped, summary = {}, {}, None
    try:
        for n, raw in iter_lines(path):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ResultsError(f"{path}:{n}: not a scores file (undecodable bytes at byte {e.start})") from None
            if not line.strip():
                continue
            try:
                row = json.loads(line, parse_constant=_refuse_constant)
            except json.JSONDecodeError as e:
                raise ResultsError(f"{path}:{n}: invalid JSON ({e.msg})") from None
            except (ValueError, RecursionError) as e:
                raise ResultsError(f"{path}:{n}: {e}") from None
            if not isinstance(row, dict) or (not row.get("_summary") and "instance_id" not in row):
                raise ResultsError(f"{path}:{n}: not a scorer row (no instance_id)")
            if row.get("_summary"):
                summary = row
            else:
                (skipped if "skipped" in row else rows)[row["instance_id"]] = row
    except InputError as e:
        raise ResultsError(str(e)) from None
    if summary is None:
        raise ResultsError(f"{path}: no summary row; the scoring run did not finish (rerun it to resume)")
    return Results(summary.get("model_name") or path, path, rows, summary, skipped)


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number a score can have")


def _score_problem(row: dict[str, Any]) -> str | None:
    """Why a scored row cannot enter the table (a missing, non-numeric or non-finite `ppl`,
    `sum_nll` or `n_target_tokens`), or None."""
    for k in ("ppl", "sum_nll", "n_target_tokens"):
        v = row.get(k)
        if isinstance(v, bool) or not isinstance(v, int | float):
            return f"{k} is {v!r}, not a number"
        if not math.isfinite(v):
            return f"{k} is {v}, not a finite number"
    if row["n_target_tokens"] <= 0 or row["ppl"] <= 0:
        return "a scored row has at least one target token and a positive ppl"
    return None


def token_weighted_ppl(sum_nll: np.ndarray, n: np.ndarray) -> float:
    """exp(total NLL / total tokens) from per-trajectory summed NLLs (nats) and token counts."""
    return float(math.exp(sum_nll.sum() / n.sum()))


def bootstrap_ci(values: dict[str, np.ndarray], stat, n_boot: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95 % percentile interval of `stat(**resampled)` over trajectories resampled with replacement."""
    rng = np.random.default_rng(seed)
    m = len(next(iter(values.values())))
    idx = rng.integers(0, m, size=(n_boot, m))
    stats = np.array([stat(**{k: v[i] for k, v in values.items()}) for i in idx])
    lo, hi = np.percentile(stats, [2.5, 97.5])
    return float(lo), float(hi)


def ppl_stats(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The per-checkpoint statistics of scored rows (each with `ppl`, `sum_nll`,
    `n_target_tokens`): total tokens and summed NLL, token-weighted PPL, median and mean
    per-trajectory PPL, how many exceed PPL 10, and the worst row (the first of equal maxima).
    Every value is None (0 for counts) when there are no rows."""
    if not rows:
        return {
            "tokens": 0,
            "sum_nll": 0.0,
            "token_weighted_ppl": None,
            "median_ppl": None,
            "mean_ppl": None,
            "n_ppl_gt_10": 0,
            "worst": None,
        }
    ppl = np.array([r["ppl"] for r in rows], dtype=np.float64)
    s = np.array([r["sum_nll"] for r in rows], dtype=np.float64)
    n = np.array([r["n_target_tokens"] for r in rows], dtype=np.float64)
    worst = rows[int(np.argmax(ppl))]
    return {
        "tokens": int(n.sum()),
        "sum_nll": float(s.sum()),
        "token_weighted_ppl": token_weighted_ppl(s, n),
        "median_ppl": float(np.median(ppl)),
        "mean_ppl": float(ppl.mean()),
        "n_ppl_gt_10": int((ppl > 10).sum()),
        "worst": {k: worst.get(k) for k in ("instance_id", "repo", "ppl", "n_target_tokens")},
    }


def checkpoint_metrics(r: Results, ids: list[str], base: Results | None, reference: Results | None) -> dict[str, Any]:
    """One checkpoint's row of the probe table over the common trajectories `ids`."""
    rows = [{"instance_id": i, **r.rows[i]} for i in ids]
    ppl = np.array([row["ppl"] for row in rows])
    s = np.array([row["sum_nll"] for row in rows])
    n = np.array([row["n_target_tokens"] for row in rows], dtype=np.float64)
    stats = ppl_stats(rows)
    out: dict[str, Any] = {
        "name": r.name,
        "n": len(ids),
        **{k: stats[k] for k in ("tokens", "token_weighted_ppl", "median_ppl", "mean_ppl", "n_ppl_gt_10", "worst")},
        "median_ppl_ci95": bootstrap_ci({"ppl": ppl}, lambda ppl: np.median(ppl)),
        "token_weighted_ppl_ci95": bootstrap_ci({"s": s, "n": n}, lambda s, n: math.exp(s.sum() / n.sum())),
        "buckets": {},
    }
    for label, lo, hi in BUCKETS:
        sel = (n >= lo) & (n <= hi)
        out["buckets"][label] = {
            "n": int(sel.sum()),
            "median_ppl": float(np.median(ppl[sel])) if sel.any() else None,
            "token_share": float(n[sel].sum() / n.sum()),
        }
    if base is not None and base is not r:
        b_ppl = np.array([base.rows[i]["ppl"] for i in ids])
        b_s = np.array([base.rows[i]["sum_nll"] for i in ids])
        out["beats_base"] = int((ppl < b_ppl).sum())
        change = s - b_s  # per-trajectory change in summed NLL: what moves the token-weighted PPL
        total = change.sum()
        top5 = np.sort(np.abs(change))[::-1][:5].sum()
        out["top5_share_of_change_vs_base"] = float(top5 / np.abs(change).sum()) if np.abs(change).sum() else 0.0
        out["aggregate_nll_change_vs_base"] = float(total)
    if reference is not None and reference is not r:
        ref_ppl = np.array([reference.rows[i]["ppl"] for i in ids])
        out["degrades_vs_reference"] = int((ppl > ref_ppl).sum())
    out |= class_metrics(r, ids, base)
    return out


def class_metrics(r: Results, ids: list[str], base: Results | None = None) -> dict[str, Any]:
    """Per target class (`core.targets`) of the rows `ids`: count, tokens, token-weighted and median
    PPL (`by_class`), the same over the headline's classes, read + predict (`headline`), with how
    many headline rows beat the base. Empty when the rows carry no class (scores made before it)."""
    from terminalworld.core.targets import CLASSES, HEADLINE

    if not ids or any("target_class" not in r.rows[i] for i in ids):
        return {}

    def stats(sel: list[str]) -> dict[str, Any]:
        st = ppl_stats([r.rows[i] for i in sel])
        return {
            "n": len(sel),
            "tokens": st["tokens"],
            "token_weighted_ppl": st["token_weighted_ppl"],
            "median_ppl": st["median_ppl"],
        }

    by_class = {c: stats([i for i in ids if r.rows[i]["target_class"] == c]) for c in CLASSES}
    head = [i for i in ids if r.rows[i]["target_class"] in HEADLINE]
    out = {"by_class": by_class, "headline": stats(head)}
    if base is not None and base is not r:
        out["headline"]["beats_base"] = sum(r.rows[i]["ppl"] < base.rows[i]["ppl"] for i in head)
    return out


def compare(results: list[Results], base: str, reference: str | None = None) -> dict[str, Any]:
    """The probe table `{base, reference, n_common, checkpoints}`: one `checkpoint_metrics` row per
    result, in input order, over the trajectories every result scored (sorted ids). Raises
    `ResultsError` on duplicate model names, an unknown base or reference, no common trajectory, or
    a common row whose `ppl`, `sum_nll` or `n_target_tokens` is not a finite positive number."""
    by_name = {r.name: r for r in results}
    if len(by_name) != len(results):
        raise ResultsError("two result files carry the same model name; pass distinct --model-name when scoring")
    if base not in by_name:
        raise ResultsError(f"--base {base!r} is not one of {sorted(by_name)}")
    if reference is not None and reference not in by_name:
        raise ResultsError(f"--reference {reference!r} is not one of {sorted(by_name)}")
    common = sorted(set.intersection(*(set(r.rows) for r in results)))
    if not common:
        raise ResultsError("no trajectory was scored by every checkpoint")
    for r in results:
        for i in common:
            if problem := _score_problem(r.rows[i]):
                raise ResultsError(f"{r.path}: row {i}: {problem}")
    b, ref = by_name[base], by_name.get(reference) if reference else None
    return {
        "base": base,
        "reference": reference,
        "n_common": len(common),
        "checkpoints": [checkpoint_metrics(r, common, b, ref) for r in results],
    }
