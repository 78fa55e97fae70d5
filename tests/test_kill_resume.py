"""Killed and rerun, the long commands give the bytes of an uninterrupted run, and the rerun removes
what the killed one left (`.tmp` files of killed writes, a line cut in the scores' partial file).

Each command runs in a subprocess that is sent SIGKILL while it writes (its temporary file is on
disk); the rerun is in process, and its output is compared with a run that was never killed."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from terminalworld.cli import main

pytestmark = pytest.mark.slow_ci  # three subprocess runs, each killed, each rerun in process


def start(argv) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "terminalworld.cli", *map(str, argv)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def kill_when(proc: subprocess.Popen, ready, timeout: float = 300) -> None:
    """SIGKILL `proc` as soon as `ready()` holds; fails if the process ends first."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None, "the command finished before it could be killed"
        assert time.monotonic() < deadline, "the command never reached the point to kill it at"
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def temporaries(folder: Path) -> list[Path]:
    return sorted(folder.glob(".*.tmp"))


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def trajectories(fixtures, tmp_path_factory):
    base = json.loads((fixtures / "adp_swe-zero-12m" / "sample_raw.json").read_text())
    rows = [{**base[i % 3], "instance_id": f"org{i}__repo-{i}", "repo": f"org{i}/repo"} for i in range(40)]
    path = tmp_path_factory.mktemp("in") / "trajectories.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_render_killed_while_writing_reruns_byte_identical(trajectories, tmp_path):
    render = ["render", "--tokenizer", "qwen3", "--arm", "user", "--in", trajectories]
    assert main([*map(str, render), "--out", str(tmp_path / "reference" / "rows.jsonl.gz")]) == 0
    out = tmp_path / "killed"
    out.mkdir()
    kill_when(start([*render, "--out", out / "rows.jsonl.gz"]), lambda: bool(temporaries(out)))
    assert temporaries(out) and not (out / "rows.jsonl.gz").exists()  # killed mid-write: only the .tmp
    assert main([*map(str, render), "--out", str(out / "rows.jsonl.gz")]) == 0
    assert files(out) == files(tmp_path / "reference")  # no .tmp left, the same bytes


@pytest.fixture(scope="module")
def model(trajectories, tmp_path_factory):
    """A tiny random Qwen3 over the Qwen3 tokenizer, saved as a checkpoint folder, and held-out rows
    of the real sample (any weights serve: the check is resumed against uninterrupted)."""
    from terminalworld.core.assets import load_tokenizer, tiny_qwen3
    from terminalworld.core.formats import load_trajectories
    from terminalworld.core.heldout import heldout_row

    folder = tmp_path_factory.mktemp("model")
    tok = load_tokenizer("qwen3")
    tiny_qwen3(len(tok)).save_pretrained(folder)
    tok.save_pretrained(folder)
    heldout = folder.parent / "heldout.jsonl"
    trajs = load_trajectories(str(trajectories))[:8]
    heldout.write_text("".join(json.dumps(heldout_row(t, 2)) + "\n" for t in trajs))
    return folder, heldout


def test_score_killed_mid_run_resumes_byte_identical(model, tmp_path):
    folder, heldout = model
    score = ["score", "--model-path", folder, "--heldout", heldout, "--model-name", "tiny"]
    assert main([*map(str, score), "--out", str(tmp_path / "reference" / "s.jsonl")]) == 0
    out = tmp_path / "killed"
    out.mkdir()
    partial = out / "s.jsonl.partial"

    def two_rows_scored() -> bool:
        return partial.exists() and partial.read_bytes().count(b"\n") >= 2

    kill_when(start([*score, "--out", out / "s.jsonl"]), two_rows_scored)
    with partial.open("ab") as f:
        f.write(b'{"instance_id": "org9__re')  # what a kill in the middle of an append leaves
    assert main([*map(str, score), "--out", str(out / "s.jsonl")]) == 0
    assert files(out) == files(tmp_path / "reference")  # the partial file is gone, the same bytes


def test_corpus_record_killed_mid_shard_reruns_byte_identical(tmp_path):
    record = ["corpus", "record", "--trajectories", "4", "--shard-size", "2", "--seed", "5", "--workers", "1"]
    assert main([*record, "--out", str(tmp_path / "reference")]) == 0
    out = tmp_path / "killed"
    out.mkdir()

    def second_shard_started() -> bool:
        return any("00001-of" in p.name for p in temporaries(out))

    kill_when(start([*record, "--out", out]), second_shard_started)
    assert temporaries(out) and not (out / "manifest.json").exists()
    assert main([*record, "--out", str(out)]) == 0
    assert files(out) == files(tmp_path / "reference")
