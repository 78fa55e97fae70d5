"""Each model process takes its share of the cores it actually has: the affinity mask, capped by
the cgroup quota, divided among the busy model processes beside it; the share reaches torch in a
real server process and in the scorer."""

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest

from terminalworld.core import threads
from terminalworld.core.assets import load_tokenizer, tiny_qwen3


def test_the_budget_divides_the_cores_and_a_parents_share_wins(monkeypatch):
    monkeypatch.delenv(threads.THREADS_ENV, raising=False)
    cores = threads.available_cores()
    assert threads.thread_budget() == cores and threads.thread_budget(sharing=cores + 5) == 1
    assert threads.thread_budget(sharing=2) == max(1, cores // 2)
    monkeypatch.setenv(threads.THREADS_ENV, "1")
    assert threads.thread_budget(sharing=1) == 1
    monkeypatch.setenv(threads.THREADS_ENV, "999")
    assert threads.thread_budget() == cores  # never more than the cores it has
    for bad in ("two", "0"):
        monkeypatch.setenv(threads.THREADS_ENV, bad)
        with pytest.raises(ValueError, match=threads.THREADS_ENV):
            threads.thread_budget()
    with pytest.raises(ValueError, match="sharing"):
        threads.thread_budget(sharing=0)


@pytest.mark.parametrize(("cpu_max", "cores"), [("50000 100000\n", 1), ("150000 100000\n", 2), ("max 100000\n", None)])
def test_the_cgroup_quota_caps_the_cores(tmp_path, monkeypatch, cpu_max, cores):
    (tmp_path / "cpu.max").write_text(cpu_max)
    monkeypatch.setattr(threads, "CGROUP_CPU_MAX", str(tmp_path / "cpu.max"))
    assert threads._cgroup_cores() == cores
    affinity = len(os.sched_getaffinity(0))
    assert threads.available_cores() == (min(affinity, cores) if cores else affinity)


def test_a_process_pinned_to_one_core_counts_one():
    code = "from terminalworld.core.threads import available_cores; print(available_cores())"
    out = subprocess.run(
        [sys.executable, "-c", code],
        preexec_fn=lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}),
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if k != threads.THREADS_ENV},
    )
    assert out.stdout.strip() == "1"


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    """A tiny Qwen3 over SmolLM2's vocabulary, saved with SmolLM2's tokenizer and chat template."""
    folder = tmp_path_factory.mktemp("tiny")
    tok = load_tokenizer("smollm2")
    tiny_qwen3(len(tok)).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def _health(url: str, proc: subprocess.Popen) -> dict:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        try:
            with urllib.request.urlopen(url.removesuffix("/v1") + "/health", timeout=5) as r:
                return json.loads(r.read())
        except OSError:
            time.sleep(0.5)
    raise AssertionError("the server did not answer")


@pytest.mark.parametrize(("sharing", "given"), [(1, None), (2, None), (1, "1")])
def test_a_server_process_sets_its_share_in_torch(tiny_folder, sharing, given):
    env = {k: v for k, v in os.environ.items() if k != threads.THREADS_ENV} | (
        {threads.THREADS_ENV: given} if given else {}
    )
    argv = [sys.executable, "-m", "terminalworld.agent.serve", "--model", str(tiny_folder), "--sharing", str(sharing)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read()
        health = _health(url, proc)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    cores = threads.available_cores()
    expected = 1 if given else max(1, cores // sharing)
    assert (health["torch_threads"], health["interop_threads"]) == (expected, 1)


def test_the_scorer_sets_its_share_in_torch(tiny_folder, fixtures, tmp_path, monkeypatch):
    import torch

    from terminalworld.core.formats import load_trajectories
    from terminalworld.core.heldout import heldout_row
    from terminalworld.eval.scoring import ScoreConfig, score

    row = heldout_row(load_trajectories(str(fixtures / "adp_swe-zero-12m/sample_raw.json"))[1], 3)
    row["prefix"] = [[c, e[:200]] for c, e in row["prefix"]]
    heldout = tmp_path / "heldout.jsonl"
    heldout.write_text(json.dumps(row) + "\n")
    before = torch.get_num_threads()
    try:
        for given, expected in (("1", 1), (None, threads.available_cores())):
            torch.set_num_threads(7)  # what a neighbour-blind default might have left
            if given:
                monkeypatch.setenv(threads.THREADS_ENV, given)
            else:
                monkeypatch.delenv(threads.THREADS_ENV, raising=False)
            out = tmp_path / f"scores-{given}.jsonl"
            summary = score(ScoreConfig(model_path=str(tiny_folder), heldout=str(heldout), out=str(out)))
            assert summary["n_scored"] == 1 and torch.get_num_threads() == expected
    finally:
        torch.set_num_threads(before)


def test_a_library_call_lowers_an_oversubscribed_count_and_keeps_a_chosen_one(monkeypatch):
    import torch

    before = torch.get_num_threads()
    monkeypatch.delenv(threads.THREADS_ENV, raising=False)
    try:
        for chosen, expected in ((threads.available_cores() + 3, threads.available_cores()), (1, 1)):
            monkeypatch.setattr(threads, "_configured", False)
            torch.set_num_threads(chosen)
            threads.ensure_threads()
            assert torch.get_num_threads() == expected
            torch.set_num_threads(chosen)
            assert threads.ensure_threads() is None and torch.get_num_threads() == chosen  # once per process
    finally:
        torch.set_num_threads(before)
