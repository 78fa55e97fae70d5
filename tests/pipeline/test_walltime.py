"""A step's wall time is the sum of its attempts, a killed one counted to its last beat."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from terminalworld.errors import InputError
from terminalworld.pipeline.walltime import MAX_STEP_DEPTH, WALL_DIR, attempt, run_walltimes, stage_of, stage_walltimes


def _records(out) -> list[dict]:
    folder = out / WALL_DIR
    return [json.loads((folder / name).read_text()) for name in sorted(os.listdir(folder))]


def test_an_attempt_is_written_at_start_at_each_beat_and_at_its_end(tmp_path):
    out = tmp_path / "probe-eval" / "probe_x" / "v1"
    with attempt(str(out), beat=0.05):
        (start,) = _records(out)
        assert start["state"] == "running" and start["seconds"] < 0.05
        time.sleep(0.4)
        (beat,) = _records(out)
        assert beat["state"] == "running" and beat["seconds"] >= 0.1  # the beats moved it on
    (end,) = _records(out)
    assert end["state"] == "done" and end["seconds"] >= 0.4 and end["started"] == start["started"]
    with pytest.raises(RuntimeError), attempt(str(out), beat=60):  # a file of its own
        raise RuntimeError("the step failed")
    assert [r["state"] for r in _records(out)] == ["done", "failed"]


def test_an_attempt_killed_without_warning_keeps_its_last_beat(tmp_path):
    out = tmp_path / "checkpoints" / "full-x1" / "v1"
    child = textwrap.dedent(
        """
        import sys, time
        from terminalworld.pipeline.walltime import attempt
        with attempt(sys.argv[1], beat=0.1):
            print("in", flush=True)
            time.sleep(60)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", child, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "in"
        time.sleep(1.0)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
    (record,) = _records(out)
    assert record["state"] == "running" and 0.7 <= record["seconds"] <= 1.5


def _write(prefix, step, version, name, record):
    folder = prefix / step / version / WALL_DIR
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(record))


def test_a_stopped_attempt_does_not_count_the_time_it_was_stopped(tmp_path):
    out = tmp_path / "checkpoints" / "full-x3" / "v1"
    child = textwrap.dedent(
        """
        import sys, time
        from terminalworld.pipeline.walltime import attempt
        with attempt(sys.argv[1], beat=0.1, stop_after=0.5):
            print("in", flush=True)
            sys.stdin.readline()
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", child, str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "in"
        time.sleep(0.5)
        proc.send_signal(signal.SIGSTOP)
        time.sleep(3.0)
        proc.send_signal(signal.SIGCONT)
        time.sleep(0.5)
        proc.communicate("\n", timeout=30)
    finally:
        proc.kill()
    (record,) = _records(out)
    # About 1 s of work around 3 s stopped: the stop is kept apart, one beat of it counted.
    assert record["state"] == "done" and 2.6 <= record["stopped"] <= 3.5 and 0.8 <= record["seconds"] <= 1.8


def test_a_runs_walltimes_sum_each_steps_attempts_by_stage(tmp_path):
    v = "2026.12.06.2"
    for step, version, name, started, seconds, state in [
        ("checkpoints/terminalworld/full-x1-s1", v, "a.json", "2026-12-06T04:01:21+00:00", 600.0, "running"),
        ("checkpoints/terminalworld/full-x1-s1", v, "b.json", "2026-12-06T05:10:19+00:00", 1584.8, "done"),
        ("probe-eval/probe_base", v, "a.json", "2026-12-06T05:36:44+00:00", 2742.3, "done"),
        ("terminalworld/corpus/recorded", v, "a.json", "2026-12-06T03:39:50+00:00", 1146.4, "done"),
        ("agent-eval/heldout-tasks/base", v, "a.json", "2026-12-06T09:00:00+00:00", 60.0, "running"),
        ("probe-eval/probe_base", "2026.12.04.1", "a.json", "2026-12-04T00:00:00+00:00", 9e9, "done"),
    ]:
        _write(tmp_path, step, version, name, {"started": started, "seconds": seconds, "state": state})
    rows = run_walltimes(str(tmp_path), v)
    assert rows == [
        {"step": "agent-eval/heldout-tasks/base", "stage": "agent", "attempts": 1, "seconds": 60.0, "finished": False},
        {
            "step": "checkpoints/terminalworld/full-x1-s1",
            "stage": "sft",
            "attempts": 2,
            "seconds": 2184.8,
            "finished": True,
        },
        {"step": "probe-eval/probe_base", "stage": "score", "attempts": 1, "seconds": 2742.3, "finished": True},
        {
            "step": "terminalworld/corpus/recorded",
            "stage": "record",
            "attempts": 1,
            "seconds": 1146.4,
            "finished": True,
        },
    ]
    stages = stage_walltimes(rows)
    assert [(s["stage"], s["seconds"]) for s in stages] == [
        ("record", 1146.4),
        ("sft", 2184.8),
        ("score", 2742.3),
        ("agent", 60.0),
    ]


def test_each_attempt_keeps_the_load_it_ran_under_and_a_stage_its_weighted_mean(tmp_path):
    out = tmp_path / "sim-eval" / "tier1" / "base" / "v1"
    with attempt(str(out), beat=60):
        pass
    (record,) = _records(out)
    assert record["load"] >= 0 and record["cpus"] == os.cpu_count()
    v = "v2"
    for step, name, seconds, load in [
        ("probe-eval/probe_a", "a.json", 100.0, 1.0),
        ("probe-eval/probe_a", "b.json", 300.0, 3.0),
        ("probe-eval/probe_b", "a.json", 600.0, None),  # written before attempts kept their load
    ]:
        extra = {} if load is None else {"load": load, "cpus": 2}
        started = "2026-12-06T01:00:00+00:00" if name == "b.json" else "2026-12-06T00:00:00+00:00"
        record = {"started": started, "seconds": seconds, "state": "done"}
        _write(tmp_path, step, v, name, record | extra)
    rows = run_walltimes(str(tmp_path), v)
    assert [r.get("load") for r in rows] == [2.5, None]  # (100 x 1 + 300 x 3) / 400
    assert stage_walltimes(rows) == [{"stage": "score", "seconds": 1000.0, "load": 2.5}]
    from terminalworld.report.pilot import walltime_blocks
    from terminalworld.report.tables import to_markdown

    table = to_markdown(walltime_blocks({"steps": rows, "stages": stage_walltimes(rows)}))
    assert "| stage | steps | attempts | wall time | mean load |" in table and "| score | 2 | 3 | 17m | 2.5 |" in table


def test_every_step_name_of_every_plan_is_within_the_glob_depth():
    plans = json.loads((Path(__file__).with_name("plans.json")).read_text())
    names = {s["step"].split("@")[0] for steps in plans.values() for s in steps}
    assert max(n.count("/") + 1 for n in names) == MAX_STEP_DEPTH


def test_a_record_that_is_not_an_attempt_is_refused_by_name(tmp_path):
    _write(tmp_path, "sim-eval/tier1/base", "v1", "a.json", {"started": "x", "seconds": -1, "state": "done"})
    with pytest.raises(InputError, match=r"sim-eval/tier1/base/v1/\.wall/a\.json: not a step attempt"):
        run_walltimes(str(tmp_path), "v1")


@pytest.mark.parametrize(
    ("step", "stage"),
    [
        ("terminalworld/tasks/train-ladder", "record"),
        ("terminalworld/tokenized/full-pilot", "record"),
        ("heldout/probe_heldout_80", "record"),
        ("checkpoints/terminalworld/base-control", "sft"),
        ("sim-eval/tier3/full-x9-s1-as-agent", "sim"),
        ("terminalworld/reports/pilot", "report"),
        ("terminalworld/hf-eval-sets", "report"),
    ],
)
def test_stage_of(step, stage):
    assert stage_of(step) == stage


def test_the_walltime_command_prints_each_step_and_each_stage(tmp_path, capsys):
    from terminalworld.cli import main

    _write(
        tmp_path,
        "checkpoints/terminalworld/full-x1-s1",
        "v1",
        "a.json",
        {"started": "t0", "seconds": 600.0, "state": "running"},
    )
    _write(
        tmp_path,
        "checkpoints/terminalworld/full-x1-s1",
        "v1",
        "b.json",
        {"started": "t1", "seconds": 3300.0, "state": "done"},
    )
    _write(tmp_path, "probe-eval/probe_base", "v1", "a.json", {"started": "t0", "seconds": 45.0, "state": "running"})
    assert main(["walltime", "--prefix", str(tmp_path), "--version", "v1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["checkpoints/terminalworld/full-x1-s1", "sft", "2", "attempts", "1h", "05m", "done"]
    assert out[1].split() == ["probe-eval/probe_base", "score", "1", "attempts", "45s", "not", "finished"]
    assert out[-1] == "sft 1h 05m  score 45s  total 1h 06m"
    assert main(["walltime", "--prefix", str(tmp_path), "--version", "v2"]) == 2
    assert "no timed step of version v2" in capsys.readouterr().err
