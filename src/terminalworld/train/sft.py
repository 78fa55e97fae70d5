"""Levanter SFT on packed rows (see `train.packing` for how rows become Levanter data).

`train_lm_config` builds the exact `TrainLmConfig` that runs on a TPU pod or, for tiny models, on
CPU; `run_sft` runs it in this process.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from terminalworld.errors import InputError

# Levanter's per-step HF exports, inside the output folder; the final one moves to `export_dir`.
HF_STEPS = "hf-steps"


@dataclass(frozen=True)
class TinyQwen3:
    """A randomly initialised Qwen3 small enough to train on CPU in seconds."""

    hidden_dim: int
    intermediate_dim: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int


@dataclass(frozen=True)
class SftRecipe:
    """Optimisation and shapes of one SFT run (the experiment files state the recipes): epochs,
    batch, peak LR with cosine decay to `min_lr_ratio`, warmup fraction, weight decay, gradient
    clipping, seed, the packed data length `seq_len` and the architecture's `max_seq_len`."""

    epochs: float
    batch_size: int
    learning_rate: float
    warmup: float
    min_lr_ratio: float
    weight_decay: float
    max_grad_norm: float
    seed: int
    seq_len: int
    max_seq_len: int
    tiny: TinyQwen3 | None = None  # train this shape from scratch (the local demo's base)


@dataclass(frozen=True)
class SftConfig:
    """One Levanter run: packed rows, the training tokenizer, where checkpoints and exports go."""

    rows: list[str]  # packed rows (JSON Lines): input_ids + shifted loss_weights, seq_len each
    tokenizer: str  # folder of the training tokenizer, whose eos is the document separator
    cache_dir: str
    output_dir: str  # Levanter checkpoints under checkpoints/RUN_ID, per-step HF exports under hf-steps/
    export_dir: str  # the final HF export is moved here
    num_train_steps: int
    recipe: SftRecipe
    initialize_from_hf: str | None = None  # an HF checkpoint to start from (else a TinyQwen3)
    tracker: str = "noop"  # noop | wandb (wandb runs offline unless WANDB_API_KEY is set)
    run_id: str = "sft"  # names the checkpoint and export folders, so a rerun resumes the same run


def levanter_data_config(rows: list[str], tokenizer: str, cache_dir: str):
    """Levanter data over our packed rows, read as prebuilt rows with their loss weights."""
    from levanter.data.text.datasets import DatasetComponent, LmDataConfig, UrlDatasetSourceConfig
    from levanter.data.text.formats import PrebuiltLmDatasetFormat

    component = DatasetComponent(
        source=UrlDatasetSourceConfig(train_urls=list(rows)),
        format=PrebuiltLmDatasetFormat(loss_weights_key="loss_weights"),
        split="train",
    )
    # Rows are already packed and in order; Levanter's shuffle would only reorder whole rows.
    return LmDataConfig(tokenizer=tokenizer, cache_dir=cache_dir, shuffle=False, components={"sft": component})


def train_lm_config(cfg: SftConfig):
    """The exact `TrainLmConfig` of a run: a TPU pod's, or for tiny models this CPU's."""
    from levanter.checkpoint import CheckpointerConfig
    from levanter.main.train_lm import TrainLmConfig
    from levanter.models.qwen import Qwen3Config
    from levanter.optim.config import AdamConfig
    from levanter.tracker import NoopConfig
    from levanter.tracker.wandb import WandbConfig
    from levanter.trainer import TrainerConfig

    out = cfg.output_dir.rstrip("/")  # a string, so gs:// survives (pathlib would fold it to gs:/)
    r = cfg.recipe
    max_seq_len = r.max_seq_len
    if cfg.initialize_from_hf:
        model = Qwen3Config(
            max_seq_len=max_seq_len, tokenizer=cfg.tokenizer, reference_checkpoint=cfg.initialize_from_hf
        )
    else:
        if not r.tiny:
            raise InputError(
                "a run needs a model: initialize_from_hf, or the recipe's tiny shape to train from scratch"
            )
        t = r.tiny
        model = Qwen3Config(
            max_seq_len=max_seq_len,
            hidden_dim=t.hidden_dim,
            intermediate_dim=t.intermediate_dim,
            num_layers=t.num_layers,
            num_heads=t.num_heads,
            num_kv_heads=t.num_kv_heads,
            head_dim=t.head_dim,
            tokenizer=cfg.tokenizer,
            reference_checkpoint=cfg.tokenizer,
        )
    tracker = NoopConfig() if cfg.tracker == "noop" else WandbConfig(mode="offline", save_code=False)
    trainer = TrainerConfig(
        id=cfg.run_id,
        seed=r.seed,
        num_train_steps=cfg.num_train_steps,
        train_batch_size=r.batch_size,
        tracker=tracker,
        require_accelerator=False,
        checkpointer=CheckpointerConfig(base_path=f"{out}/checkpoints", save_interval=datetime.timedelta(minutes=30)),
        log_dir=Path(out, "logs") if "://" not in out else Path("logs"),
        log_jaxprs=False,
        log_xla_hlo=False,
    )
    optimizer = AdamConfig(
        learning_rate=r.learning_rate,
        weight_decay=r.weight_decay,
        warmup=r.warmup,
        min_lr_ratio=r.min_lr_ratio,
        lr_schedule="cosine",
        max_grad_norm=r.max_grad_norm,
    )
    return TrainLmConfig(
        data=levanter_data_config(cfg.rows, cfg.tokenizer, cfg.cache_dir),
        trainer=trainer,
        model=model,
        train_seq_len=r.seq_len,
        optimizer=optimizer,
        initialize_from_hf=cfg.initialize_from_hf or False,
        use_hf_model_config=bool(cfg.initialize_from_hf),
        hf_save_path=f"{out}/{HF_STEPS}",
        hf_save_steps=cfg.num_train_steps,
    )


def run_sft(cfg: SftConfig) -> str:
    """Train, move the final HF export to `cfg.export_dir`, and return that folder."""
    from fsspec.core import url_to_fs
    from levanter.main.train_lm import main

    main(train_lm_config(cfg))
    fs, steps_dir = url_to_fs(f"{cfg.output_dir.rstrip('/')}/{HF_STEPS}/{cfg.run_id}")
    exports = sorted(fs.glob(f"{steps_dir}/step-*"), key=lambda p: int(p.rsplit("-", 1)[1]))
    if not exports:
        raise RuntimeError(f"training finished without an HF export under {cfg.output_dir}/{HF_STEPS}")
    _, dest = url_to_fs(cfg.export_dir)
    if fs.exists(dest):
        fs.rm(dest, recursive=True)
    fs.mv(exports[-1], dest, recursive=True)
    return cfg.export_dir
