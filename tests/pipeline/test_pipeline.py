import os
import subprocess
import sys

from terminalworld.pipeline import artifacts
from tests.paths import REPO_ROOT


def _plan(script, **env):
    full_env = {k: v for k, v in os.environ.items() if k != "MARIN_PREFIX"} | env
    return subprocess.run([sys.executable, script], capture_output=True, text=True, cwd=REPO_ROOT, env=full_env)


def test_sft_echo_1m_plan_shows_pinned_gcs_paths_and_starts_nothing(tmp_path):
    r = _plan("experiments/sft_echo_1m.py", HOME=str(tmp_path))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "checkpoints/terminalworld/full-1M@2026.12.07" in out
    assert "output:    gs://marin-us-east5/checkpoints/terminalworld/full-1M/2026.12.07" in out
    assert "output:    gs://marin-us-east5/terminalworld/tokenized/full-1M/2026.11.02" in out
    assert "resources: tpu v5p-32" in out and '"batch_size": 64' in out and '"learning_rate": 2e-05' in out
    assert '"init_from": "Qwen/Qwen3-1.7B-Base"' in out and '"max_seq_len": 32768' in out
    # The corpus-scale stages are Zephyr jobs whose workers the plan shows under their CPU drivers.
    zephyr = [line.strip() for line in out.splitlines() if line.strip().startswith("zephyr:")]
    assert zephyr == [
        "zephyr:    128 workers x (1 cpu, 4g), 512 shards",
        "zephyr:    100 workers x (1 cpu, 8g), shards of 10,000 rows",
    ]
    assert not any(tmp_path.iterdir())  # nothing was written, nothing ran


def test_marin_prefix_remaps_the_same_layout(tmp_path):
    r = _plan("experiments/sft_echo_1m.py", MARIN_PREFIX=str(tmp_path))
    assert f"output:    {tmp_path}/checkpoints/terminalworld/full-1M/2026.12.07" in r.stdout
    assert not any(tmp_path.iterdir())


def test_scale_names():
    assert [artifacts.scale_name(n) for n in (10_000, 100_000, 1_000_000, 40)] == ["10K", "100K", "1M", "40"]
    assert artifacts.heldout(100) == "heldout/probe_heldout_100" and artifacts.scores_file("base") == "probe_base.jsonl"


def test_phase0_swebench_plan_pins_the_slice_outputs_and_secret_and_starts_nothing(tmp_path):
    r = _plan("experiments/phase0_swebench.py", HOME=str(tmp_path))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    grades = [line for line in out.splitlines() if line.startswith("agent-eval/")]
    # Base and six agent checkpoints on SWE-bench; base and the two 1M agents on Terminal-Bench 2.0.
    assert len(grades) == 10 and "agent-eval/swebench-verified-100/user-1M@2026.12.03" not in grades
    assert "output:    gs://marin-us-east5/agent-eval/swebench-verified-100/full-1M/2026.12.03" in out
    assert "DCAgent2/swebench-verified-random-100-folders@0c553bd6d05d451907afb8db31dba84759ccc993, 100 ids" in out
    assert "resources: gpu H100" in out and '"secrets": ["DAYTONA_API_KEY"]' in out
    assert '"n_attempts": 3' in out and '"agent": "terminus-2"' in out and '"temperature": 0.6' in out
    assert not any(tmp_path.iterdir())
    ids = [line for line in (REPO_ROOT / "experiments" / "swebench_verified_100.txt").read_text().splitlines()]
    ids = [i for i in ids if i and not i.startswith("#")]
    assert len(ids) == len(set(ids)) == 100 and all("__" in i and i.rsplit("-", 1)[1].isdigit() for i in ids)


def test_echo_grpo_plan_pins_the_papers_recipe_and_starts_nothing(tmp_path):
    r = _plan("experiments/echo_grpo.py", HOME=str(tmp_path))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for arm in ("grpo", "echo", "env-only"):
        assert f"output:    gs://marin-us-east5/checkpoints/terminalworld/rl/{arm}-full-1M/2026.12.03" in out
    assert out.count("resources: gpu H100 x8") == 3
    assert out.count('"lam": 0.05') == 2 and out.count('"lam": 0.0,') == 1 and '"env_only": true' in out
    for value in ('"n_samples_per_prompt": 16', '"train_batch_size": 16', '"learning_rate": 1e-06', '"clip": 0.2'):
        assert out.count(value) == 3, value
    assert out.count('"temperature": 0.8') == 3 and out.count('"strategy": "megatron"') == 3
    assert '"per_repo": 8' in out and "checkpoints/terminalworld/full-1M@2026.12.07" in out
    assert not any(tmp_path.iterdir())


def test_phase05_plan_grades_every_simulator_at_three_tiers_on_gpu_and_starts_nothing(tmp_path):
    r = _plan("experiments/phase05_closed_loop.py", HOME=str(tmp_path))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    models = ["base"] + [f"{arm}-{scale}" for arm in ("full", "user") for scale in ("10K", "100K", "1M")]
    for model in models:
        for tier in (1, 2, 3):
            assert f"output:    gs://marin-us-east5/sim-eval/tier{tier}/{model}/2026.12.03" in out
    assert out.count("resources: gpu H100") == 21 and out.count('"backend": "vllm"') == 21
    assert "terminalworld/probes@2026.12.03" in out and '"n": 500' in out
    assert "terminalworld/tasks/closed-loop@2026.12.03" in out and "assistant-" not in out.split("sim-eval")[1]
    assert '"chat_template_from": "gs://marin-us-east5/checkpoints/terminalworld/full-10K/2026.12.07/hf"' in out
    assert not any(tmp_path.iterdir())
