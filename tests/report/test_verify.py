"""Recomputing a snapshot's reports from its rows (`report.verify`): the committed demo snapshot
recomputes, and a changed figure, a missing row file, a link, a gzip bomb and a folder that is not
a snapshot each get the answer they should."""

import gzip
import json
import shutil
from pathlib import Path

import pytest

from terminalworld.errors import InputError
from terminalworld.report import verify
from tests.report.conftest import SNAPSHOT

PROBE = "terminalworld/reports/world-model-probe@2026.12.03"
ECHO = "terminalworld/reports/echo-miniature@2026.12.03"
PROBE_DIR = Path("terminalworld/reports/world-model-probe/2026.12.03")


@pytest.fixture(scope="module")
def demo_results() -> dict[str, dict]:
    return {r["report"]: r for r in verify.verify_snapshot(str(SNAPSHOT))}


def _probe(snapshot: Path) -> dict:
    """The world-model probe report's result in a verify of `snapshot`."""
    [probe] = [r for r in verify.verify_snapshot(str(snapshot)) if r["report"] == PROBE]
    return probe


@pytest.fixture
def demo_copy(tmp_path) -> Path:
    dest = tmp_path / "snap"
    shutil.copytree(SNAPSHOT, dest)
    return dest


def test_the_demo_snapshot_recomputes_from_its_rows(demo_results):
    probe, echo = demo_results[PROBE], demo_results[ECHO]
    assert (probe["status"], probe["compared"]) == ("recomputed", ["report.json", "metrics.json"])
    assert (echo["status"], echo["compared"]) == ("recomputed", ["echo_report.json"])
    # The probe's report.md was rendered by an earlier layout of the same figures, and says so.
    assert probe["rendering"].startswith("report.md: another layout")
    assert echo["rendering"] == "echo_report.md: the same"


def test_a_changed_figure_is_named_with_both_values(demo_copy):
    metrics = demo_copy / PROBE_DIR / "metrics.json"
    doc = json.loads(metrics.read_text())
    true = doc["checkpoints"][1]["median_ppl"]
    doc["checkpoints"][1]["median_ppl"] = true * 0.9
    metrics.write_text(json.dumps(doc))
    probe = _probe(demo_copy)
    assert probe["status"] == "differs"
    assert probe["differences"] == [
        f"metrics.json.checkpoints[1].median_ppl: {true * 0.9!r} stored, {true!r} recomputed"
    ]
    assert verify.print_verify(verify.VerifyConfig(str(demo_copy))) == 1


def test_a_missing_row_file_makes_the_report_not_recomputable_by_its_logical_path(demo_copy):
    [scores] = (demo_copy / "sim-ppl-eval/sim_ppl_user/2026.12.03").glob("*.jsonl.gz")
    scores.unlink()
    probe = _probe(demo_copy)
    assert (probe["status"], probe["why"]) == ("not recomputable", "inputs not in the snapshot")
    assert probe["missing"] == ["{MARIN_PREFIX}/sim-ppl-eval/sim_ppl_user/2026.12.03/sim_ppl_user.jsonl"]


def test_links_are_not_followed_and_a_gzip_bomb_stops(demo_copy, tmp_path, monkeypatch):
    outside = tmp_path / "outside.jsonl"
    outside.write_text("secret\n")
    (demo_copy / "heldout" / "link.jsonl").symlink_to(outside)
    (demo_copy / "heldout" / "linked-folder").symlink_to(tmp_path, target_is_directory=True)
    restored = tmp_path / "restored"
    verify.restore_rows(demo_copy, restored)
    assert not (restored / "heldout" / "link.jsonl").exists()
    assert not (restored / "heldout" / "linked-folder").exists()
    (demo_copy / "heldout" / "bomb.jsonl.gz").write_bytes(gzip.compress(b"\0" * (3 << 20)))
    monkeypatch.setattr(verify, "MAX_ROW_BYTES", 2 << 20)
    with pytest.raises(InputError, match=r"bomb\.jsonl\.gz: decompresses past 2,097,152 bytes"):
        verify.restore_rows(demo_copy, tmp_path / "again")


def test_a_report_without_its_figures_file_is_not_recomputable(demo_copy):
    (demo_copy / PROBE_DIR / "metrics.json").unlink()
    probe = _probe(demo_copy)
    assert (probe["status"], probe["why"]) == ("not recomputable", "figures files missing: metrics.json")


def test_a_recorded_input_that_climbs_out_of_the_snapshot_is_not_read(demo_copy):
    record = demo_copy / PROBE_DIR / ".artifact.json"
    doc = json.loads(record.read_text())
    doc["config"]["scores"]["user"] = "{MARIN_PREFIX}/../../../etc/passwd"
    record.write_text(json.dumps(doc))
    probe = _probe(demo_copy)
    assert probe["status"] == "not recomputable" and probe["why"].startswith("an input outside the snapshot")


def test_a_folder_that_is_not_a_snapshot_is_refused(tmp_path):
    with pytest.raises(InputError, match="not a snapshot"):
        verify.verify_snapshot(str(tmp_path))


def test_differences_are_found_by_key_with_a_float_tolerance():
    stored = {"a": 1.0, "b": [1, 2], "c": {"d": "x"}, "e": 1}
    assert list(verify.differ(stored, {**stored, "a": 1.0 + 1e-12}, "f")) == []
    assert list(verify.differ(stored, {**stored, "a": 1.1, "b": [1], "c": {}}, "f")) == [
        "f.a: 1.0 stored, 1.1 recomputed",
        "f.b: 2 items stored, 1 recomputed",
        "f.c.d: only in the stored one",
    ]


def test_a_recorded_config_gets_back_the_order_the_step_listed_its_inputs():
    # The record sorts a config's keys; a report lists its models in the order of its inputs.
    deps = ["scores/z@v", "scores/a@v", "grades/z@v"]
    config = {
        "scores": {"a": "{P}/scores/a/v/a.jsonl", "z": "{P}/scores/z/v/z.jsonl"},
        "grades": {"z": "{P}/grades/z/v/summary.json"},
        "base": "z",
    }
    again = verify._in_dep_order(config, deps)
    assert list(again["scores"]) == ["z", "a"] and again["base"] == "z"


def test_the_pilots_kept_figures_are_checked_for_what_they_must_satisfy():
    steps = [{"step": "probe-eval/probe_a", "stage": "score", "attempts": 1, "seconds": 60.0, "finished": True}]
    cov = {"scales": {"x1-s1": {"loss_tokens": 10, "real_tokens": 20}}}
    good = {"walltime": {"steps": steps, "stages": [{"stage": "score", "seconds": 60.0}]}, "training": {"full": cov}}
    assert verify.pilot_kept_checks(good) == [
        "walltime: stages are the sums of their steps",
        "training.full: loss tokens within real tokens at every scale",
    ]
    bad = {
        "walltime": {"steps": steps, "stages": [{"stage": "score", "seconds": 90.0}]},
        "training": {"full": {"scales": {"x1-s1": {"loss_tokens": 30, "real_tokens": 20}}}},
    }
    assert [c for c in verify.pilot_kept_checks(bad) if c.startswith("differs")] == [
        "differs: walltime.stages",
        "differs: training.full.x1-s1: loss tokens outside 0..real tokens",
    ]
