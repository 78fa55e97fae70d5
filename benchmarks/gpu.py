"""First figures on a GPU: scorer agreement and throughput, simulator generation, one SFT step.

    python benchmarks/gpu.py --out benchmarks/results/gpu.json        # on a CUDA device
    uv run python benchmarks/gpu.py --smoke --out /tmp/gpu-smoke.json # every measurement on CPU, tiny shapes

One process, one JSON (written atomically after each section, so a run cut short keeps the sections
it finished) and a printed table. Without a CUDA device and without `--smoke` it stops at once, in
one line. Every model has seeded random weights at a real model's shape: the real weights cannot
travel to a GPU machine that has no network (see below), and none of these figures depends on
what the weights have learned, except the agreement's size (random weights predict almost
uniformly, so their bfloat16 gap is a lower bound on a trained model's).

1. `scorer`: the real fixture rows (SWE-ZERO and nebius, each cut to its longest context within
   8,000 tokens, inside SmolLM2's 8,192-token window, as benchmarks/scoring.py cuts them) scored by the project's scorer
   (`eval.scoring.score_rows` with `HFScorer`) with a SmolLM2-135M-shaped Llama, on CPU in float32
   (the reference) and on the device in float32 and bfloat16: the largest per-token log-probability
   and per-row mean-NLL differences.
2. `throughput`: 100 rows drawn (seeded, with replacement) from those rows, so at their length
   distribution (about 7K tokens), scored in bfloat16 on the device with the scorer's longest-first
   batching, at the SmolLM2-135M and Qwen3-1.7B shapes: rows/s and tokens/s end to end (rendering
   included) and in the forwards alone, peak memory, and the projected time of the write-up's probe
   (100 rows x 10 checkpoints, model loads excluded). Token ids are the SmolLM2 tokenizer's for both.
3. `generation`: the simulator (`sim.backend.Simulator` over `HFGenerator`, bfloat16, greedy) on 1, 8
   and 32 prompts drawn from the fixture sessions' real prefixes, 128 new tokens each: observations/s
   and seconds per simulated turn beside the write-up's 0.74 s; and one session's first turns answered
   in order with and without reusing the KV cache across turns (the recorded observations, not the
   generated ones, follow each turn, so reuse keeps the session up to the observation).
4. `sft`: one SFT step of the Qwen3-1.7B shape at Phase 0's sequence length (8,192) and 10K batch
   (8 sequences, accumulated one at a time), float32 parameters and bfloat16 compute, AdamW: tokens/s,
   model FLOPs utilisation and the GPU-hours of the Phase 0 grid (3 arms x 10K/100K/1M) beside the
   plan's TPU request. In PyTorch (autocast bfloat16, gradient checkpointing as Levanter's default),
   because Levanter cannot travel to the GPU machine: its import closure beyond what that machine
   has is far over 64 MiB (benchmarks/gpu_wheels.sh measures it). `sft_levanter` runs the same step
   through the project's Levanter config (`train.sft.train_lm_config`, mixed precision
   `p=f32,c=bfloat16`) wherever Levanter is installed: a tiny step on CPU under `--smoke`.

   FLOPs per trained token = 6 N + 12 L S H d (PaLM, appendix B): N the parameters in matmuls (the
   LM head's included, embeddings' lookup excluded), L layers, S the sequence length, H heads of
   width d. MFU = tokens/s x that / the device's peak: 989 TFLOP/s dense bfloat16 for H100 and H200.

The GPU machine has PyTorch, JAX with CUDA, transformers and accelerate, no network; anything else
travels with the working tree, 64 MiB in all. This script needs nothing else but the SmolLM2
tokenizer, which `bash benchmarks/gpu_wheels.sh` writes to benchmarks/.gpu/smollm2-tokenizer (it
also measures Levanter's wheels). The machine's Python must be 3.12 or later, as the project's
(an older one stops in one line). The one device command, carrying that folder, smoke first and
bounded at 8 minutes:

    export PYTHONPATH=src; T=benchmarks/.gpu/smollm2-tokenizer; python3 benchmarks/gpu.py --smoke --no-levanter \
      --tokenizer $T --out $OUT/smoke.json && timeout 480 python3 benchmarks/gpu.py --tokenizer $T --out $OUT/gpu.json
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Published shapes (config.json of HuggingFaceTB/SmolLM2-135M and Qwen/Qwen3-1.7B-Base).
SMOLLM2_135M = dict(
    vocab_size=49152,
    hidden_size=576,
    intermediate_size=1536,
    num_hidden_layers=30,
    num_attention_heads=9,
    num_key_value_heads=3,
    max_position_embeddings=8192,
    rope_theta=100000.0,
    rms_norm_eps=1e-5,
    tie_word_embeddings=True,
)
QWEN3_1_7B = dict(
    vocab_size=151936,
    hidden_size=2048,
    intermediate_size=6144,
    num_hidden_layers=28,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    max_position_embeddings=40960,
    rope_theta=1000000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
)
# --smoke: the same families and vocabularies, two layers 32 wide.
TINY = dict(
    hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8
)

# Phase 0 (experiments/phase0_grid.py; tests/test_gpu_benchmark.py holds these to it): rows cut at
# 8,191 tokens, packed into 8,192; batch and TPU slice per scale; three arms.
PHASE0_SEQ_LEN = 8192
PHASE0_BATCH = {"10K": 8, "100K": 32, "1M": 64}
PHASE0_TPU = {"10K": "v5p-8", "100K": "v5p-16", "1M": "v5p-32"}
PHASE0_SCALES = {"10K": 10_000, "100K": 100_000, "1M": 1_000_000}
PHASE0_ARMS = 3
WRITEUP_SECONDS_PER_TURN = 0.74
PROBE_ROWS, PROBE_CHECKPOINTS = 100, 10  # the write-up's probe: base + 9 checkpoints
BACKEND_NOTES = {
    "pytorch": "the Levanter recipe's step in PyTorch: Levanter does not travel to the GPU machine "
    "within 64 MiB (benchmarks/gpu_wheels.sh measures its wheels)",
    "levanter": "the project's Levanter config (train.sft.train_lm_config), Levanter's own tokens/s of its last step",
}
PEAK_BF16_FLOPS = {"H100": 989e12, "H200": 989e12}  # dense, SXM


@dataclasses.dataclass
class Run:
    """What every section shares: where it runs, at which sizes, and the fixture data."""

    smoke: bool
    device: str
    tokenizer: str
    levanter: bool
    rows: list[dict] = dataclasses.field(default_factory=list)  # held-out rows at the probe's length
    sessions: list = dataclasses.field(default_factory=list)  # the fixture trajectories

    def shape(self, full: dict) -> dict:
        return {**full, **TINY} if self.smoke else full


def sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def peak_memory_mib(device: str) -> tuple[float, str]:
    """The section's peak (CUDA: allocated since the last reset) or, on CPU, the process's peak RSS."""
    import torch

    if device == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20, "torch.cuda.max_memory_allocated"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "process peak RSS (whole run so far)"


def reset_peak(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def random_model(family: str, shape: dict, device: str, dtype: str, seed: int = 0):
    """A causal LM of `family` ("llama" or "qwen3") at `shape`, HF's own initialisation, seeded."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

    cls, config = (LlamaForCausalLM, LlamaConfig) if family == "llama" else (Qwen3ForCausalLM, Qwen3Config)
    torch.manual_seed(seed)
    with torch.device(device):
        model = cls(config(**shape))
    return model.to(getattr(torch, dtype)).eval()


def load_fixtures(run: Run) -> None:
    """The held-out rows (each trajectory cut to its longest context within the window) and the
    whole sessions; under --smoke, observations cut to 200 characters and rows to 4,096 tokens."""
    from benchmarks.scoring import NEBIUS, build_heldout
    from terminalworld.core.formats import load_trajectories
    from terminalworld.core.heldout import read_heldout
    from terminalworld.core.trajectories import Turn
    from tests.paths import SWE_ZERO

    sessions = [t for src in (SWE_ZERO, NEBIUS) for t in load_trajectories(str(src))]
    if run.smoke:

        def short(s):
            return tuple(Turn(t.action, None if t.observation is None else t.observation[:200]) for t in s.turns[:4])

        sessions = [dataclasses.replace(s, turns=short(s)) for s in sessions]
    run.sessions = sessions
    with tempfile.TemporaryDirectory() as tmp:
        for k, src in enumerate((SWE_ZERO, NEBIUS)):
            path = Path(tmp) / f"{k}.jsonl"
            build_heldout(path, run.tokenizer, src, 1 if run.smoke else 100, 4096 if run.smoke else 8000)
            run.rows += read_heldout(str(path))


class Recording:
    """The scorer with its per-token log-probabilities kept (by the row's token ids) and the time
    spent in its forwards."""

    def __init__(self, scorer, device: str):
        self.scorer, self.device, self.max_len = scorer, device, scorer.max_len
        self.logprobs: dict[bytes, object] = {}
        self.forward_s = 0.0

    def batch_logprobs(self, items):
        start = time.perf_counter()
        out = self.scorer.batch_logprobs(items)
        sync(self.device)
        self.forward_s += time.perf_counter() - start
        for (ids, _), lp in zip(items, out, strict=True):
            self.logprobs[ids.tobytes()] = lp
        return out


def score(model, device: str, rows: list[dict], renderer) -> tuple[list[dict], Recording, float]:
    """The project's scorer over `rows` (batched longest first on CUDA, one row per forward on CPU)."""
    from terminalworld.eval.scoring import HFScorer, ScoreConfig, score_rows

    cfg = ScoreConfig(model_path="random", heldout="-", out="-", device=device)
    scorer = Recording(HFScorer(model, device), device)
    start = time.perf_counter()
    scored = list(score_rows(cfg, scorer, renderer, rows, {}))
    sync(device)
    return scored, scorer, time.perf_counter() - start


def scorer_agreement(run: Run) -> dict:
    """CPU float32 against the device in float32 and bfloat16, same weights, same rows."""
    import numpy as np

    from terminalworld.core.render import build_renderer

    renderer = build_renderer(tokenizer=run.tokenizer)
    reference_model = random_model("llama", run.shape(SMOLLM2_135M), "cpu", "float32")
    ref_rows, ref, ref_s = score(copy.deepcopy(reference_model), "cpu", run.rows, renderer)
    ref_nll = {r["instance_id"]: r["mean_nll"] for r in ref_rows if "mean_nll" in r}
    out = {
        "model": "SmolLM2-135M shape (LlamaConfig), seeded random weights" + (" (tiny)" if run.smoke else ""),
        "rows": len(run.rows),
        "rows_scored": len(ref_nll),
        "row_tokens": [r["full_len"] for r in ref_rows],
        "target_tokens": sum(r["n_target_tokens"] for r in ref_rows if "mean_nll" in r),
        "reference": {
            "device": "cpu",
            "dtype": "float32",
            "seconds": ref_s,
            "mean_nll": float(np.mean([*ref_nll.values()])),
        },
    }
    for dtype in ("float32", "bfloat16"):
        reset_peak(run.device)
        got_rows, got, got_s = score(
            copy.deepcopy(reference_model).to(dtype=_torch_dtype(dtype)), run.device, run.rows, renderer
        )
        token_diff = max(float(np.abs(got.logprobs[k] - v).max()) for k, v in ref.logprobs.items())
        row_diff = [abs(r["mean_nll"] - ref_nll[r["instance_id"]]) for r in got_rows if "mean_nll" in r]
        out[dtype] = {
            "device": run.device,
            "seconds": got_s,
            "max_abs_token_logprob_diff": token_diff,
            "max_abs_row_mean_nll_diff": max(row_diff),
            "mean_abs_row_mean_nll_diff": float(np.mean(row_diff)),
            "rows_compared": len(row_diff),
        }
    return out


def _torch_dtype(name: str):
    import torch

    return getattr(torch, name)


def scoring_throughput(run: Run) -> dict:
    """100 rows at the fixture rows' lengths, bfloat16, each shape: the probe's cost."""
    import numpy as np

    from terminalworld.core.render import build_renderer

    renderer = build_renderer(tokenizer=run.tokenizer)
    n = 3 if run.smoke else PROBE_ROWS
    picks = np.random.default_rng(0).choice(len(run.rows), n)
    rows = [dict(run.rows[k], instance_id=f"{run.rows[k]['instance_id']}~{i}") for i, k in enumerate(picks)]
    out = {
        "rows": n,
        "dtype": "bfloat16",
        "device": run.device,
        "batching": "longest first" if run.device == "cuda" else "one row per forward (CPU)",
    }
    for name, family, shape in (("smollm2_135m", "llama", SMOLLM2_135M), ("qwen3_1_7b", "qwen3", QWEN3_1_7B)):
        reset_peak(run.device)
        model = random_model(family, run.shape(shape), run.device, "bfloat16")
        score(model, run.device, rows[:1], renderer)  # warm-up: kernels chosen, allocator grown
        scored, rec, seconds = score(model, run.device, rows, renderer)
        tokens = sum(r["full_len"] for r in scored)
        peak, kind = peak_memory_mib(run.device)
        rows_per_s = len(scored) / seconds
        out[name] = {
            "row_tokens": {
                "mean": tokens / len(scored),
                "min": min(r["full_len"] for r in scored),
                "max": max(r["full_len"] for r in scored),
            },
            "seconds": seconds,
            "forward_seconds": rec.forward_s,
            "rows_per_s": rows_per_s,
            "tokens_per_s": tokens / seconds,
            "forward_tokens_per_s": tokens / rec.forward_s,
            "peak_memory_mib": peak,
            "peak_memory_kind": kind,
            "probe_projection_s": PROBE_ROWS * PROBE_CHECKPOINTS / rows_per_s,
        }
        del model
    return out


def simulator_generation(run: Run) -> dict:
    """Batched generation of real-prefix prompts, and one session with and without KV reuse."""
    import numpy as np

    from terminalworld.core.heldout import observed_prefix
    from terminalworld.core.render import build_renderer
    from terminalworld.sim.backend import HFGenerator, Simulator, stop_ids

    new_tokens = 4 if run.smoke else 128
    batches = (1, 2, 4) if run.smoke else (1, 8, 32)
    model = random_model("llama", run.shape(SMOLLM2_135M), run.device, "bfloat16")
    renderer = build_renderer(tokenizer=run.tokenizer, view="sim")
    stop = stop_ids(renderer.tokenizer)
    cap = SMOLLM2_135M["max_position_embeddings"] - new_tokens

    def simulator(**kw) -> Simulator:
        gen = HFGenerator(model, stop=stop, pad=stop[0], device=run.device, **kw)
        return Simulator(renderer, gen, max_new_tokens=new_tokens)

    probe = simulator()
    by_session = {}  # each session's turns whose prompt fits the window, the session cut after the turn
    for s in run.sessions:
        cuts = [(dataclasses.replace(s, turns=s.turns[: t + 1]), t) for t in range(observed_prefix(s))]
        by_session[s.instance_id] = [(c, t) for c, t in cuts if len(probe.prompt(c, t)[0]) <= cap]
    requests = [r for turns in by_session.values() for r in turns]
    probe.simulate(requests[:1])  # warm-up
    rng = np.random.default_rng(0)
    out: dict = {"model": "SmolLM2-135M shape, seeded random weights, bfloat16, greedy", "device": run.device}
    out |= {"new_tokens": new_tokens, "writeup_seconds_per_turn": WRITEUP_SECONDS_PER_TURN, "batched": []}
    for b in batches:
        picked = [requests[k] for k in rng.choice(len(requests), b, replace=len(requests) < b)]
        sim = simulator(batch_size=b)
        sync(run.device)
        start = time.perf_counter()
        got = sim.simulate(picked)
        sync(run.device)
        seconds = time.perf_counter() - start
        out["batched"].append(
            {
                "prompts": b,
                "mean_prompt_tokens": float(np.mean([g.prompt_tokens for g in got])),
                "generated_tokens": sum(g.tokens for g in got),
                "seconds": seconds,
                "observations_per_s": b / seconds,
                "seconds_per_turn": seconds / b,
                "new_tokens_per_s": sum(g.tokens for g in got) / seconds,
            }
        )
    # The session with the most turns that fit; its first turns in order (a session's prompt grows).
    session, fitting = max(by_session.items(), key=lambda kv: len(kv[1]))
    session_turns = fitting[: 3 if run.smoke else 8]
    both = {}
    for name, kw in (("reuse", {"reuse_cache": True}), ("no_reuse", {})):
        sim = simulator(**kw)
        seconds, prefilled = [], []
        for traj, t in session_turns:
            start = time.perf_counter()
            [g] = sim.simulate([(traj, t)])
            sync(run.device)
            seconds.append(time.perf_counter() - start)
            prefilled.append(sim.generator.prefilled[-1] if kw else g.prompt_tokens)
        both[name] = {"seconds_per_turn": float(np.mean(seconds)), "seconds": seconds, "prefilled_tokens": prefilled}
    out["session"] = {
        "instance_id": session,
        "turns": len(session_turns),
        **both,
        "speedup": both["no_reuse"]["seconds_per_turn"] / both["reuse"]["seconds_per_turn"],
    }
    return out


def train_flops_per_token(shape: dict, seq_len: int) -> float:
    """6 N + 12 L S H d: N the parameters in matmuls (layers and LM head), per trained token."""
    h, layers, heads = shape["hidden_size"], shape["num_hidden_layers"], shape["num_attention_heads"]
    d = shape.get("head_dim") or h // heads
    kv = shape["num_key_value_heads"]
    per_layer = h * heads * d + 2 * h * kv * d + heads * d * h + 3 * h * shape["intermediate_size"]
    n = layers * per_layer + h * shape["vocab_size"]
    return 6 * n + 12 * layers * seq_len * heads * d


def device_name(run: Run) -> str:
    import torch

    return torch.cuda.get_device_name() if run.device == "cuda" else "cpu"


def phase0_tokens(run: Run) -> tuple[float, int]:
    """Mean tokens per Phase 0 training row (SWE-ZERO fixture trajectories, rendered whole and cut
    at 8,191 as Phase 0 cuts them) and how many trajectories that mean is over."""
    from terminalworld.core.formats import load_trajectories
    from terminalworld.core.render import build_renderer
    from tests.paths import SWE_ZERO

    renderer = build_renderer(tokenizer=run.tokenizer)
    lengths = [min(len(renderer.render(t).input_ids), PHASE0_SEQ_LEN - 1) for t in load_trajectories(str(SWE_ZERO))]
    return sum(lengths) / len(lengths), len(lengths)


def grid_hours(run: Run, tokens_per_s: float) -> dict:
    """The Phase 0 grid's GPU-hours at `tokens_per_s`, one device, beside the plan's TPU request."""
    mean, n = phase0_tokens(run)
    cells = {s: PHASE0_ARMS * size * mean / tokens_per_s / 3600 for s, size in PHASE0_SCALES.items()}
    return {
        "tokens_per_row": mean,
        "tokens_per_row_source": f"{n} SWE-ZERO fixture trajectories, SmolLM2 tokenizer, cut at {PHASE0_SEQ_LEN - 1}",
        "gpu_hours_by_scale": cells,
        "gpu_hours_total": sum(cells.values()),
        "plan_tpu_request": PHASE0_TPU,
    }


def sft_torch(run: Run) -> dict:
    """The Phase 0 step in PyTorch: float32 parameters, bfloat16 autocast, AdamW, gradient-norm clip
    30, gradient checkpointing, one sequence per micro-batch accumulated to the batch."""
    import torch

    shape = run.shape(QWEN3_1_7B)
    seq_len, batch, steps = (64, 2, 2) if run.smoke else (PHASE0_SEQ_LEN, PHASE0_BATCH["10K"], 3)
    reset_peak(run.device)
    model = random_model("qwen3", shape, run.device, "float32").train()
    model.gradient_checkpointing_enable()
    model.config.use_cache = False
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.1)
    ids = torch.randint(0, shape["vocab_size"], (batch, seq_len), generator=torch.Generator().manual_seed(0))
    ids = ids.to(run.device)
    times = []
    for _ in range(steps + 1):  # the first step (allocations, kernel choice) is not timed
        sync(run.device)
        start = time.perf_counter()
        for b in range(batch):
            with torch.autocast(device_type=run.device, dtype=torch.bfloat16):
                loss = model(input_ids=ids[b : b + 1], labels=ids[b : b + 1]).loss / batch
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 30.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync(run.device)
        times.append(time.perf_counter() - start)
    peak, kind = peak_memory_mib(run.device)
    del model, opt
    tokens_per_s = batch * seq_len * steps / sum(times[1:])
    step = {"seconds": times, "first_untimed": True}
    memory = {"mib": peak, "kind": kind}
    return _sft_result(run, "pytorch", shape, seq_len, batch, tokens_per_s, step, memory, device_name(run))


def _sft_result(run, backend, shape, seq_len, batch, tokens_per_s, step, memory, device) -> dict:
    peak = next((v for k, v in PEAK_BF16_FLOPS.items() if k in device), None)
    flops = train_flops_per_token(shape, seq_len)
    return {
        "backend": backend,
        "backend_note": BACKEND_NOTES[backend],
        "model": "Qwen3-1.7B shape, seeded random weights" + (" (tiny)" if run.smoke else ""),
        "precision": "p=f32,c=bfloat16",
        "seq_len": seq_len,
        "batch": batch,
        "step": step,
        "tokens_per_s": tokens_per_s,
        "flops_per_token": flops,
        "flops_formula": "6 N + 12 L S H d (N: matmul parameters incl. LM head; L layers; S seq len; H heads of width d)",
        "device_name": device,
        "peak_flops": peak,
        "mfu": tokens_per_s * flops / peak if peak else None,
        "peak_memory": memory,
        "phase0_grid": grid_hours(run, tokens_per_s),
    }


def sft_levanter(run: Run) -> dict:
    """The same step through the project's Levanter config, mixed precision p=f32,c=bfloat16."""
    import jmp
    import numpy as np
    from levanter.main.train_lm import main as train
    from levanter.tracker.json_file import JsonFileTrackerConfig

    from terminalworld.core.assets import load_tokenizer
    from terminalworld.train.packing import training_tokenizer
    from terminalworld.train.sft import SftConfig, SftRecipe, TinyQwen3, train_lm_config

    shape = run.shape(QWEN3_1_7B)
    seq_len, batch, steps = (64, 2, 2) if run.smoke else (PHASE0_SEQ_LEN, PHASE0_BATCH["10K"], 4)
    tiny = TinyQwen3(
        hidden_dim=shape["hidden_size"],
        intermediate_dim=shape["intermediate_size"],
        num_layers=shape["num_hidden_layers"],
        num_heads=shape["num_attention_heads"],
        num_kv_heads=shape["num_key_value_heads"],
        head_dim=shape["head_dim"],
    )
    recipe = SftRecipe(
        epochs=1.0,
        batch_size=batch,
        learning_rate=2e-5,
        warmup=0.0,
        min_lr_ratio=1.0,
        weight_decay=0.1,
        max_grad_norm=30.0,
        seed=0,
        seq_len=seq_len,
        max_seq_len=seq_len,
        tiny=tiny,
    )
    with tempfile.TemporaryDirectory(prefix="tw-gpu-sft-") as work:
        # The full shape trains over Qwen3's own vocabulary; the tiny one over the given tokenizer's.
        tok = training_tokenizer(run.tokenizer if run.smoke else "qwen3", os.path.join(work, "tok"), "<|endoftext|>")
        rows = os.path.join(work, "rows.jsonl")
        rng = np.random.default_rng(0)
        with open(rows, "w") as f:
            for _ in range(steps * batch):
                f.write(
                    json.dumps(
                        {"input_ids": rng.integers(100, 49000, seq_len).tolist(), "loss_weights": [1.0] * seq_len}
                    )
                    + "\n"
                )
        cfg = SftConfig(
            rows=[rows],
            tokenizer=tok,
            cache_dir=os.path.join(work, "cache"),
            output_dir=os.path.join(work, "run"),
            export_dir=os.path.join(work, "hf"),
            num_train_steps=steps,
            recipe=recipe,
        )
        config = train_lm_config(cfg)
        # One sequence per device at a time, accumulated to the batch, as the PyTorch step does.
        trainer = dataclasses.replace(
            config.trainer,
            tracker=JsonFileTrackerConfig(output_path=work),
            mp=jmp.get_policy("p=f32,c=bfloat16"),
            per_device_parallelism=1,
        )
        start = time.perf_counter()
        train(dataclasses.replace(config, trainer=trainer, hf_save_path=None))
        wall = time.perf_counter() - start
        metrics = json.loads(Path(work, "eval_results.json").read_text())
        vocab = len(load_tokenizer(tok))  # Levanter sizes the vocabulary by the tokenizer
    import jax

    shape = {**shape, "vocab_size": vocab}
    step = {"wall_including_compile_s": wall}
    device = jax.devices()[0].device_kind
    return _sft_result(
        run, "levanter", shape, seq_len, batch, metrics["throughput/tokens_per_second"], step, None, device
    )


SECTIONS = {
    "scorer": scorer_agreement,
    "throughput": scoring_throughput,
    "generation": simulator_generation,
    "sft": sft_torch,
    "sft_levanter": sft_levanter,
}


def table(report: dict) -> str:
    """The headline figures, one line each."""
    lines = [f"device: {report['device']}   smoke: {report['smoke']}"]
    if s := report.get("scorer"):
        for dt in ("float32", "bfloat16"):
            d = s[dt]
            lines.append(
                f"scorer {dt:<9} vs cpu float32: max token |dlogp| {d['max_abs_token_logprob_diff']:.2e}, max row |dNLL| {d['max_abs_row_mean_nll_diff']:.2e}"
            )
    if t := report.get("throughput"):
        for name in ("smollm2_135m", "qwen3_1_7b"):
            d = t[name]
            lines.append(
                f"score {name:<13} {d['rows_per_s']:8.2f} rows/s {d['tokens_per_s']:10.0f} tok/s  peak {d['peak_memory_mib']:8.0f} MiB  probe {d['probe_projection_s'] / 60:7.1f} min"
            )
    if g := report.get("generation"):
        for b in g["batched"]:
            lines.append(
                f"simulate x{b['prompts']:<3} {b['observations_per_s']:7.2f} obs/s  {b['seconds_per_turn']:6.3f} s/turn (write-up {g['writeup_seconds_per_turn']} s)"
            )
        s = g["session"]
        lines.append(
            f"session {s['turns']} turns: reuse {s['reuse']['seconds_per_turn']:.3f} s/turn, no reuse {s['no_reuse']['seconds_per_turn']:.3f} s/turn"
        )
    for key in ("sft", "sft_levanter"):
        if (d := report.get(key)) and "tokens_per_s" in d:
            mfu = f"{d['mfu']:.1%}" if d["mfu"] is not None else "n/a"
            hours = d["phase0_grid"]["gpu_hours_total"]
            lines.append(
                f"{key} ({d['backend']}) {d['tokens_per_s']:10.0f} tok/s  MFU {mfu}  Phase 0 grid {hours:,.0f} GPU-h"
            )
        elif d:
            lines.append(f"{key}: {d.get('skipped')}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="the JSON report (written atomically after each section)")
    p.add_argument("--smoke", action="store_true", help="every measurement on CPU with tiny shapes")
    p.add_argument("--tokenizer", default="smollm2", help="SmolLM2's tokenizer: asset name or HF folder")
    p.add_argument("--only", default=None, help=f"comma-separated, of {list(SECTIONS)} (default: all)")
    p.add_argument("--no-levanter", action="store_true", help="skip the Levanter step (slow to import)")
    a = p.parse_args(argv)
    # Run as a script, this folder leads sys.path, and its zephyr.py would shadow the zephyr package
    # Levanter imports; the repository root goes there instead (benchmarks.scoring, tests.paths).
    here = str(REPO / "benchmarks")
    sys.path[:] = [str(REPO)] + [x for x in sys.path if os.path.abspath(x or ".") != here]
    names = a.only.split(",") if a.only else list(SECTIONS)
    if unknown := [n for n in names if n not in SECTIONS]:
        p.error(f"unknown section(s) {unknown}; choose from {list(SECTIONS)}")
    # The GPU machine's Python is not ours to choose, and the project's code uses 3.12 syntax: one line, not a SyntaxError.
    if sys.version_info < (3, 12):  # noqa: UP036
        print(f"error: terminalworld needs Python 3.12 or later, this is {sys.version.split()[0]}", file=sys.stderr)
        return 2
    import torch

    if not a.smoke and not torch.cuda.is_available():
        print("error: benchmarks/gpu.py needs a CUDA device (none is visible); --smoke runs it on CPU", file=sys.stderr)
        return 2
    from terminalworld.core.records import write_json

    run = Run(smoke=a.smoke, device="cpu" if a.smoke else "cuda", tokenizer=a.tokenizer, levanter=not a.no_levanter)
    report: dict = {
        "smoke": a.smoke,
        "device": torch.cuda.get_device_name() if run.device == "cuda" else f"cpu ({os.cpu_count()} cores)",
        "torch": torch.__version__,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if {"scorer", "throughput", "generation"} & set(names):
        load_fixtures(run)
    for name in names:
        start = time.perf_counter()
        if name == "sft_levanter" and not run.levanter:
            report[name] = {"skipped": "--no-levanter"}
        elif name == "sft_levanter" and not _importable("levanter"):
            report[name] = {"skipped": "levanter is not installed here (it does not travel: benchmarks/gpu_wheels.sh)"}
        else:
            print(f"{name} ...", flush=True)
            report[name] = SECTIONS[name](run)
            report[name]["section_seconds"] = time.perf_counter() - start
        write_json(a.out, report)
    print(table(report))
    return 0


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


if __name__ == "__main__":
    sys.exit(main())
