"""The quiet SFT rate the pilot's plan uses is read from its own log by `benchmarks/pilot_sft_rate.py`:
only whole steps inside the window count, never the first after a (re)start (it compiles the step)."""

import json
import runpy
import statistics

import pytest

from tests.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "benchmarks" / "pilot_sft_rate.py"
PREFIX = "I20261206 {} 1398 tqdm_loggable.tqdm_logging Progress on:train {}.0it/27.0it rate:9.9s/it"


def test_step_times_keep_whole_consecutive_steps_inside_the_window():
    step_times = runpy.run_path(str(SCRIPT))["step_times"]
    lines = [
        PREFIX.format("12:00:00", 9),  # a restart: the next line includes compiling
        "I20261206 12:01:00 1398 levanter.trainer First train step completed in 249.5s (step 9)",
        PREFIX.format("12:04:10", 10),
        PREFIX.format("12:07:30", 11),
        PREFIX.format("12:10:50", 12),
        PREFIX.format("12:20:00", 14),  # a gap in the steps: not one step's time
        PREFIX.format("12:23:20", 15),
        "I20261206 12:30:00 1398 levanter.main.train_lm Resuming training from step 15",  # killed, restarted
        PREFIX.format("12:34:00", 16),  # one step after the last line, but across a restart
        PREFIX.format("12:37:20", 17),
    ]
    got = step_times(lines, "12:04:00", "12:40:00")
    assert [(s["step"], s["seconds"]) for s in got] == [(11, 200.0), (12, 200.0), (15, 200.0), (17, 200.0)]
    assert step_times(lines, "12:05:00", "12:40:00")[0]["step"] == 12


@pytest.mark.parametrize(("name", "mp"), [("pilot_sft_rate", "f32"), ("pilot_sft_rate_bf16", "p=f32,c=bfloat16")])
def test_each_committed_rate_is_the_median_of_its_steps(name, mp):
    doc = json.loads((REPO_ROOT / "benchmarks" / "results" / f"{name}.json").read_text())
    seconds = sorted(s["seconds"] for s in doc["steps"])
    assert doc["mp"] == mp and len(seconds) >= 5
    assert doc["median_seconds_per_step"] == statistics.median(seconds)
    assert doc["tokens_per_s"] == round(8192 / doc["median_seconds_per_step"], 1)
    assert max(doc["load"]) < 2.5  # the pilot alone on 2 cores
