"""`report.json`: every model's grades side by side, one entry per model: its world-model
statistics from the probe comparison (`report.probe`), its agent grade (pass@1 and stderr, solved
and scored trials, valid actions) and its tier-1 simulator grade (exact match, similarity,
degeneration), where given; with the comparison's notes on agents and simulators.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from terminalworld.core.records import read_json, write_json
from terminalworld.report.probe import write_comparison
from terminalworld.report.simgrade import read_summary

# The world-model statistics of a checkpoint that report.json keeps (`eval.metrics.ppl_stats`' names).
WORLD_MODEL_KEYS = (
    "median_ppl",
    "token_weighted_ppl",
    "mean_ppl",
    "n_ppl_gt_10",
    "beats_base",
    "median_ppl_ci95",
    "tokens",
)


@dataclass(frozen=True)
class ReportConfig:
    """The probe comparison's inputs: each model's scores file, the output folder, the base (and
    the reference degradations count against), each model's agent summary and simulator grades
    (tier → rows file)."""

    scores: dict[str, str]
    out: str
    base: str
    reference: str | None = None
    grades: dict[str, str] = field(default_factory=dict)
    sims: dict[str, dict[int, str]] = field(default_factory=dict)


def write_report(cfg: ReportConfig) -> dict[str, Any]:
    """The probe comparison (report.md, metrics.json, plots) of the scores files and `report.json`
    under `cfg.out`, with the agent summaries and the simulator grades; returns the comparison's
    table."""
    scores, out, base, reference, grades, sims = cfg.scores, cfg.out, cfg.base, cfg.reference, cfg.grades, cfg.sims
    summaries = {name: read_json(path) for name, path in grades.items()}
    sim = {name: {t: read_summary(p) for t, p in tiers.items()} for name, tiers in sims.items()}
    table = write_comparison(list(scores.values()), base, reference, out, summaries, sim)
    arms = [{"arm": c["name"], **{k: c.get(k) for k in WORLD_MODEL_KEYS}} for c in table["checkpoints"]]
    for arm in arms:
        if (g := summaries.get(arm["arm"])) is not None:
            arm |= {"pass_at_1": g["pass_at_1"], "pass_at_1_stderr": g["pass_at_1_stderr"]}
            arm |= {"solved_trials": g["solved_trials"], "scored_trials": g["scored_trials"]}
            arm |= {"valid_action_rate": g.get("valid_action_rate")}
        if (t1 := sim.get(arm["arm"], {}).get(1)) is not None:
            arm |= {"exact_match": t1["exact_match"], "similarity": t1["similarity"]}
            arm |= {"degenerate_rate": t1["degenerate_rate"]}
    doc = {"arms": arms, "n_trajectories": table["n_common"], "base": base}
    if "agent" in table:
        doc["agent"] = {"tasks": next(iter(summaries.values()))["tasks"], "note": table["agent"]["note"]}
        doc["agent"]["opposite_directions"] = table["agent"]["opposite_directions"]
    if "sim" in table:
        doc["sim"] = {"note": table["sim"]["note"], "tiers": {n: sorted(t) for n, t in sim.items()}}
    write_json(os.path.join(out, "report.json"), doc)
    return table
