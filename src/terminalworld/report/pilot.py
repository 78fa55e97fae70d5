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
from terminalworld.core.targets import MEANING
from terminalworld.eval.metrics import read_results
from terminalworld.pipeline.artifacts import PILOT_REPORT
from terminalworld.pipeline.cost import hours
from terminalworld.pipeline.walltime import mean_load, run_of, run_walltimes, stage_walltimes, total_seconds
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
    if over_seeds:
        scale_plot(over_seeds["probe"], cfg, out)
    blocks: list[Block] = seeds_blocks(over_seeds) if over_seeds else []
    # Over seeds, the findings are decided once, by the fixed rule (`report.verdict`): the first seed's
    # scale axis stays as a table, without the untested direction-only verdicts it once carried.
    blocks += [*scale_blocks(axis, [] if over_seeds else found, process), *ladder_blocks(on_ladder)]
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


SCALE_PLOT = "scale_curves.png"


def scale_plot(probe: dict[str, Any], cfg: PilotReportConfig, out: str) -> str | None:
    """Finding (1) at a glance: each arm's read + predict token-weighted PPL (95 % bootstrap
    interval) against its scale, one line per seed (solid, then dashed), with the base and its
    control as horizontal lines; returns the path, or None when no checkpoint has a headline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from terminalworld.report import seeds
    from terminalworld.report.figures import log_axis, model_colors, save_plot

    by_name = {m["name"]: m["headline"] for m in probe["models"] if m["headline"].get("token_weighted_ppl")}
    colors = model_colors([cfg.base, *cfg.arms])
    lines = [(arm, seed) for arm in cfg.arms for seed in cfg.seeds]
    fig, ax = plt.subplots(figsize=(6, 4))
    drawn = False
    for n, (arm, seed) in enumerate(lines):
        at = [(i, c) for i, s in enumerate(cfg.scale_names) if (c := by_name.get(seeds.checkpoint(arm, s, seed)))]
        if not at:
            continue
        dodge = 0.04 * (n - (len(lines) - 1) / 2)  # each line's intervals beside the others', not on them
        y = [c["token_weighted_ppl"] for _, c in at]
        ci = [c.get("tw_ci95") or [v, v] for v, (_, c) in zip(y, at, strict=True)]
        err = [[v - lo for v, (lo, _) in zip(y, ci, strict=True)], [hi - v for v, (_, hi) in zip(y, ci, strict=True)]]
        style = "o-" if seed == cfg.seeds[0] else "o--"
        ax.errorbar(
            [i + dodge for i, _ in at], y, yerr=err, fmt=style, capsize=3, color=colors[arm], label=f"{arm} {seed}"
        )
        drawn = True
    for name, style in ((cfg.base, ":"), (cfg.control, "-.")):
        if name and (h := by_name.get(name)):
            ax.axhline(h["token_weighted_ppl"], ls=style, color="grey", lw=1, label=name)
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xticks(range(len(cfg.scale_names)), cfg.scale_names)
    ax.set_xlabel("SFT scale (nested, each the next's first steps)")
    log_axis(ax.yaxis)
    ax.set_ylabel("token-weighted PPL, read + predict")
    ax.set_title("The probe against SFT scale, per arm and seed", fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    return save_plot(fig, out, SCALE_PLOT)


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


def readme_summary(doc: dict[str, Any], snapshot: str) -> str:
    """What the README quotes of a pilot run, from its `pilot.json` as committed in `snapshot` (a
    repository path): each finding's verdict with the statistic that decides each part, the probe's
    targets per class, and the wall time per stage. The claims test checks the README holds exactly
    this for the committed snapshot, so every figure it quotes is one `terminalworld docs verify`
    recomputes."""
    from terminalworld.report.seeds_tables import findings_lines

    version = posixpath.basename(snapshot.rstrip("/")).removeprefix("pilot-")
    parts = [
        f"Pilot II's findings (version `{version}`, its rows committed in [`{snapshot}`]({snapshot}/); "
        "the rule that decides each, fixed before the run, is on the [Pilot](docs/pilot.md) page):",
        "",
        findings_lines(doc["seeds"]["findings"]),
    ]
    probe = doc["seeds"].get("probe")
    if probe and probe["classed"]:
        # What "predicts observations" stands on here: a headline of reads says less about execution.
        k = probe["class_counts"]
        parts += [
            "",
            f"The probe's verdicts rest on the {k['headline']} targets every checkpoint scored: {k['read']} read "
            f"({MEANING['read']}) and {k['predict']} predict ({MEANING['predict']}); {k['copy']} copies of the "
            "context are reported apart.",
        ]
    if wall := doc.get("walltime"):
        stages = " · ".join(f"{s['stage']} {hours(s['seconds'])}" for s in wall["stages"])
        total = hours(total_seconds(wall["stages"]))
        parts += ["", f"Wall time per stage, summed over every attempt of the resumed run: {stages} · total {total}."]
    return "\n".join(parts) + "\n"


def walltime_blocks(doc: dict[str, Any]) -> list[Any]:
    """The run's wall time per stage (and the steps not finished when it was read), as report blocks."""
    steps = doc["steps"]
    loaded = any("load" in s for s in doc["stages"])
    rows = []
    for stage in doc["stages"]:
        mine = [s for s in steps if s["stage"] == stage["stage"]]
        rows.append([stage["stage"], len(mine), sum(s["attempts"] for s in mine), hours(stage["seconds"])])
        rows[-1] += [_load(stage.get("load"))] if loaded else []
    rows.append(["total", len(steps), sum(s["attempts"] for s in steps), hours(total_seconds(doc["stages"]))])
    rows[-1] += [_load(mean_load(doc["stages"]))] if loaded else []
    open_steps = [s["step"] for s in steps if not s["finished"]]
    note = (
        "Wall time from each step's own timed attempts (`pipeline.walltime`), summed over the attempts "
        "a stopped run resumed, on the machine that ran it; the stops between attempts are not counted."
    )
    if loaded:
        note += (
            " Mean load is the 1-minute load average over the attempts' heartbeats, weighted by their time (— where"
            " an attempt predates it): above the machine's cores, the stage shared them and ran slower than alone."
        )
    if open_steps:
        note += " Not finished when the report was written: " + ", ".join(f"`{s}`" for s in open_steps) + "."
    columns = ["stage", "steps", "attempts", "wall time", *(["mean load"] if loaded else [])]
    return [Heading("Wall time per stage"), note, Table(columns, rows, "lrrr" + "r" * loaded)]


def _load(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


DEPARTURES_HEADING = "## Departures from the write-up"


def departures_from(page: str) -> list[str]:
    """The departures from the write-up as the Pilot page lists them: the bullets under its
    `DEPARTURES_HEADING`, each one line. Raises `ValueError` where the page lists none."""
    with open(page, encoding="utf-8") as f:
        text = f.read(1 << 20)
    _, found, rest = text.partition(DEPARTURES_HEADING + "\n")
    out: list[str] = []
    for line in rest.split("\n## ", 1)[0].splitlines():
        if line.startswith("- "):
            out.append(line[2:].strip())
        elif line.startswith("  ") and out:  # a bullet's wrapped line
            out[-1] += " " + line.strip()
    if not (found and out):
        raise ValueError(f"{page}: no departures under {DEPARTURES_HEADING!r}")
    return out
