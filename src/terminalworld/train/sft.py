"""Levanter SFT on packed rows (see `levanter_data` for how rows become Levanter data).

`train_lm_config` builds the exact `TrainLmConfig` that runs on a TPU pod or, for tiny models, on
CPU; `run_sft` runs it in this process.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class TinyQwen3:
    """A randomly initialised Qwen3 small enough to train on CPU in seconds."""

    hidden_dim: int = 64
    intermediate_dim: int = 128
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 16


@dataclass(frozen=True)
class SftRecipe:
    """Optimisation and shapes; the defaults are the Phase 0 recipe (seeds): one epoch, LR 2e-5
    cosine, warmup 0.03, min_lr_ratio 0.1, weight decay 0.1, max_grad_norm 30, data length 8192
    in an architecture of 32768, seed 42."""

    epochs: float = 1.0
    batch_size: int = 8
    learning_rate: float = 2e-5
    warmup: float = 0.03
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    max_grad_norm: float = 30.0
    seed: int = 42
    seq_len: int = 8192
    max_seq_len: int = 32768
    tiny: dict[str, int] | None = None  # TinyQwen3 fields: train from scratch (the local demo's base)


@dataclass(frozen=True)
class SftConfig:
    rows: list[str]  # packed rows (JSON Lines): input_ids + shifted loss_weights, seq_len each
    tokenizer: str  # folder of the training tokenizer, whose eos is the document separator
    cache_dir: str
    output_dir: str  # Levanter checkpoints under checkpoints/RUN_ID, HF exports under hf/RUN_ID/step-N
    num_train_steps: int
    recipe: SftRecipe = field(default_factory=SftRecipe)
    initialize_from_hf: str | None = None  # an HF checkpoint to start from (else a TinyQwen3)
    tracker: str = "noop"  # noop | wandb (wandb runs offline unless WANDB_API_KEY is set)
    run_id: str = "sft"  # names the checkpoint and export folders, so a rerun resumes the same run


def levanter_data_config(rows: list[str], tokenizer: str, cache_dir: str):
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
    from levanter.checkpoint import CheckpointerConfig
    from levanter.main.train_lm import TrainLmConfig
    from levanter.models.qwen import Qwen3Config
    from levanter.optim.config import AdamConfig
    from levanter.tracker import NoopConfig
    from levanter.tracker.wandb import WandbConfig
    from levanter.trainer import TrainerConfig

    out = Path(cfg.output_dir)
    r = cfg.recipe
    max_seq_len = r.max_seq_len
    if cfg.initialize_from_hf:
        model = Qwen3Config(
            max_seq_len=max_seq_len, tokenizer=cfg.tokenizer, reference_checkpoint=cfg.initialize_from_hf
        )
    else:
        t = TinyQwen3(**(r.tiny or {}))
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
        checkpointer=CheckpointerConfig(
            base_path=str(out / "checkpoints"), save_interval=datetime.timedelta(minutes=30)
        ),
        log_dir=out / "logs",
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
        hf_save_path=str(out / "hf"),
        hf_save_steps=cfg.num_train_steps,
    )


def run_sft(cfg: SftConfig) -> str:
    """Train, and return the folder of the final HF export."""
    from levanter.main.train_lm import main

    main(train_lm_config(cfg))
    exports = sorted((Path(cfg.output_dir) / "hf" / cfg.run_id).glob("step-*"), key=lambda p: int(p.name.split("-")[1]))
    if not exports:
        raise RuntimeError(f"training finished without an HF export under {cfg.output_dir}/hf")
    return str(exports[-1])
