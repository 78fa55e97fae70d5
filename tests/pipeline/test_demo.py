"""A reduced local demo, end to end through Marin's step runner: tasks, record (with solving
episodes), subsets, held-out, three arms, base pretraining, Levanter SFT, HF export, scoring, agent
grades with Harbor on tasks from unseen repos, comparison, and ECHO's three arms on top."""

import gzip
import json
import os
from pathlib import Path

import pytest

from terminalworld.pipeline.artifacts import subset_file
from tests.conftest import load_experiment


def _rows(path):
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f]


@pytest.mark.slow_ci
def test_reduced_demo_end_to_end_and_reuse(tmp_path, monkeypatch):
    monkeypatch.setenv("MARIN_PREFIX", str(tmp_path / "prefix"))
    monkeypatch.setenv("WANDB_MODE", "offline")
    from terminalworld.pipeline.entry import run

    demo = load_experiment("local_demo")
    cfg = demo.Demo(
        trajectories=36,
        sft_size=8,
        pretrain_size=16,
        heldout_n=4,
        context_turns=3,
        seq_len=2048,
        pretrain_epochs=1,
        sft_epochs=1,
        batch_size=2,
        max_output_chars=600,
        solve_tasks=2,
        agent_tasks=2,
        harness=demo.Episodes(max_turns=2, context_tokens=2048, max_tokens_per_turn=32),
        probes=10,
        sim=demo.Decoding(max_new_tokens=16),
        workers=1,  # Zephyr inline: tests/corpus/test_sharded.py covers worker processes
        shard_rows=5,
    )
    graph = demo.build(cfg)
    run([graph.report])
    out = graph.report.path()
    report = json.loads(Path(out, "report.json").read_text())
    assert [a["arm"] for a in report["arms"]] == ["base", "assistant", "full", "user"]
    assert report["n_trajectories"] == 4
    for a in report["arms"]:
        assert a["median_ppl"] > 1 and a["token_weighted_ppl"] > 1
    assert os.path.exists(os.path.join(out, "report.md")) and os.path.exists(os.path.join(out, "ppl_distribution.png"))
    # The held-out rows come from repos unseen by the SFT set and the pretraining text: the SFT set
    # is the subset of sft_size, the pretraining text rows sft_size..pretrain_size of the larger one.
    heldout = [json.loads(x) for x in Path(graph.heldout.path(), graph.heldout.file).read_text().splitlines()]
    assert len({r["repo"] for r in heldout}) == 4
    sft = _rows(Path(graph.subsets.path(), subset_file(cfg.sft_size)))
    larger = _rows(Path(graph.subsets.path(), subset_file(cfg.pretrain_size)))
    pretrain = larger[cfg.sft_size :]
    assert larger[: cfg.sft_size] == sft and len(sft) == 8 and len(pretrain) == 8
    seen_repos = {r["repo"] for r in sft + pretrain}
    seen_ids = {r["instance_id"] for r in sft + pretrain}
    assert len(seen_repos) > 1 and not {r["repo"] for r in heldout} & seen_repos
    assert not {r["instance_id"] for r in heldout} & seen_ids
    # Every arm has an agent grade on the held-out tasks, whose repos are unseen in training too; the
    # recorded corpus holds the solving episodes of the training tasks, each solved.
    tasks = json.loads(Path(graph.agent_tasks.path(), "manifest.json").read_text())
    assert len(tasks["tasks"]) == 2 and not set(tasks["repos"]) & seen_repos
    assert report["agent"]["tasks"] == 2 and all(
        a["scored_trials"] == 2 and a["pass_at_1"] >= 0 for a in report["arms"]
    )
    # Every model is graded as a simulator on the held-out rows and the probes, one in the closed loop.
    assert all(0 <= a["similarity"] <= 1 and 0 <= a["degenerate_rate"] <= 1 for a in report["arms"])
    assert report["sim"]["tiers"] == {a: [1, 2] for a in ("base", "assistant", "user")} | {"full": [1, 2, 3]}
    metrics = json.loads(Path(out, "metrics.json").read_text())
    assert metrics["sim"]["checkpoints"]["full"]["tier3"]["episodes"] == 2
    assert set(metrics["sim"]["checkpoints"]["base"]["tier2"]["by_family"]) >= {"ls", "git_diff", "traceback"}
    assert os.path.exists(os.path.join(out, "sim_similarity_by_family.png"))
    solving = _rows(Path(graph.corpus.path(), "solving.jsonl.gz"))
    assert len(solving) == 2 and all(r["reward"] == 1.0 and r["task_kind"] == "solve" for r in solving)
    # ECHO's miniature on the demo: three arms from the full arm's export, one step each.
    echo = load_experiment("echo_local")
    echo_report = echo.build(echo.EchoLocal(demo=cfg, steps=1, prompts_per_step=1, samples_per_prompt=2))
    run([echo_report])
    table = json.loads(Path(echo_report.path(), "echo_report.json").read_text())
    assert set(table["arms"]) == {"grpo", "echo", "env-only"} and table["heldout_trajectories"] == 4
    assert all(a["rollouts"] == 2 and len(a["reward_per_step"]) == 1 for a in table["arms"].values())
    grpo = table["arms"]["grpo"]
    if grpo["zero_variance_groups_per_step"] == [1.0]:  # no GRPO signal: its weights cannot move
        assert grpo["env_ce_change"]["mean"] == 0.0
    assert {d["field"] for d in table["departures_from_paper"]} >= {"steps", "learning_rate"}
    # A second run reuses every finished step.
    ckpt = os.path.join(graph.models["assistant"].path(), "hf", "config.json")
    before = os.path.getmtime(ckpt)
    run([demo.build(cfg).report])
    assert os.path.getmtime(ckpt) == before
