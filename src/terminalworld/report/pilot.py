"""The pilot's report: the probe comparison (`report.probe`) with the agent and simulator grades
beside it, and `pilot.json`: the scale axis and its sign tests, the findings checked
(`report.scale`), the steps of a fix per checkpoint, the env PPL by context depth
(`report.depth`) and the departures from the write-up, which `report.md` also lists in plain words.
"""

from __future__ import annotations

import os

from terminalworld.core.records import atomic_output, read_json, write_json
from terminalworld.eval.metrics import read_results
from terminalworld.report.depth import depth_composition, depth_curve, depth_scope
from terminalworld.report.probe import write_comparison
from terminalworld.report.scale import findings, process_table, scale_markdown, scale_table
from terminalworld.report.simgrade import read_summary

PILOT_FILE = "pilot.json"


def write_pilot_report(
    *,
    scores: dict[str, str],
    out: str,
    base: str,
    arms: list[str],
    scales: list[str],
    grades: dict[str, str],
    sims: dict[str, dict[int, str]],
    departures: list[str],
) -> str:
    """The comparison of the scores files `scores` (model → file) against `base` under `out`, with
    the agent summaries `grades` and the simulator grades `sims` (model → tier → rows file), then
    `report.md` and `pilot.json` over the checkpoints `{arm}-{scale}`; returns the scale axis's
    markdown."""
    summaries = {name: read_json(path) for name, path in grades.items()}
    sim = {name: {t: read_summary(p) for t, p in tiers.items()} for name, tiers in sims.items()}
    table = write_comparison(list(scores.values()), base, None, out, summaries, sim)
    results = {name: read_results(p) for name, p in scores.items()}
    axis = scale_table(table, results, arms=arms, scales=scales)
    found = findings(axis)
    process = process_table(summaries, [c["name"] for c in table["checkpoints"]])
    common = sorted(set.intersection(*(set(r.rows) for r in results.values())))
    depth = depth_curve(results, common)
    text = scale_markdown(axis, found, process)
    text += "\n## Departures from the write-up\n\n" + "".join(f"- {d}\n" for d in departures)
    with atomic_output(os.path.join(out, "report.md")) as f:
        f.write((table["markdown"] + "\n" + text).encode())
    doc = {
        "base": base,
        "n_trajectories": table["n_common"],
        "skipped": {name: len(r.skipped) for name, r in results.items()},
        "scale_axis": axis,
        "findings": found,
        "process": process,
        "depth_curve": depth,
        "depth_scope": depth_scope(results, common),
        "depth_composition": depth_composition(results, common),
        "departures": departures,
    }
    write_json(os.path.join(out, PILOT_FILE), doc)
    return text
