"""The report stage as a Marin step: the world-model probe's comparison of scored models."""

from __future__ import annotations

import os

from terminalworld.pipeline import artifacts
from terminalworld.pipeline.step import Report, Scores, inside, joined, step


def report_fn(*, scores: dict[str, str | list], out: str, base: str, reference: str | None) -> None:
    """The probe comparison (report.md, metrics.json, plots) and `report.json`, one entry per model."""
    from terminalworld.core.records import write_json
    from terminalworld.report.probe import markdown, write_comparison

    table = write_comparison([joined(p) for p in scores.values()], base, reference, out)
    keys = ("median_ppl", "token_weighted_ppl", "mean_ppl", "n_ppl_gt_10", "beats_base", "median_ppl_ci95", "tokens")
    arms = [{"arm": c["name"], **{k: c.get(k) for k in keys}} for c in table["checkpoints"]]
    write_json(os.path.join(out, "report.json"), {"arms": arms, "n_trajectories": table["n_common"], "base": base})
    print(markdown(table))


def report(*, scores: list[Scores], base: str, reference: str | None, version: str) -> Report:
    """Compare every scored model against `base` (and count degradations against `reference`)."""
    from marin.execution.lazy import OUT

    return Report(
        step(
            artifacts.REPORT,
            report_fn,
            version=version,
            scores={s.model_name: inside(s, s.file) for s in scores},
            out=OUT,
            base=base,
            reference=reference,
        )
    )
