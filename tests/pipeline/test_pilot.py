"""The pilot's graph, reduced to tiny shapes and run end to end through Marin's step runner: a tiny
HF Llama with tied embeddings (SmolLM2's architecture) stands in for SmolLM2's weights, so the path
from HF weights through Levanter SFT, the chained scales and the HF export back is the real one;
then the probe at every depth, the agent grades with their steps of a fix, the simulator grades
and the scale-axis report. `tests/train/test_sft.py` checks SmolLM2's own weights in Levanter."""

import json
from pathlib import Path

import pytest

from terminalworld.core.assets import SMOLLM2, load_tokenizer, tiny_llama
from tests.conftest import load_experiment


def test_the_plan_prints_every_step_with_its_cost_and_starts_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MARIN_PREFIX", str(tmp_path / "prefix"))
    pilot = load_experiment("pilot")
    graph = pilot.build(pilot.Pilot())
    names = [n for n in graph.models if n not in ("base", "base-control")]
    assert graph.models["base"] == SMOLLM2 and len(names) == 18 and "base-control" in graph.models
    assert {n.split("-")[0] for n in names} == {"assistant", "full", "user"}
    assert {n.rsplit("-", 1)[1] for n in names} == {"s1", "s2"}  # two seeds, each a full set of scales
    steps = pilot.Pilot().scale_steps
    assert steps[1] >= 3 * steps[0] and steps[2] >= 3 * steps[1]  # scales at least 3x apart
    table = pilot.cost_table(graph.costs, pilot.MACHINES)
    assert "sft full-x9-s2" in table and "sft base-control" in table and "score base-control" in table
    assert "sim user-x9-s2" in table and "agent assistant-x1-s2 (pinpoint)" in table
    from terminalworld.pipeline.entry import main

    assert main([graph.report], "pilot", []) == 0
    out = capsys.readouterr().out
    assert "checkpoints/terminalworld/user-x9-s2@" in out and "checkpoints/terminalworld/base-control-x1-s1@" in out
    assert "terminalworld/tokenized/plain-text-3x8192@" in out and "agent-eval/heldout-tasks/full-x9-s1@" in out
    assert not (tmp_path / "prefix").exists()
    gpu = pilot.PRESETS["gpu"]
    assert gpu.heldout_n >= 40 and gpu.agent_tasks * gpu.attempts >= 32 and gpu.device == "cuda"
    p = pilot.Pilot()
    # The floors: two seeds, 2 ladder levels of 24 tasks, 4 attempts, 9 models a level, tier 3 of 12.
    assert len(p.seeds) == 2 and p.heldout_n >= 40 and p.attempts >= 4 and p.agent_tasks >= 24
    assert len(p.agent_levels) >= 2 and gpu.agent_tasks >= 24
    for level in p.agent_levels:
        assert sum(n.startswith("agent ") and n.endswith(f"({level})") for n in graph.costs) == 9
    assert "agent full-x3-s1 (function)" not in table
    assert p.loop_tasks >= 12 and 0 < p.loop_wrong_share < 1 and "sim full-x9-s2-as-agent" in table
    assert "sim-eval/tier3/full-x9-s1-as-agent@" in out and "sim-eval/tier3/full-x9-s2@" in out
    assert "sim-eval/tier2/user-x9-s2@" in out and "sim-eval/tier3/user-x9-s2@" not in out
    assert (
        "agent-eval/heldout-pinpoint-tasks/assistant-x1-s2@" in out and "terminalworld/tasks/heldout-pinpoint@" in out
    )
    note = pilot.budget_note(graph.costs, pilot.CPU_QUIET)
    assert "budget" in note and all(step in note for step in pilot.SHRINK)
    assert not any(d.startswith(("alone", "alone,")) or d[0].islower() for d in pilot.DEPARTURES)


def test_the_plan_puts_the_runs_wall_time_so_far_beside_its_estimates(tmp_path):
    from terminalworld.core.records import write_json

    pilot = load_experiment("pilot")
    p = pilot.Pilot()
    graph = pilot.build(p)
    prefix = tmp_path / "prefix"
    assert "this run so far" not in pilot.plan_text(p, graph, str(prefix))  # nothing timed yet
    for step, seconds, state in [
        ("checkpoints/terminalworld/full-x1-s1", 1500.0, "done"),
        ("probe-eval/probe_base", 2760.0, "done"),
        ("probe-eval/probe_full-x1-s1", 600.0, "running"),
    ]:
        record = {"started": "2026-12-06T10:00:00+00:00", "seconds": seconds, "state": state}
        write_json(str(prefix / step / p.version / ".wall" / "20261206T100000000000-1.json"), record)
    text = pilot.plan_text(p, graph, str(prefix))
    stages = {
        w[0]: w[1:] for w in map(str.split, text.splitlines()) if len(w) > 1 and (w[1][0].isdigit() or w[1] == "-")
    }
    assert stages["sft"][0] == "25m" and stages["score"][:2] == ["56m", "8h"]  # measured, then the estimates
    assert stages["agent"][0] == "-"  # not begun
    assert "this run so far: 2 steps finished, 1 started and not finished" in text
    assert text.splitlines()[-1] == pilot.SHRINK[-1]


def test_the_plan_says_where_its_bf16_rates_do_not_hold(tmp_path, monkeypatch):
    pilot = load_experiment("pilot")
    line = "this CPU has no native bf16 (amx_bf16, avx512_bf16)"
    for native, recipe, said in [
        (False, pilot.Pilot(), True),  # SFT in bf16 compute on a CPU without the units: said
        (True, pilot.Pilot(), False),
        (False, pilot.Pilot(sft_mp="f32"), False),  # all float32: its column is measured on any CPU
        (False, pilot.PRESETS["gpu"], False),
    ]:
        monkeypatch.setattr(pilot, "native_bf16", lambda device, native=native: native)
        text = pilot.plan_text(recipe, pilot.build(recipe), str(tmp_path / "prefix"))
        assert (line in text) is said and text.splitlines()[-1] == pilot.SHRINK[-1]


@pytest.mark.slow_ci
def test_reduced_pilot_end_to_end(tmp_path, monkeypatch):
    monkeypatch.setenv("MARIN_PREFIX", str(tmp_path / "prefix"))
    monkeypatch.setenv("WANDB_MODE", "offline")
    from terminalworld.pipeline.entry import run

    base = tmp_path / "tiny-llama"
    tok = load_tokenizer(SMOLLM2)
    tiny_llama(len(tok), seed=0).save_pretrained(base)
    tok.save_pretrained(base)
    pilot = load_experiment("pilot")
    cfg = pilot.Pilot(
        base=str(base),
        trajectories=30,
        solve_tasks=2,
        max_output_chars=400,
        sft_size=10,
        scale_names=("x1", "x3"),
        scale_steps=(2, 6),  # at least 2: Levanter's HF export hook does not fire on a 1-step run
        seq_len=2048,  # a multiple of Levanter's attention block (1,024); past the ~800-token system prompt and task
        warmup_steps=2,
        heldout_n=4,
        context_turns=3,
        agent_tasks=2,
        agent_levels=("function", "pinpoint"),
        attempts=2,
        harness=pilot.HarnessConfig(max_turns=2, context_tokens=2048, max_tokens_per_turn=16, temperature=0.8),
        sim_heldout_n=2,
        probes=10,
        loop_tasks=1,
        sim=pilot.Decoding(max_new_tokens=8),
        workers=1,
        shard_rows=5,
    )
    graph = pilot.build(cfg)
    run([graph.report])
    doc = json.loads(Path(graph.report.path(), "pilot.json").read_text())
    axis = doc["scale_axis"]
    assert [(c["arm"], c["scale"]) for c in axis["cells"]] == [
        (a, s) for a in ("assistant", "full", "user") for s in ("x1-s1", "x3-s1")
    ]
    assert axis["n"] == doc["n_trajectories"] >= 1 and all(c["median_ppl"] > 1 for c in axis["cells"])
    assert all(c["degrades_vs_smallest"] is not None for c in axis["cells"] if c["scale"] == "x3-s1")
    assert {(t["x"], t["y"]) for t in axis["sign_tests"]} == {
        ("assistant", "full"),
        ("assistant", "user"),
        ("full", "user"),
    }
    # Both seeds, the base once: the base and (a)/(b) at the smallest and largest scale of each seed.
    graded = ["base", *(f"{a}-{s}-{k}" for k in ("s1", "s2") for a in ("assistant", "full") for s in ("x1", "x3"))]
    assert [r["name"] for r in doc["process"]] == graded
    assert all(set(r["pass_at_k"]) == {"1", "2"} and r["valid_reply_share"] is not None for r in doc["process"])
    [pinpoint] = doc["ladder"].values()
    assert list(doc["ladder"]) == ["pinpoint"] and [m["name"] for m in pinpoint["models"]] == graded
    assert [t["scale"] for t in pinpoint["paired"]] == ["x1-s1", "x3-s1"] and all(
        t["tasks"] == 2 for t in pinpoint["paired"]
    )
    # The report over seeds: the base, its control and every seed's checkpoints on the probe; (a)
    # against (b) per seed and pooled on both levels; each finding with a verdict by the fixed rule.
    over = doc["seeds"]
    assert [m["name"] for m in over["probe"]["models"]][:2] == ["base", "base-control"]
    assert len(over["probe"]["models"]) == 14 and set(over["ladder"]["levels"]) == {"function", "pinpoint"}
    assert all(set(t["per_seed"]) == {"s1", "s2"} for t in over["probe"]["tests"])
    assert [t["scale"] for t in over["ladder"]["pooled"]] == ["x1", "x3"]
    assert [f["verdict"] in ("holds", "does not hold", "cannot be told at this size") for f in over["findings"]] == [
        True,
        True,
    ]
    # Every step's attempt was timed: the wall time per stage, each step finished (the report's own
    # step, running while it reads them, left out).
    wall = doc["walltime"]
    assert [s["stage"] for s in wall["stages"]] == ["record", "sft", "score", "agent", "sim"]
    assert [s for s in wall["steps"] if not (s["finished"] and s["attempts"] == 1)] == []
    assert all(s["seconds"] > 0 for s in wall["stages"])
    assert "terminalworld/reports/pilot" not in {s["step"] for s in wall["steps"]}
    assert "## Wall time per stage" in Path(graph.report.path(), "report.md").read_text()
    # Every observation of each row at its depth (1-based), 3 context turns and the target, classed;
    # the curve pools the read and predict ones.
    comp = doc["depth_composition"]
    n = doc["n_trajectories"]
    assert sorted(comp) == ["1", "2", "3", "4"] and all(sum(c.values()) == n for c in comp.values())
    headline = {int(d): c.get("read", 0) + c.get("predict", 0) for d, c in comp.items()}
    assert [(p["depth"], p["rows"]) for p in doc["depth_curve"]["base"]] == [(d, n) for d, n in headline.items() if n]
    assert doc["depth_scope"] == "read + predict observations"
    # Train where you score: every scored row lies within the trained window; each scale states its
    # real tokens and loss tokens, and what was split.
    scored = sorted((tmp_path / "prefix" / "probe-eval").rglob("probe_*.jsonl"))
    assert len(scored) == 14  # the base, the base control and twelve checkpoints (two seeds)
    for path in scored:
        for line in path.read_text().splitlines():
            row = json.loads(line)
            assert row.get("_summary") or "skipped" in row or row["full_len"] <= cfg.seq_len
    for arm in ("assistant", "full", "user"):
        cov = doc["training"][arm]
        assert cov["window"] == cfg.seq_len - 1 and cov["truncated_tokens"] == 0
        x1, x3 = cov["scales"]["x1-s1"], cov["scales"]["x3-s1"]
        assert x1["sequences"] <= 2 and x3["sequences"] <= 6 and 0 < x1["real_tokens"] <= x3["real_tokens"]
        assert 0 < x3["loss_tokens"] <= x3["real_tokens"]
    assert (
        doc["training"]["full"]["scales"]["x3-s1"]["loss_tokens"]
        > doc["training"]["assistant"]["scales"]["x3-s1"]["loss_tokens"]
    )
    assert len(doc["departures"]) >= 5
    # Every checkpoint went from the HF weights through Levanter and back: a tied-embedding Llama with
    # the chat template, the larger scale continuing the smaller one's run to its own step count.
    for name in ("assistant-x1-s1", "full-x3-s2", "user-x3-s1", "base-control"):
        hf = Path(graph.models[name].path(), "hf")
        config = json.loads((hf / "config.json").read_text())
        assert config["model_type"] == "llama" and config["tie_word_embeddings"] is True
        assert "chat_template" in (hf / "tokenizer_config.json").read_text() or (hf / "chat_template.jinja").exists()

    def saved(name: str) -> list[int]:  # Levanter names a checkpoint by its last completed step, from 0
        return sorted(
            int(p.parent.name.split("-")[1])
            for p in Path(graph.models[name].path()).glob("checkpoints/sft/step-*/metadata.json")
        )

    assert (saved("full-x1-s2")[-1], saved("full-x3-s2")[-1], saved("base-control")[-1]) == (1, 5, 1)
    # The larger scale dropped the copy of the smaller one's checkpoint it continued from.
    assert saved("full-x3-s2")[0] > saved("full-x1-s2")[-1]
    report = Path(graph.report.path(), "report.md").read_text()
    assert "The scale axis" in report and "steps of a fix" in report and "Departures from the write-up" in report
    assert "What each scale trained on" in report and "headline: read + predict" in report
    # The docs site's Pilot page, from this run's report, built strictly.
    # Built as the finished run's is: through a snapshot of the report with its rows, which every
    # figure of `pilot.json` and `metrics.json` is then recomputed from (`report.verify`).
    from terminalworld.report.site import DocsBuildConfig, build_docs
    from terminalworld.report.verify import verify_snapshot
    from tests.conftest import REPO_ROOT
    from tests.report.conftest import copy_docs, mkdocs_build

    docs, snap = copy_docs(tmp_path / "site-src"), tmp_path / "snapshot"
    build_docs(
        DocsBuildConfig(
            results=[graph.report.path()],
            out=str(docs),
            checkout=str(REPO_ROOT),
            repo_url="https://example.org/tw",
            snapshot=str(snap),
        )
    )
    [again] = verify_snapshot(str(snap))
    assert (again["status"], again["compared"], again["kept"]) == (
        "recomputed",
        ["pilot.json", "metrics.json"],
        ["training", "walltime"],
    )
    assert "walltime: stages are the sums of their steps" in again["checked"]
    from terminalworld.report.pilot import readme_summary

    summary = readme_summary(doc, "docs/snapshots/pilot-reduced")
    assert all(f"{f['finding']}: {f['verdict']}." in summary for f in over["findings"])
    assert "Wall time per stage" in summary and "· total " in summary
    rows = json.loads((snap / "snapshot.json").read_text())["rows"]
    assert {r.split("/")[0] for r in rows} == {"agent-eval", "heldout", "probe-eval", "sim-eval", "terminalworld"}
    page = (docs / "results" / "pilot.md").read_text()
    assert "The scale axis" in page and "steps of a fix" in page and "Env PPL by context depth" in page
    assert "The write-up's findings" in page and "Opposite directions" in page and "Superseded" not in page
    assert "Departures from the write-up" in page and "### Reproduce" in page and "No results yet" not in page
    assert mkdocs_build(tmp_path / "site-src", tmp_path / "site").returncode == 0
