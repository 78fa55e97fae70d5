import gzip
import json

import pytest

from terminalworld.core.formats import load_trajectories
from terminalworld.core.prompts import SYSTEM_PROMPT
from terminalworld.core.trajectories import OBSERVATION_PREFIX, SUBMIT_SENTINEL, command_family, extract_command
from terminalworld.corpus.recorder import RecordConfig, record_corpus
from terminalworld.env.codetrees import discover_code_trees


def test_at_least_100_distinct_code_trees_are_available():
    trees = discover_code_trees()
    assert len({t.repo for t in trees}) >= 100
    assert all(t.py_files for t in trees)


def test_recorded_rows_are_swe_zero_rows(recorded_corpus, fixtures):
    manifest = json.loads((recorded_corpus / "manifest.json").read_text())
    assert manifest["trajectories"] == 24 and manifest["repos"] == 24 and len(manifest["shards"]) == 3
    trajs = load_trajectories(str(recorded_corpus / "*.jsonl.gz"))
    assert len(trajs) == 24 and len({t.repo for t in trajs}) == 24
    swe_zero = load_trajectories(str(fixtures / "adp_swe-zero-12m/sample_raw.json"))[0]
    assert set(json.loads(gzip.decompress(next(recorded_corpus.glob("*.gz")).read_bytes()).split(b"\n")[0])) >= {
        "instance_id",
        "repo",
        "messages",
        "trajectory_format",
    }
    families = set()
    for t in trajs:
        assert t.format == swe_zero.format == "mini-swe-agent-1"
        assert t.system == SYSTEM_PROMPT and t.task.startswith(f"Please solve this issue in the repository {t.repo}.")
        assert 15 <= len(t.turns) <= 30
        for turn in t.turns:
            assert turn.action.startswith("THOUGHT: ") and extract_command(turn.action) is not None
            assert turn.observation.startswith(OBSERVATION_PREFIX)
            families.add(command_family(extract_command(turn.action)))
        assert extract_command(t.turns[-1].action) == f"echo {SUBMIT_SENTINEL}"
        assert t.turns[-1].observation == f"{OBSERVATION_PREFIX}{SUBMIT_SENTINEL}\n"
    assert families >= {"ls", "find", "grep", "cat", "sed", "git", "edit"}
    text = "\n".join(turn.observation for t in trajs for turn in t.turns)
    assert "No such file or directory" in text  # real errors from paths that do not exist
    assert "diff --git a/" in text  # the sed -i edit shows up in git diff


def test_edits_are_real_and_grounded(recorded_corpus):
    for t in load_trajectories(str(recorded_corpus / "*.jsonl.gz")):
        cmds = [extract_command(x.action) for x in t.turns]
        edit = next(i for i, c in enumerate(cmds) if c.startswith("sed -i"))
        diff = t.turns[edit + 2].observation
        assert cmds[edit + 2] == "git diff" and diff.count("\n+") >= 1 and diff.count("\n-") >= 1, diff


def test_same_seed_rerecords_identical_bytes(recorded_corpus, tmp_path):
    again = tmp_path / "again"
    record_corpus(RecordConfig(out=str(again), trajectories=24, seed=3, shard_size=10))
    for shard in sorted(recorded_corpus.glob("*.jsonl.gz")):
        assert (again / shard.name).read_bytes() == shard.read_bytes()


def test_interrupted_recording_resumes(recorded_corpus, tmp_path):
    """A recording stopped after its first two shards: they are kept and only the last one (4 of
    the 24 trajectories) is recorded. Each shard is kept or recorded on its own (a trajectory
    depends on the seed and its index only), so one missing shard proves what several would."""
    out = tmp_path / "resume"
    out.mkdir()
    for done in sorted(recorded_corpus.glob("*.jsonl.gz"))[:2]:
        (out / done.name).write_bytes(done.read_bytes())
    manifest = record_corpus(RecordConfig(out=str(out), trajectories=24, seed=3, shard_size=10))
    assert manifest["shards"] == json.loads((recorded_corpus / "manifest.json").read_text())["shards"]


@pytest.mark.slow
def test_records_100_trajectories_over_50_repos(tmp_path):
    manifest = record_corpus(RecordConfig(out=str(tmp_path), trajectories=100, seed=11))
    assert manifest["trajectories"] == 100 and manifest["repos"] >= 50
    assert len(load_trajectories(str(tmp_path / "*.jsonl.gz"))) == 100
