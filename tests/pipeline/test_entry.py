"""The experiment entry point: the plan names the places the run uses, accelerator steps are
refused off the cluster, and a failing step ends in one line naming its log."""

import os
import subprocess
import sys
from pathlib import Path

from fray.types import ResourceConfig

from terminalworld.pipeline.entry import main, plan
from terminalworld.pipeline.step import FAILURE_LOG, describe_resources, step
from tests.paths import REPO_ROOT


def broken_fn(*, out: str, value: int) -> None:
    raise ValueError(f"boom {value}")


def fine_fn(*, out: str) -> None:
    Path(out).mkdir(parents=True, exist_ok=True)
    Path(out, "done.txt").write_text("ok\n")


def test_plan_and_run_resolve_the_same_prefix(monkeypatch, tmp_path):
    monkeypatch.delenv("MARIN_PREFIX", raising=False)
    h = step("tw-test/fine", fine_fn, version="2026.01.01")
    assert f"output:    {h.path()}\n" in plan([h]) + "\n"
    monkeypatch.setenv("MARIN_PREFIX", str(tmp_path))
    assert f"output:    {tmp_path}/tw-test/fine/2026.01.01\n" in plan([h]) + "\n"
    assert main([h], "test", ["--run"]) == 0
    assert (tmp_path / "tw-test/fine/2026.01.01/done.txt").read_text() == "ok\n"


def test_resources_travel_with_the_step_and_stay_out_of_its_identity():
    local = step("tw-test/r", fine_fn, version="2026.01.01")
    tpu = step("tw-test/r", fine_fn, version="2026.01.01", resources=ResourceConfig.with_tpu("v5p-8"))
    cpu = step("tw-test/r", fine_fn, version="2026.01.01", resources=ResourceConfig.with_cpu())
    gpus = [
        step("tw-test/r", fine_fn, version="2026.01.01", resources=ResourceConfig.with_gpu("H100", count=n))
        for n in (1, 8)
    ]
    described = [describe_resources(h) for h in (local, tpu, cpu, *gpus)]
    assert described == ["local process", "tpu v5p-8", "cpu", "gpu H100", "gpu H100 x8"]
    assert local.fingerprint() == tpu.fingerprint() == cpu.fingerprint() == gpus[1].fingerprint()


def test_a_failing_step_prints_one_line_and_keeps_its_traceback_in_the_log(monkeypatch, tmp_path, capfd):
    monkeypatch.setenv("MARIN_PREFIX", str(tmp_path))
    h = step("tw-test/broken", broken_fn, version="2026.01.01", value=7)
    assert main([h], "test", ["--run"]) == 2
    err = capfd.readouterr().err
    log = tmp_path / "tw-test/broken/2026.01.01" / FAILURE_LOG
    assert "error: step tw-test/broken" in err and f"ValueError: boom 7; traceback in {log}" in err
    assert "Traceback" not in err
    text = log.read_text()
    assert text.startswith("Traceback") and "in broken_fn" in text and "ValueError: boom 7" in text


def test_accelerator_steps_are_refused_off_the_cluster(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "MARIN_PREFIX"} | {"HOME": str(tmp_path)}
    r = subprocess.run(
        [sys.executable, "experiments/sft_echo_1m.py", "--run"], capture_output=True, text=True, cwd=REPO_ROOT, env=env
    )
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: refusing to run 1 accelerator step(s) on this machine")
    assert "checkpoints/terminalworld/full-1M (tpu v5p-32)" in lines[0] and "iris" in lines[0] and "--local" in lines[0]
    assert not any(tmp_path.iterdir())
