"""Pilot II's graph and its shards: assertions on the built graph (milliseconds: the models, the
continue-from chains, the control, which shard owns each step, every shard within 90 minutes by the
plan), and the reduced pilot run shard by shard through Marin's step runner (the shared inputs,
then the base, then one arm x seed chain, each from a fresh prefix and the committed folder): a tiny
HF Llama with tied embeddings (SmolLM2's architecture) stands in for SmolLM2's weights, so the path
from HF weights through Levanter SFT, the chained scales and the HF export back is the real one."""

import gzip
import json
import shutil
from dataclasses import replace

import pytest

from terminalworld.core.assets import SMOLLM2, load_tokenizer, tiny_llama
from terminalworld.errors import InputError
from terminalworld.pipeline import shards as ledger
from terminalworld.report import shard_run
from tests.conftest import REPO_ROOT, load_experiment


def _steps(built: list) -> set[str]:
    return {b.step.name for b in built}


def test_the_graph_its_shards_and_their_estimates(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MARIN_PREFIX", str(tmp_path / "prefix"))
    pilot = load_experiment("pilot")
    p = pilot.Pilot()
    graph = pilot.build(p)
    names = [n for n in graph.models if n not in ("base", "base-control")]
    assert graph.models["base"] == SMOLLM2 and len(names) == 18 and "base-control" in graph.models
    assert {n.split("-")[0] for n in names} == {"assistant", "full", "user"}
    assert {n.rsplit("-", 1)[1] for n in names} == {"s1", "s2"}  # two seeds, each a full set of scales
    assert p.scale_steps[1] == 3 * p.scale_steps[0] and p.scale_steps[2] == 3 * p.scale_steps[1]
    assert p.seq_len == 8192 and p.heldout_n >= 20 and p.min_depth <= p.context_turns
    # At most 8 shards: the inputs, the base, one per arm x seed; each within 90 minutes by the plan.
    shards = graph.shards
    assert list(shards) == ["inputs", "base", *(f"{a}-s{k}" for k in (1, 2) for a in ("assistant", "full", "user"))]
    column = shard_run.recipe_column(p)
    assert all(s.seconds(column) <= shard_run.SHARD_BUDGET_S for s in shards.values())
    # Every step belongs to one shard; a chain owns its three scales, their grades, and drops them.
    owned = [b.step.name for s in shards.values() for b in s.built]
    assert len(owned) == len(set(owned))
    full = shards["full-s1"]
    assert [c.step.name for c in full.checkpoints] == [f"checkpoints/terminalworld/full-x{n}-s1" for n in (1, 3, 9)]
    assert _steps(full.built) >= {
        "probe-eval/probe_full-x3-s1",
        "agent-eval/heldout-tasks/full-x9-s1",
        "agent-eval/heldout-pinpoint-tasks/full-x9-s1",
        "sim-eval/tier1/full-x9-s1",
        "sim-eval/tier2/full-x9-s1",
    }
    assert not any(n.startswith("agent-eval/") for n in _steps(shards["user-s1"].built))
    assert not any(n.startswith("sim-eval/") for n in _steps(shards["assistant-s2"].built))
    assert _steps(shards["base"].built) >= {
        "checkpoints/terminalworld/base-control-x1-s1",
        "probe-eval/probe_base",
        "probe-eval/probe_base-control",
        "sim-eval/tier3/base",
    }
    assert shards["inputs"].whole and not shards["inputs"].checkpoints
    assert "terminalworld/tokenized/plain-text-2x8192" in _steps(shards["inputs"].built)
    # The continue-from chain: x3 continues x1's checkpoint, x9 x3's.
    x9 = graph.models["full-x9-s1"].step
    assert graph.models["full-x3-s1"].step in x9.deps and graph.models["full-x1-s1"].step not in x9.deps
    # The gate: a closed level's chain grades take fewer attempts; the base's never.
    gated = pilot.build(p, frozenset({"function"}))
    assert gated.shards["full-s1"].seconds(column) < full.seconds(column)
    assert gated.shards["base"].seconds(column) == shards["base"].seconds(column)
    # The departures come from the Pilot page; the plan prints and starts nothing.
    assert len(pilot.departures_from(str(pilot.PAGE))) >= 8
    text = shard_run.plan_text(shards, None, column)
    assert "sft full-x9-s2" in text and "agent full-x9-s1 (pinpoint)" in text and "8 shards, 0 done" in text
    from terminalworld.pipeline.entry import main

    assert main([graph.report], "pilot", []) == 0
    out = capsys.readouterr().out
    assert "checkpoints/terminalworld/user-x9-s2@" in out and "sim-eval/tier3/base@" in out
    assert not (tmp_path / "prefix").exists()
    gpu = pilot.PRESETS["gpu"]
    assert gpu.heldout_n >= 40 and gpu.agent_tasks * gpu.attempts >= 32 and gpu.device == "cuda"


def test_the_ledger_refuses_another_version_and_names_the_next_shard(tmp_path):
    shards = {n: ledger.Shard(n) for n in ("inputs", "base", "full-s1")}
    assert ledger.read_ledger(tmp_path) is None and ledger.next_shard(shards, None) == "inputs"
    ledger.append_entry(tmp_path, "v1", {"shard": "inputs", "version": "v1", "seconds": 60.0, "commit": "abc"})
    found = ledger.read_ledger(tmp_path)
    assert ledger.next_shard(shards, found) == "base"
    ledger.check_version(found, "v1", tmp_path)
    with pytest.raises(InputError, match="holds version v1, this recipe is v2"):
        ledger.check_version(found, "v2", tmp_path)
    with pytest.raises(InputError, match="holds version v1"):
        ledger.append_entry(tmp_path, "v2", {"shard": "base"})
    (tmp_path / ledger.LEDGER).write_text("[1]")
    with pytest.raises(InputError, match="not a ledger"):
        ledger.read_ledger(tmp_path)


def test_the_gate_closes_a_level_that_neither_the_base_nor_the_first_chain_solved():
    levels = ("function", "pinpoint")
    base = {"shard": "base", "solved": {"base": {"function": 0, "pinpoint": 1}}}
    chain = {"shard": "full-s1", "solved": {"full-x9-s1": {"function": 0, "pinpoint": 0}}}
    assert shard_run.closed_levels({"version": "v", "shards": [base]}, levels) == frozenset()  # not decided
    assert shard_run.closed_levels({"version": "v", "shards": [base, chain]}, levels) == {"function"}
    user = {"shard": "user-s1", "solved": {}}  # a chain without agent grades decides nothing
    assert shard_run.closed_levels({"version": "v", "shards": [base, user]}, levels) == frozenset()


def test_a_committed_step_names_no_machine_path_and_restores_as_finished(tmp_path):
    prefix, folder = tmp_path / "prefix", tmp_path / "study"
    out = prefix / "probe-eval" / "probe_x" / "v1"
    (out / ".wall").mkdir(parents=True)
    (out / "probe_x.jsonl").write_text(json.dumps({"path": f"{prefix}/heldout/rows.jsonl"}) + "\n")
    (out / ".executor_status").write_text("SUCCESS")
    (out / ".wall" / "1.json").write_text('{"seconds": 3.0}')
    (out / "scratch.bin").write_bytes(b"\0")  # not a row: a rows commit leaves it
    shard_run.commit_step(str(out), folder, str(prefix), whole=False)
    here = folder / "steps" / "probe-eval" / "probe_x" / "v1"
    assert sorted(p.relative_to(here).as_posix() for p in here.rglob("*.gz")) == [
        ".executor_status.gz",
        ".wall/1.json.gz",
        "probe_x.jsonl.gz",
    ]
    assert str(tmp_path) not in gzip.decompress((here / "probe_x.jsonl.gz").read_bytes()).decode()
    again = tmp_path / "again"
    assert shard_run.restore_steps(folder, str(again)) == 3
    restored = again / "probe-eval" / "probe_x" / "v1"
    assert json.loads((restored / "probe_x.jsonl").read_text())["path"] == f"{again}/heldout/rows.jsonl"
    assert (restored / ".executor_status").read_text() == "SUCCESS"
    print_once = shard_run.fingerprint(folder, ["probe-eval/probe_x/v1"])
    (here / ".wall" / "2.json.gz").write_bytes(gzip.compress(b"{}"))  # a timing is not what it made
    assert shard_run.fingerprint(folder, ["probe-eval/probe_x/v1"]) == print_once


def _reduced(pilot, base):
    return pilot.Pilot(
        version="2026.01.01.1",
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


@pytest.mark.slow_ci
def test_reduced_pilot_shard_by_shard(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    base = tmp_path / "tiny-llama"
    tok = load_tokenizer(SMOLLM2)
    tiny_llama(len(tok), seed=0).save_pretrained(base)
    tok.save_pretrained(base)
    pilot = load_experiment("pilot")
    cfg = _reduced(pilot, base)
    folder = tmp_path / "committed"  # what the repository holds: a ledger of this version, no shard yet
    folder.mkdir()
    (folder / ledger.LEDGER).write_text(json.dumps({"version": cfg.version, "shards": []}))
    entries = []
    for k, name in enumerate(("inputs", "base", "next")):
        # Each shard on a fresh machine: the committed folder in a new checkout, a new prefix.
        work, prefix = tmp_path / f"checkout-{k}", tmp_path / f"prefix-{k}"
        shutil.copytree(folder, work)
        monkeypatch.setenv("MARIN_PREFIX", str(prefix))
        entries.append(shard_run.run_shard(pilot.build, cfg, name, work, str(prefix), REPO_ROOT))
        shutil.rmtree(folder)
        shutil.copytree(work, folder)  # committed
    assert [e["shard"] for e in entries] == ["inputs", "base", "assistant-s1"]
    done = ledger.done(ledger.read_ledger(folder))
    assert set(done) >= {"inputs", "base", "assistant-s1"}
    for e in entries:
        assert e["version"] == cfg.version and e["seconds"] > 0 and e["cpus"] and isinstance(e["flags"], list)
        assert "commit" in e and e["estimate_s"] > 0 and e["bytes"] > 0
    assert entries[0]["fingerprint"] and entries[1]["solved"]["base"].keys() == {"function", "pinpoint"}
    assert entries[2]["solved"].keys() == {"assistant-x3-s1"}
    # No path of this machine in any committed record, nor its prefix in any row.
    for path in folder.rglob("*"):
        if path.is_file():
            data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
            record = path.name.removesuffix(".gz").endswith(".json") or path.name.startswith(".")
            assert (str(tmp_path) if record else str(tmp_path / "prefix-")).encode() not in data, path
    # The chain continued x1's checkpoint, dropped the copy and then its own checkpoints once graded.
    prefix = tmp_path / "prefix-2"
    assert not list((prefix / "checkpoints").rglob("metadata.json"))
    steps = folder / "steps"
    assert (steps / "probe-eval" / "probe_assistant-x3-s1").is_dir()
    assert list((steps / "checkpoints" / "terminalworld" / "assistant-x3-s1").rglob(".wall/*.json.gz"))
    assert list((steps / "agent-eval" / "heldout-pinpoint-tasks" / "assistant-x3-s1").rglob("summary.json.gz"))
    # A shard of another version does not join the ledger; a finished one does not run again.
    with pytest.raises(InputError, match=r"holds version 2026\.01\.01\.1"):
        shard_run.run_shard(pilot.build, replace(cfg, version="2026.01.01.2"), "next", folder, str(prefix), REPO_ROOT)
    with pytest.raises(InputError, match="shard base is done"):
        shard_run.run_shard(pilot.build, cfg, "base", folder, str(prefix), REPO_ROOT)
