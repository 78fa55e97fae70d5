"""benchmarks/gpu.py on CPU: its smoke run writes every section with its fields and sane values
(known answers where there are some: float32 on the same device agrees exactly, a random model's
NLL is about ln(vocabulary), KV reuse prefills less, the projections follow from the rates), its
FLOPs count is the shape's, its Phase 0 sizes are the plan's, and without CUDA it stops in one line."""

import functools
import importlib.util
import json
import math
import os
import runpy
import subprocess
import sys

import pytest

from tests.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "benchmarks" / "gpu.py"


@functools.cache
def _module():
    """benchmarks/gpu.py as a module (registered, as its dataclasses need), without running it."""
    spec = importlib.util.spec_from_file_location("gpu_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _run(*args, out):
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--out", str(out)], capture_output=True, text=True, cwd=str(REPO_ROOT)
    )


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu") / "gpu.json"
    r = _run("--smoke", "--no-levanter", out=out)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(out.read_text()), r.stdout


def test_smoke_writes_every_section_and_prints_the_table(smoke):
    report, stdout = smoke
    assert {"scorer", "throughput", "generation", "sft", "sft_levanter"} <= set(report)
    assert report["smoke"] is True and report["device"].startswith("cpu")
    assert report["sft_levanter"] == {"skipped": "--no-levanter"}
    for line in ("scorer bfloat16", "score qwen3_1_7b", "simulate x4", "sft (pytorch)"):
        assert line in stdout


def test_scorer_agreement(smoke):
    s = smoke[0]["scorer"]
    assert s["rows"] == s["rows_scored"] == 2 and s["target_tokens"] > 0
    # The smoke's "device" is the CPU: float32 is the reference itself, bfloat16 differs a little.
    assert s["float32"]["max_abs_token_logprob_diff"] == 0 and s["float32"]["max_abs_row_mean_nll_diff"] == 0
    assert 0 < s["bfloat16"]["max_abs_row_mean_nll_diff"] <= s["bfloat16"]["max_abs_token_logprob_diff"] < 0.5
    assert s["bfloat16"]["rows_compared"] == 2
    # Random weights predict almost uniformly over SmolLM2's 49,152 tokens.
    assert abs(s["reference"]["mean_nll"] - math.log(49152)) < 0.5


def test_scoring_throughput(smoke):
    t = smoke[0]["throughput"]
    assert t["rows"] == 3 and t["dtype"] == "bfloat16"
    for name in ("smollm2_135m", "qwen3_1_7b"):
        m = t[name]
        assert 0 < m["forward_seconds"] <= m["seconds"] and m["peak_memory_mib"] > 0
        assert m["rows_per_s"] == pytest.approx(3 / m["seconds"])
        assert m["tokens_per_s"] == pytest.approx(m["rows_per_s"] * m["row_tokens"]["mean"])
        assert m["probe_projection_s"] == pytest.approx(100 * 10 / m["rows_per_s"])
        assert m["row_tokens"]["min"] <= m["row_tokens"]["mean"] <= m["row_tokens"]["max"] <= 4096


def test_simulator_generation(smoke):
    g = smoke[0]["generation"]
    assert g["writeup_seconds_per_turn"] == 0.74 and g["new_tokens"] == 4
    assert [b["prompts"] for b in g["batched"]] == [1, 2, 4]
    for b in g["batched"]:
        assert 0 < b["generated_tokens"] <= b["prompts"] * g["new_tokens"] and b["mean_prompt_tokens"] > 0
        assert b["observations_per_s"] == pytest.approx(b["prompts"] / b["seconds"])
        assert b["seconds_per_turn"] == pytest.approx(b["seconds"] / b["prompts"])
    s = g["session"]
    reuse, plain = s["reuse"]["prefilled_tokens"], s["no_reuse"]["prefilled_tokens"]
    assert len(reuse) == len(plain) == s["turns"] == 3
    assert reuse[0] == plain[0] and all(r < p for r, p in zip(reuse[1:], plain[1:], strict=True))
    assert plain == sorted(plain)  # a session's prompt grows turn by turn


def test_sft_step(smoke):
    s = smoke[0]["sft"]
    assert s["backend"] == "pytorch" and "64 MiB" in s["backend_note"] and s["precision"] == "p=f32,c=bfloat16"
    assert s["tokens_per_s"] > 0 and s["mfu"] is None and s["peak_flops"] is None  # no peak for a CPU
    assert len(s["step"]["seconds"]) == 3  # one untimed, two timed
    grid = s["phase0_grid"]
    assert grid["plan_tpu_request"] == {"10K": "v5p-8", "100K": "v5p-16", "1M": "v5p-32"}
    expected = 3 * 1_110_000 * grid["tokens_per_row"] / s["tokens_per_s"] / 3600
    assert grid["gpu_hours_total"] == pytest.approx(expected)
    assert 0 < grid["tokens_per_row"] <= 8191


def test_flops_count_the_shapes_matmul_parameters():
    """6 N of the formula is the model's own matmul parameters (LM head counted once, embedding
    lookup not), counted on the meta device: Qwen3-1.7B's 1.4B non-embedding plus its 311M head."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    gpu = _module()
    with torch.device("meta"):
        model = Qwen3ForCausalLM(Qwen3Config(**gpu.QWEN3_1_7B))
    matmul = sum(p.numel() for n, p in model.named_parameters() if p.dim() == 2 and "embed_tokens" not in n)
    head = gpu.QWEN3_1_7B["vocab_size"] * gpu.QWEN3_1_7B["hidden_size"]
    s = 8192
    attention = 12 * 28 * s * 16 * 128
    assert gpu.train_flops_per_token(gpu.QWEN3_1_7B, s) == 6 * (matmul + head) + attention
    assert 1.70e9 < matmul + head < 1.74e9


def test_phase0_sizes_are_the_plans():
    gpu = _module()
    env = dict(os.environ)
    try:
        grid = runpy.run_path(str(REPO_ROOT / "experiments" / "phase0_grid.py"))
    finally:
        os.environ.clear()
        os.environ.update(env)
    assert grid["BATCH"] == gpu.PHASE0_BATCH and grid["TPU"] == gpu.PHASE0_TPU
    assert grid["SCALES"] == gpu.PHASE0_SCALES and len(grid["ARMS"]) == gpu.PHASE0_ARMS
    assert all(grid["recipe"](scale).seq_len == gpu.PHASE0_SEQ_LEN for scale in grid["SCALES"])


def test_without_cuda_it_fails_in_one_line(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible")
    r = _run(out=tmp_path / "gpu.json")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0 and "CUDA" in r.stderr
    assert not (tmp_path / "gpu.json").exists()


@pytest.mark.slow_ci
def test_smoke_levanter_step(tmp_path):
    """A tiny Levanter step on CPU through the project's config, mixed precision p=f32,c=bfloat16."""
    out = tmp_path / "gpu.json"
    r = _run("--smoke", "--only", "sft_levanter", out=out)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads(out.read_text())["sft_levanter"]
    assert s["backend"] == "levanter" and s["tokens_per_s"] > 0 and s["precision"] == "p=f32,c=bfloat16"
    assert s["device_name"] == "cpu" and s["mfu"] is None and s["phase0_grid"]["gpu_hours_total"] > 0


def test_the_phase0_page_quotes_the_measured_wheels():
    """The page's reason for the PyTorch step is the committed measurement of Levanter's wheels."""
    listing = (REPO_ROOT / "benchmarks" / "results" / "levanter-wheels.txt").read_text().splitlines()
    sizes = [int(line.split()[0]) for line in listing[:-1]]
    mib = f"{sum(sizes) / 2**20:.1f} MiB"
    assert listing[-1].startswith(f"total {mib} in {len(sizes)} wheels")
    assert sum(sizes) > 64 * 2**20
    page = " ".join((REPO_ROOT / "docs" / "phase0.md").read_text().split())
    assert f"{len(sizes)} wheels, {mib}" in page
