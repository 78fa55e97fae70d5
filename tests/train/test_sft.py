"""Levanter SFT from HF weights, on SmolLM2's architecture (Llama, tied embeddings) in miniature:
the model Levanter initialises computes the HF model's logits, an SFT run exports back to the same
HF weights when nothing is learned, and a run killed after a checkpoint resumes to the weights of an
uninterrupted run."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from terminalworld.core.assets import SMOLLM2, load_tokenizer, tiny_llama
from terminalworld.errors import InputError
from terminalworld.train.packing import training_tokenizer
from terminalworld.train.sft import (
    FLOAT32,
    MARIN_PRECISION,
    SftConfig,
    SftRecipe,
    levanter_model_class,
    run_sft,
    train_lm_config,
)

SEQ = 64


@pytest.fixture(scope="module")
def tiny_hf(tmp_path_factory) -> str:
    """A random tiny Llama over SmolLM2's vocabulary, saved as an HF folder with SmolLM2's tokenizer."""
    folder = str(tmp_path_factory.mktemp("tiny-llama"))
    tok = load_tokenizer(SMOLLM2)
    tiny_llama(len(tok), seed=3).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def _rows(path: Path, n: int, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for _ in range(n):
            weights = (rng.random(SEQ) < 0.7).astype(float).tolist()
            f.write(json.dumps({"input_ids": rng.integers(5, 49000, SEQ).tolist(), "loss_weights": weights}) + "\n")
    return str(path)


def _config(tmp: Path, hf: str, *, steps: int, lr: float, rows: str, **recipe) -> SftConfig:
    r = SftRecipe(
        epochs=1,
        batch_size=2,
        learning_rate=lr,
        warmup=0.0,
        min_lr_ratio=1.0,
        weight_decay=0.0,
        max_grad_norm=1.0,
        seed=7,
        seq_len=SEQ,
        max_seq_len=SEQ,
        lr_schedule="constant",
        **{"mp": FLOAT32, **recipe},  # float32: the exactness tests' reference
    )
    return SftConfig(
        rows=[rows],
        tokenizer=training_tokenizer(SMOLLM2, str(tmp / "tok"), "<|endoftext|>"),
        cache_dir=str(tmp / "cache"),
        output_dir=str(tmp / "run"),
        export_dir=str(tmp / "hf"),
        num_train_steps=steps,
        recipe=r,
        initialize_from_hf=hf,
    )


def _state(folder: str) -> dict[str, torch.Tensor]:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).state_dict()


def _levanter_and_hf_logits(hf_folder: str, tokenizer: str, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Logits of the model Levanter initialises from `hf_folder` (as train_lm does with
    initialize_from_hf and use_hf_model_config) and of the HF model itself, for one sequence."""
    import haliax as hax
    from levanter.layers.attention import AttentionMask
    from levanter.trainer import TrainerConfig
    from transformers import AutoModelForCausalLM

    converter = levanter_model_class(hf_folder)(reference_checkpoint=hf_folder, tokenizer=tokenizer)
    converter = converter.hf_checkpoint_converter().replaced(reference_checkpoint=hf_folder, tokenizer=tokenizer)
    lev_cfg = converter.config_from_hf_config(converter.default_hf_config)
    with TrainerConfig(require_accelerator=False).use_device_mesh():
        lev = converter.load_pretrained(lev_cfg.model_type, config=lev_cfg)
        Pos = lev_cfg.max_Pos.resize(len(ids))
        lev_logits = np.asarray(lev(hax.named(ids.astype(np.int32), Pos), attn_mask=AttentionMask.causal()).array)
    hf = AutoModelForCausalLM.from_pretrained(hf_folder, dtype=torch.float32).eval()
    with torch.inference_mode():
        hf_logits = hf(torch.as_tensor(ids[None])).logits[0].numpy()
    return lev_logits, hf_logits


@pytest.mark.slow_ci
def test_smollm2_real_weights_load_into_levanter_with_the_hf_logits(tmp_path):
    from terminalworld.core.assets import hf_folder, local_model_path

    folder = hf_folder(local_model_path(SMOLLM2), "model")
    tok = load_tokenizer(SMOLLM2)
    ids = np.array(tok("$ ls -la /testbed\ntotal 12\ndrwxr-xr-x 3 root root", add_special_tokens=False)["input_ids"])
    lev, hf = _levanter_and_hf_logits(folder, training_tokenizer(SMOLLM2, str(tmp_path / "tok"), "<|endoftext|>"), ids)
    assert json.loads(Path(folder, "config.json").read_text())["tie_word_embeddings"] is True
    np.testing.assert_allclose(lev, hf, atol=2e-3, rtol=1e-3)
    assert (lev.argmax(-1) == hf.argmax(-1)).all()


def test_levanter_initialised_from_hf_computes_the_hf_logits(tiny_hf, tmp_path):
    from levanter.models.llama import LlamaConfig

    assert levanter_model_class(tiny_hf) is LlamaConfig
    cfg = _config(tmp_path, tiny_hf, steps=1, lr=0.0, rows=_rows(tmp_path / "r.jsonl", 2))
    assert isinstance(train_lm_config(cfg).model, LlamaConfig)  # the config train_lm starts from
    ids = np.random.default_rng(1).integers(5, 49000, 40)
    lev, hf = _levanter_and_hf_logits(tiny_hf, cfg.tokenizer, ids)
    assert np.abs(hf).max() > 1.0  # logits large enough for a wrong weight to show
    np.testing.assert_allclose(lev, hf, atol=2e-4, rtol=1e-4)


def test_sft_with_zero_learning_rate_exports_the_hf_weights_back(tiny_hf, tmp_path):
    # Two steps: Levanter exports nothing after a run's first step alone.
    cfg = _config(tmp_path, tiny_hf, steps=2, lr=0.0, rows=_rows(tmp_path / "r.jsonl", 4))
    out = run_sft(cfg)
    exported = json.loads(Path(out, "config.json").read_text())
    assert exported["model_type"] == "llama" and exported["tie_word_embeddings"] is True
    before, after = _state(tiny_hf), _state(out)
    assert set(after) == set(before)
    for name, value in before.items():
        torch.testing.assert_close(after[name], value, rtol=0, atol=1e-6, msg=name)


def test_the_production_plans_precision_reaches_levanters_trainer(tiny_hf, tmp_path, monkeypatch):
    import jax.numpy as jnp
    from marin.execution.lazy import materialized_config

    from tests.conftest import load_experiment

    monkeypatch.setenv("MARIN_PREFIX", str(tmp_path / "prefix"))  # the grid would default it to the bucket
    recipe = materialized_config(load_experiment("sft_echo_1m").checkpoint.step, "/p").recipe
    assert recipe.mp == MARIN_PRECISION == "p=f32,c=bfloat16"  # what the printed plan shows
    rows = _rows(tmp_path / "r.jsonl", 2)
    cfg = _config(tmp_path, tiny_hf, steps=1, lr=0.0, rows=rows)
    policy = train_lm_config(dataclasses.replace(cfg, recipe=recipe)).trainer.mp
    assert (policy.param_dtype, policy.compute_dtype) == (jnp.float32, jnp.bfloat16)
    assert train_lm_config(cfg).trainer.mp.compute_dtype == jnp.float32  # FLOAT32, the tests' reference
    bad = dataclasses.replace(cfg, recipe=dataclasses.replace(recipe, mp="p=f32,c=int3"))
    with pytest.raises(InputError, match="mixed-precision policy"):
        train_lm_config(bad)


def _eval_loss(folder: str, rows: str) -> float:
    """Mean weighted next-token NLL of an HF export on packed rows, in float32."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    total = weight = 0.0
    with torch.inference_mode(), open(rows) as f:
        for line in f:
            row = json.loads(line)
            ids, w = torch.tensor([row["input_ids"]]), torch.tensor(row["loss_weights"][:-1])
            logp = torch.log_softmax(model(ids).logits[0, :-1].float(), -1)
            nll = -logp.gather(1, ids[0, 1:, None])[:, 0]
            total, weight = total + float((nll * w).sum()), weight + float(w.sum())
    return total / weight


# bf16 compute against float32 after 30 Adam steps on the same rows. Measured on the tiny Llama
# below (2026-12-05): both losses fall from 10.80 to 4.916, 3.3e-4 nats apart; 0.02 nats (0.4% of
# the final loss) leaves room for other CPUs while catching a policy that breaks training (a bf16
# optimizer state or a wrong cast moves the loss by tenths of a nat or more).
BF16_LOSS_TOLERANCE = 0.02


@pytest.mark.slow_ci
def test_bf16_compute_sft_reaches_the_float32_runs_loss(tiny_hf, tmp_path):
    rng = np.random.default_rng(11)
    few = rng.integers(100, 164, (4, SEQ))  # 64 of the 49K tokens, over and over: a loss that falls far
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        "".join(json.dumps({"input_ids": r.tolist(), "loss_weights": [1.0] * SEQ}) + "\n" for r in few) * 15
    )
    steps, losses = 30, {}
    for mp in (FLOAT32, MARIN_PRECISION):
        run = _config(tmp_path / mp.replace(",", "_"), tiny_hf, steps=steps, lr=1e-2, rows=str(rows), mp=mp)
        losses[mp] = _eval_loss(run_sft(run), str(rows))
    start = _eval_loss(tiny_hf, str(rows))
    assert losses[FLOAT32] < start - 3.0  # the reference run learned
    assert abs(losses[MARIN_PRECISION] - losses[FLOAT32]) < BF16_LOSS_TOLERANCE, (start, losses)


def _train_script(cfg: SftConfig) -> str:
    return (
        "import json, sys\n"
        "from terminalworld.train.sft import SftConfig, SftRecipe, run_sft\n"
        "c = json.loads(sys.argv[1]); c['recipe'] = SftRecipe(**c['recipe'])\n"
        "run_sft(SftConfig(**c))\n"
    )


def _launch(cfg: SftConfig) -> subprocess.Popen:
    from dataclasses import asdict

    env = dict(os.environ, JAX_PLATFORMS="cpu", WANDB_MODE="disabled")
    return subprocess.Popen(
        [sys.executable, "-c", _train_script(cfg), json.dumps(asdict(cfg))],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


@pytest.mark.slow_ci
def test_sft_killed_after_a_checkpoint_resumes_to_the_uninterrupted_weights(tiny_hf, tmp_path):
    rows = _rows(tmp_path / "rows.jsonl", 2 * 60, seed=5)
    steps, every = 60, 10
    whole = _config(tmp_path / "whole", tiny_hf, steps=steps, lr=3e-3, rows=rows, checkpoint_every=every)
    killed = _config(tmp_path / "killed", tiny_hf, steps=steps, lr=3e-3, rows=rows, checkpoint_every=every)
    assert _launch(whole).wait(timeout=600) == 0
    proc = _launch(killed)
    run = Path(killed.output_dir, "checkpoints", killed.run_id)

    def saved() -> list[int]:  # Levanter names a checkpoint by its last completed step, from 0
        return [int(p.parent.name.split("-")[1]) for p in run.glob("step-*/metadata.json")]

    deadline = time.monotonic() + 600
    while not any(s > 0 for s in saved()) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    reached = max(saved())
    assert 0 < reached < steps - 1 and not Path(killed.export_dir).exists()  # killed mid-run, after a checkpoint
    assert _launch(killed).wait(timeout=600) == 0  # the same run id resumes from that checkpoint
    a, b = _state(whole.export_dir), _state(killed.export_dir)
    assert any(not torch.equal(a[k], _state(tiny_hf)[k]) for k in a)  # it trained
    for name in a:
        torch.testing.assert_close(b[name], a[name], rtol=0, atol=0, msg=name)
