"""The pilot's report: the probe comparison (`report.probe`) with the agent and simulator grades
beside it, and `pilot.json`: the scale axis and its sign tests, the findings checked
(`report.scale`), the steps of a fix per checkpoint, the env PPL by context depth
(`report.depth`) and the departures from the write-up, which `report.md` also lists in plain words.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field
from typing import Any

from terminalworld.core.records import atomic_output, read_json, write_json
from terminalworld.eval.metrics import read_results
from terminalworld.pipeline.artifacts import PILOT_REPORT
from terminalworld.pipeline.cost import hours
from terminalworld.pipeline.walltime import run_of, run_walltimes, stage_walltimes
from terminalworld.report.depth import depth_blocks, depth_composition, depth_curve, depth_scope
from terminalworld.report.ladder import ladder_blocks, ladder_table
from terminalworld.report.probe import write_comparison
from terminalworld.report.scale import findings, process_table, scale_blocks, scale_table
from terminalworld.report.simgrade import read_summary
from terminalworld.report.tables import Block, Heading, Table, to_markdown

PILOT_FILE = "pilot.json"


@dataclass(frozen=True)
class PilotReportConfig:
    """The pilot's report inputs: each model's scores file, the output folder, the base, the arms
    and scales of the checkpoints `{arm}-{scale}`, the agent summaries, the simulator grades
    (model → tier → rows file), the departures from the write-up, the agent summaries on the other
    levels of the task ladder (`ladder`: level → model → summary file), and each arm's tokenized
    folder (`training`) with the packed sequences each scale trained (`scale_sequences`), from which
    the report tells what each scale trained on (`train.coverage`)."""

    scores: dict[str, str]
    out: str
    base: str
    arms: list[str]
    scales: list[str]
    grades: dict[str, str]
    sims: dict[str, dict[int, str]]
    departures: list[str]
    ladder: dict[str, dict[str, str]] = field(default_factory=dict)
    training: dict[str, str] = field(default_factory=dict)
    scale_sequences: dict[str, int] = field(default_factory=dict)
    # Over seeds (`report.seeds`): the seed names of checkpoints `{arm}-{scale}-{seed}`, the scales'
    # own names, the base control's model name, and the level of `grades` on the task ladder.
    seeds: list[str] = field(default_factory=list)
    scale_names: list[str] = field(default_factory=list)
    control: str | None = None
    grades_level: str = "function"
    # The run's wall time per step and stage, read from its steps' timed attempts (`pipeline.walltime`).
    walltimes: bool = False


def write_pilot_report(cfg: PilotReportConfig) -> str:
    """The comparison of the scores files against the base under `cfg.out`, with the agent and
    simulator grades, then `report.md` and `pilot.json` over the checkpoints `{arm}-{scale}`, with
    the agent grades on the other levels of the task ladder and each arm's training coverage;
    returns the scale axis's markdown."""
    from terminalworld.train.coverage import arm_coverage

    scores, out, base, grades, sims = cfg.scores, cfg.out, cfg.base, cfg.grades, cfg.sims
    arms, scales, departures, ladder = cfg.arms, cfg.scales, cfg.departures, cfg.ladder
    training = {arm: arm_coverage(path, cfg.scale_sequences) for arm, path in cfg.training.items()}
    summaries = {name: read_json(path) for name, path in grades.items()}
    sim = {name: {t: read_summary(p) for t, p in tiers.items()} for name, tiers in sims.items()}
    table = write_comparison(list(scores.values()), base, None, out, summaries, sim)
    results = {name: read_results(p) for name, p in scores.items()}
    axis = scale_table(table, results, arms=arms, scales=scales)
    found = findings(axis)
    process = process_table(summaries, [c["name"] for c in table["checkpoints"]])
    common = sorted(set.intersection(*(set(r.rows) for r in results.values())))
    depth = depth_curve(results, common)
    levels = {level: {n: read_json(p) for n, p in by_model.items()} for level, by_model in (ladder or {}).items()}
    on_ladder = ladder_table(levels, scales)
    graded = {cfg.grades_level: dict(cfg.grades), **(cfg.ladder or {})}
    on_trials = {level: {n: from_trials(p) for n, p in by_model.items()} for level, by_model in graded.items()}
    over_seeds = seed_report(cfg, results, on_trials) if cfg.seeds else None
    blocks: list[Block] = seeds_blocks(over_seeds) if over_seeds else []
    blocks += [*scale_blocks(axis, found, process), *ladder_blocks(on_ladder)]
    if depth:
        blocks += depth_blocks(depth, depth_scope(results, common), depth_composition(results, common))
    if training:
        blocks += training_blocks(training, scales)
    walltime = None
    if cfg.walltimes:
        prefix, version = run_of(out, PILOT_REPORT)
        steps = [s for s in run_walltimes(prefix, version) if s["step"] != PILOT_REPORT]  # this one runs now
        walltime = {"steps": steps, "stages": stage_walltimes(steps)}
        blocks += walltime_blocks(walltime)
    blocks += [Heading("Departures from the write-up"), "\n".join(f"- {d}" for d in departures)]
    text = to_markdown(blocks, level=2)
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
        **({"training": training} if training else {}),
    }
    if ladder:
        doc["ladder"] = on_ladder
    if over_seeds:
        doc["seeds"] = over_seeds
    if walltime:
        doc["walltime"] = walltime
    write_json(os.path.join(out, PILOT_FILE), doc)
    return text


TRIALS = "trials.jsonl"  # beside an agent grade's summary: one row per trial


def from_trials(summary_path: str) -> dict[str, Any]:
    """An agent summary whose per-task counts, solves and scored trials are recomputed from the trial
    rows beside it (`agent.compare.per_task`), where they are; the summary as written otherwise."""
    import json

    from terminalworld.agent.compare import per_task
    from terminalworld.core.records import exists, iter_lines
    from terminalworld.errors import ResultsError

    summary = read_json(summary_path)
    # A snapshot keeps its rows gzip-compressed (`report.snapshot.ROW_SUFFIXES`).
    here = [
        p for name in (TRIALS, TRIALS + ".gz") if exists(p := posixpath.join(posixpath.dirname(summary_path), name))
    ]
    if not here:
        return summary
    trials, rows = here[0], []
    for n, line in iter_lines(trials):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ResultsError(f"{trials}:{n}: not a trial row ({e})") from None
    if not all(isinstance(r, dict) and "task" in r for r in rows):
        raise ResultsError(f"{trials}: a row without a task is not a trial row")
    counts = per_task(rows)
    solved, scored = sum(c for _, c in counts.values()), sum(n for n, _ in counts.values())
    return {
        **summary,
        "per_task": {t: list(v) for t, v in counts.items()},
        "solved_trials": solved,
        "scored_trials": scored,
    }


def seed_report(
    cfg: PilotReportConfig, results: dict[str, Any], levels: dict[str, dict[str, dict[str, Any]]]
) -> dict[str, Any]:
    """The report over seeds (`report.seeds`): the probe, the ladder (the graded scales), the
    opposite-directions table, the findings with their verdicts and what a larger run would need."""
    from terminalworld.report import seeds

    scales = cfg.scale_names
    probe = seeds.probe_over_seeds(
        results, arms=cfg.arms, scales=scales, seeds=cfg.seeds, base=cfg.base, control=cfg.control
    )
    graded = [
        s
        for s in scales
        if any(seeds.checkpoint(a, s, d) in m for m in levels.values() for a in cfg.arms for d in cfg.seeds)
    ]
    ladder = seeds.ladder_over_seeds(levels, scales=graded, seeds=cfg.seeds) if any(levels.values()) else None
    found = seeds.findings(probe, ladder, scales)
    return {
        "seeds": cfg.seeds,
        "scales": scales,
        "control": cfg.control,
        "probe": probe,
        "ladder": ladder,
        "opposite": seeds.opposite_directions(probe, ladder, scales) if ladder else [],
        "findings": found,
        "needs": seeds.needs(found, probe, ladder),
    }


def seeds_blocks(doc: dict[str, Any]) -> list[Block]:
    """The report over seeds as blocks: the findings first, then the probe and the ladder."""
    from terminalworld.report import seeds_tables

    blocks = [*seeds_tables.findings_blocks(doc["findings"], doc["needs"]), *seeds_tables.probe_blocks(doc["probe"])]
    if doc.get("ladder"):
        blocks += seeds_tables.ladder_seed_blocks(doc["ladder"], doc["opposite"])
    return blocks


# The write-up's SFT scales, in trajectories, in the order of the pilot's scales (smallest first).
WRITEUP_TRAJECTORIES = (10_000, 100_000, 1_000_000)


def training_blocks(training: dict[str, dict[str, Any]], scales: list[str]) -> list[Block]:
    """What each arm trained on, per scale: packed sequences, real tokens (no separators or padding),
    loss tokens, and at most how many times fewer tokens the write-up's scale holds; then what the
    tokenize job split or left out. From `train.coverage.arm_coverage`."""
    from terminalworld.train.coverage import writeup_ratio

    rows = []
    for arm, cov in training.items():
        for k, name in enumerate(scales):
            c = cov["scales"].get(name)
            if not c:
                continue
            ratio = writeup_ratio(c["real_tokens"], WRITEUP_TRAJECTORIES[k]) if k < len(WRITEUP_TRAJECTORIES) else None
            shown = "—" if ratio is None else f"{ratio:,.0f}x"
            rows.append([arm, name, c["sequences"], f"{c['real_tokens']:,}", f"{c['loss_tokens']:,}", shown])
    columns = ["arm", "scale", "sequences", "real tokens", "loss tokens", "write-up / ours (at most)"]
    blocks: list[Block] = [
        Heading("What each scale trained on"),
        "Real tokens are the documents' own (no separators, no padding); loss tokens are the positions "
        "the arm trains. The write-up's scales are 10K / 100K / 1M trajectories of up to 8,192 tokens, "
        "so its ratio to ours is an upper bound.",
        Table(columns, rows, "llrrrr"),
    ]
    rows = [
        [
            *(arm, cov["window"], cov["trajectories"], f"{cov['split_trajectories']} ({cov['split_pieces']})"),
            *(cov["truncated_tokens"], cov["untrained_documents_left_out"]),
            ", ".join(f"{k}: {v}" for k, v in cov["failed"].items()) or "none",
        ]
        for arm, cov in training.items()
    ]
    columns = ["arm", "window", "trajectories", "split at the window (pieces)", "truncated tokens"]
    return [*blocks, Table([*columns, "untrained pieces left out", "failed"], rows, "lrrrrrl")]


def walltime_blocks(doc: dict[str, Any]) -> list[Any]:
    """The run's wall time per stage (and the steps not finished when it was read), as report blocks."""
    steps = doc["steps"]
    rows = []
    for stage in doc["stages"]:
        mine = [s for s in steps if s["stage"] == stage["stage"]]
        rows.append([stage["stage"], len(mine), sum(s["attempts"] for s in mine), hours(stage["seconds"])])
    total = sum(s["seconds"] for s in doc["stages"])
    rows.append(["total", len(steps), sum(s["attempts"] for s in steps), hours(total)])
    open_steps = [s["step"] for s in steps if not s["finished"]]
    note = (
        "Wall time from each step's own timed attempts (`pipeline.walltime`), summed over the attempts "
        "a stopped run resumed, on the machine that ran it; the stops between attempts are not counted."
    )
    if open_steps:
        note += " Not finished when the report was written: " + ", ".join(f"`{s}`" for s in open_steps) + "."
    return [Heading("Wall time per stage"), note, Table(["stage", "steps", "attempts", "wall time"], rows, "lrrr")]
