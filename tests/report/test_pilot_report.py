"""The pilot's report end to end on step outputs shaped like the pilot's (score files of the base, the
base control and eighteen seeded checkpoints; agent summaries on two ladder levels): `pilot.json`
carries the report over seeds, `report.md` and the Pilot page show its findings and tables."""

import json
import math
from pathlib import Path

import numpy as np

from terminalworld.report.pages import Artifact, Page, pilot_page
from terminalworld.report.pilot import PilotReportConfig, write_pilot_report

ARMS, SCALES, SEEDS = ["assistant", "full", "user"], ["x1", "x3", "x9"], ["s1", "s2"]


def _scores(path, name: str, log_ppl: np.ndarray) -> str:
    with open(path, "w") as f:
        for i, lp in enumerate(log_ppl):
            n, cls = 12 + i % 5, "copy" if i >= 44 else ("read" if i % 2 else "predict")
            row = {"instance_id": f"t{i:02d}", "repo": f"r/{i}", "ppl": math.exp(lp), "sum_nll": lp * n}
            f.write(json.dumps({**row, "n_target_tokens": n, "target_class": cls}) + "\n")
        f.write(json.dumps({"_summary": True, "model_name": name}) + "\n")
    return str(path)


def _summary(path, solves: list[int]) -> str:
    doc = {
        "per_task": {f"t{i:02d}": [2, s] for i, s in enumerate(solves)},
        "solved_trials": sum(solves),
        "scored_trials": 2 * len(solves),
        "pass_at_1": sum(solves) / (2 * len(solves)),
        "pass_at_1_stderr": 0.0,
        "valid_action_rate": 1.0,
        "process": {},
    }
    path.write_text(json.dumps(doc))
    return str(path)


def test_the_pilot_report_over_seeds_from_rows(tmp_path):
    rng = np.random.default_rng(1)
    base = rng.uniform(0.5, 1.5, 46)  # 44 read + predict rows (floor met), 2 copies
    names = ["base", "base-control", *(f"{a}-{sc}-{sd}" for a in ARMS for sc in SCALES for sd in SEEDS)]
    # (b) and (c) below (a) at every scale; (a) rises with scale: finding (1) holds.
    shift = {"assistant": {"x1": -0.1, "x3": 0.0, "x9": 0.3}, "full": dict.fromkeys(SCALES, -0.3)}
    shift["user"] = shift["full"]
    scores = {}
    for k, n in enumerate(names):
        arm, scale = n.split("-")[:2] if "-x" in n else (None, None)
        s = shift[arm][scale] if arm else (-0.05 if n == "base-control" else 0.0)
        noise = 0 if n == "base" else np.random.default_rng(k).normal(0, 0.02, 46)
        scores[n] = _scores(tmp_path / f"{n}.jsonl", n, base + s + noise)
    # One task solved by one grade (below): finding (2) cannot be told.
    graded = ["base", *(f"{a}-{sc}-{sd}" for sd in SEEDS for a in ("assistant", "full") for sc in ("x1", "x9"))]
    levels = {
        lv: {n: _summary(tmp_path / f"{lv}-{n}.json", [0] * 24) for n in graded} for lv in ("function", "pinpoint")
    }
    # One grade's trial rows say what its summary does not: the report counts from the rows.
    trials = [
        {"task": f"t{i:02d}", "trial": k, "scored": True, "reward": float(i == 0)} for i in range(24) for k in (0, 1)
    ]
    (tmp_path / "function-assistant-x9-s1.trials").mkdir()
    moved = tmp_path / "function-assistant-x9-s1.trials" / "summary.json"
    moved.write_text(Path(levels["function"]["assistant-x9-s1"]).read_text())
    (moved.parent / "trials.jsonl").write_text("".join(json.dumps(t) + "\n" for t in trials))
    levels["function"]["assistant-x9-s1"] = str(moved)
    out = tmp_path / "report"
    cfg = PilotReportConfig(
        scores=scores,
        out=str(out),
        base="base",
        arms=ARMS,
        scales=[f"{s}-s1" for s in SCALES],
        grades=levels["function"],
        sims={},
        departures=["Model: a small one."],
        ladder={"pinpoint": levels["pinpoint"]},
        seeds=SEEDS,
        scale_names=SCALES,
        control="base-control",
    )
    write_pilot_report(cfg)
    doc = json.loads((out / "pilot.json").read_text())["seeds"]
    assert doc["probe"]["headline_targets"] == 44 and doc["probe"]["meets_floor"]
    assert [f["verdict"] for f in doc["findings"]] == ["holds", "cannot be told at this size"]
    assert set(doc["ladder"]["levels"]) == {"function", "pinpoint"} and doc["ladder"]["solved_any"]
    solver = next(m for m in doc["ladder"]["levels"]["function"]["models"] if m["name"] == "assistant-x9-s1")
    assert (solver["solved"], solver["scored"], solver["pass_at_k"]["1"]["value"]) == (2, 48, 1 / 24)
    [_, x9] = doc["ladder"]["levels"]["function"]["paired"]
    assert x9["per_seed"]["s1"]["a_higher"] == 1 and x9["pooled"]["tasks"] == 48
    assert [o["scale"] for o in doc["opposite"]] == ["x1", "x9"]
    md = (out / "report.md").read_text()
    assert "**(1) loss on observations makes a better world model than action-only loss" in md
    assert "| base-control |" in md and "**No checkpoint solved any task at any level.**" not in md
    page = Page(str(tmp_path / "site"), "results/pilot.md")
    pilot_page(Artifact(str(out), {}, None, "pilot-report@1"), page, "assets")
    text = "\n".join(page.lines)
    assert "### The write-up's findings" in text and "Between-seed spread" in text
    assert "Opposite directions: the probe against the agent grade" in text
    # One verdict per finding, by the fixed rule: no second, untested verdict from one seed's medians.
    assert "findings on these numbers" not in text and "findings on these numbers" not in md
    # Finding (1) drawn: every arm and seed against scale, once, beside the probe's tables over seeds.
    assert (out / "scale_curves.png").stat().st_size > 10_000
    assert text.count("scale_curves.png") == 1
    assert text.index("The probe per arm, scale and seed") < text.index("scale_curves.png") < text.index("ppl_")


def test_the_readme_summary_quotes_each_verdict_its_statistics_and_the_wall_time():
    from terminalworld.report.pilot import readme_summary

    part = {
        "claim": "(b) predicts observations better than (a) at x9",
        "verdict": "holds",
        "statistic": "Wilcoxon p, mean log PPL ratio",
        "p": 0.0123,
        "effect": 0.25,
        "seed_effects": {"s1": 0.2, "s2": 0.3},
    }
    doc = {
        "seeds": {
            "findings": [{"finding": "(1) observations", "verdict": "holds", "parts": [part]}],
            "probe": {"classed": True, "class_counts": {"headline": 49, "read": 48, "predict": 1, "copy": 15}},
        },
        "walltime": {"stages": [{"stage": "record", "seconds": 1740.0}, {"stage": "sft", "seconds": 22_380.0}]},
    }
    assert readme_summary(doc, "docs/snapshots/pilot-2026.12.06.2") == (
        "Pilot II's findings (version `2026.12.06.2`, its rows committed in "
        "[`docs/snapshots/pilot-2026.12.06.2`](docs/snapshots/pilot-2026.12.06.2/); the rule that decides each, "
        "fixed before the run, is on the [Pilot](docs/pilot.md) page):\n\n"
        "- **(1) observations: holds.**\n"
        "    - (b) predicts observations better than (a) at x9: holds (Wilcoxon p, mean log PPL ratio: "
        "pooled p = 0.0123, effect 0.250; per seed s1: 0.200, s2: 0.300)\n\n"
        "The probe's verdicts rest on the 49 targets every checkpoint scored: 48 read (repository content not yet "
        "in context) and 1 predict (execution output, errors, edits' messages); 15 copies of the context are "
        "reported apart.\n\n"
        "Wall time per stage, summed over every attempt of the resumed run: record 29m · sft 6h 13m · total 6h 42m.\n"
    )


def test_a_tiny_effect_is_shown_by_its_significant_digits_not_as_zero():
    from terminalworld.report.seeds_tables import findings_lines

    part = {"claim": "c", "verdict": "cannot be told at this size", "p": 0.195, "effect": -0.000476}
    text = findings_lines([{"finding": "f", "verdict": "v", "parts": [part | {"seed_effects": {"s1": 0.0}}]}])
    assert "pooled p = 0.195, effect -0.000476; per seed s1: 0.000)" in text
