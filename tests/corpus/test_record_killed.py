"""A `corpus record` killed by SIGKILL mid-shard (nothing runs at exit: its repository copy, with the
copy's own tmpfs where the host allows one, and its shard's `.tmp` stay on disk) leaves nothing once
the next run has gone: that run removes the dead run's copy and `.tmp` file, and its output is the
bytes of a run that was never killed (issue 22, item 10).

The killed run and the rerun are real CLI processes: a process sweeps a scratch folder once
(`core.scratch`), so an in-process rerun after another recording in the same test process would
sweep nothing."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from terminalworld.cli import main
from terminalworld.core.scratch import remove_tree
from terminalworld.corpus.actions import workspace_root
from terminalworld.env.sandbox import disk_limit_kind

pytestmark = pytest.mark.slow_ci  # three recordings (one killed), about half a minute

RECORD = ["corpus", "record", "--trajectories", "3", "--shard-size", "2", "--seed", "7", "--workers", "1"]
RECORD += ["--min-turns", "4", "--max-turns", "6"]


def cli(out: Path) -> subprocess.Popen:
    """`corpus record` into `out` as a process group of its own."""
    return subprocess.Popen(
        [sys.executable, "-m", "terminalworld.cli", *RECORD, "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def copies_of(pid: int) -> list[Path]:
    """The repository copies process `pid` made where the recorder makes them."""
    return sorted(Path(workspace_root()).glob(f"tw-rec-{pid}-*"))


def mounted(paths: list[Path]) -> list[str]:
    """Those of `paths` that are mount points in this mount namespace."""
    with open("/proc/self/mountinfo") as f:
        points = {line.split()[4] for line in f}
    return [str(p) for p in paths if str(p) in points]


def temporaries(folder: Path) -> list[Path]:
    return sorted(folder.glob(".*.tmp"))


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_corpus_record_killed_mid_shard_leaves_no_copy_and_reruns_byte_identical(tmp_path):
    assert main([*RECORD, "--out", str(tmp_path / "reference")]) == 0
    out = tmp_path / "killed"
    out.mkdir()
    proc = cli(out)
    try:
        deadline = time.monotonic() + 120
        while not any((c / "repo").is_dir() for c in copies_of(proc.pid)):  # the first copy, filled
            assert proc.poll() is None, "the recording ended before a copy appeared"
            assert time.monotonic() < deadline, "no copy appeared"
            time.sleep(0.005)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        left = copies_of(proc.pid)
        # What the kill left for the next run: the copy (on its own tmpfs, where copies get one) and the .tmp.
        assert left and temporaries(out) and not (out / "manifest.json").exists()
        assert mounted(left) == ([str(c) for c in left] if disk_limit_kind() == "tmpfs" else [])
        rerun = cli(out)
        assert rerun.wait(timeout=300) == 0
        assert copies_of(proc.pid) == [] and mounted(left) == [] and copies_of(rerun.pid) == []
        assert temporaries(out) == [] and files(out) == files(tmp_path / "reference")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for copy in copies_of(proc.pid):  # a failed run must not leave its mounts in /dev/shm
            remove_tree(str(copy))
