"""A reduced local demo, end to end through Marin's step runner: record, subsets, held-out,
three arms, base pretraining, Levanter SFT, HF export, scoring, comparison."""

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
    # A second run reuses every finished step.
    ckpt = os.path.join(graph.models["assistant"].path(), "hf", "config.json")
    before = os.path.getmtime(ckpt)
    run([demo.build(cfg).report])
    assert os.path.getmtime(ckpt) == before
