"""Levanter SFT on packed rows (see `train.packing` for how rows become Levanter data).

`train_lm_config` builds the exact `TrainLmConfig` that runs on a TPU pod or, for tiny models, on
CPU; `run_sft` runs it in this process. A run starts from an HF checkpoint (its architecture read
from its `config.json`: Qwen3, or Llama such as SmolLM2 with tied embeddings, converted by
Levanter's `HFCheckpointConverter`) or from a randomly initialised tiny Qwen3, and ends with an HF
export. A rerun with the same `run_id` resumes from the newest Levanter checkpoint under
`output_dir` (model, optimizer state, step and data position), so a killed run loses at most
`checkpoint_minutes`.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from terminalworld.errors import InputError

# Levanter's per-step HF exports, inside the output folder; the final one moves to `export_dir`.
HF_STEPS = "hf-steps"

# Levanter's mixed-precision policies (jmp strings). Marin trains with float32 parameters and
# bfloat16 compute (its `MARIN_PRECISION`); Levanter's own default is float32 throughout, which runs
# the TPU's (and a CPU's AMX/AVX512-BF16) matrix units at a fraction of their rate.
MARIN_PRECISION = "p=f32,c=bfloat16"
FLOAT32 = "f32"


def levanter_model_class(hf_checkpoint: str):
    """The Levanter config class of an HF checkpoint's architecture (its `config.json` model_type)."""
    from levanter.models.llama import LlamaConfig
    from levanter.models.qwen import Qwen3Config

    model_type = _model_type(hf_checkpoint)
    classes = {"qwen3": Qwen3Config, "llama": LlamaConfig}
    if model_type not in classes:
        raise InputError(f"{hf_checkpoint}: SFT supports {', '.join(classes)} checkpoints, not {model_type!r}")
    return classes[model_type]


def levanter_source(model: str) -> str:
    """What Levanter initialises from for a model path: an embedded asset or a GGUF file as its HF
    folder (converted once), anything else (folder, URL, HF id) as it is, for Levanter to read."""
    from terminalworld.core.assets import hf_folder, resolve

    return hf_folder(model, "model") if resolve(model)[1] is not None else model


def _model_type(hf_checkpoint: str) -> str:
    """`model_type` of a checkpoint folder (local or any fsspec URL) or, failing that, an HF id."""
    import json

    from fsspec.core import url_to_fs

    fs, path = url_to_fs(f"{hf_checkpoint.rstrip('/')}/config.json")
    if fs.exists(path):
        with fs.open(path) as f:
            return json.load(f)["model_type"]
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(hf_checkpoint).model_type


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
    clipping, seed, the packed data length `seq_len` and the architecture's `max_seq_len`. A
    `warmup` above 1 is a number of steps, so that with a constant schedule the learning rate at a
    step does not depend on the run's length: a run continued to more `steps` is the same run."""

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
    tiny: TinyQwen3 | None = None  # train from scratch at this shape (the local demo's base)
    steps: int | None = None  # train exactly this many steps (a scale of one run), instead of `epochs`
    lr_schedule: str = "cosine"  # Levanter's schedule name; "constant" holds the peak after warm-up
    # Levanter checkpoints: a rotating one every `checkpoint_minutes` (the newest kept; what a killed
    # run resumes from), and a permanent one every `checkpoint_every` steps (small models, tests).
    checkpoint_minutes: float = 30.0
    checkpoint_every: int | None = None
    # Levanter's `TrainerConfig.mp`: parameters and optimizer state stay float32, the forward and
    # backward compute in bfloat16, as Marin's runs do.
    mp: str = MARIN_PRECISION
    # Levanter serves the packed rows in a full permutation keyed by `seed`: runs that differ only in
    # `seed` see the same sequences in other orders, and a run continued to more steps keeps its
    # order, so its checkpoints stay nested prefixes of one order. Off: the rows' own order.
    shuffle: bool = False


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
    initialize_from_hf: str | None = None  # a local HF checkpoint folder to start from (else a TinyQwen3)
    tracker: str = "noop"  # noop | wandb (wandb runs offline unless WANDB_API_KEY is set)
    run_id: str = "sft"  # names the checkpoint and export folders, so a rerun resumes the same run


def levanter_data_config(rows: list[str], tokenizer: str, cache_dir: str, shuffle: bool = False):
    """Levanter data over our packed rows, read as prebuilt rows with their loss weights; with
    `shuffle`, in a full permutation keyed by the trainer's seed (`SftRecipe.shuffle`)."""
    from levanter.data.text.datasets import DatasetComponent, LmDataConfig, UrlDatasetSourceConfig
    from levanter.data.text.formats import PrebuiltLmDatasetFormat

    component = DatasetComponent(
        source=UrlDatasetSourceConfig(train_urls=list(rows)),
        format=PrebuiltLmDatasetFormat(loss_weights_key="loss_weights"),
        split="train",
    )
    # Rows are already packed and in order; Levanter's shuffle reorders whole rows only.
    return LmDataConfig(tokenizer=tokenizer, cache_dir=cache_dir, shuffle=shuffle, components={"sft": component})


def train_lm_config(cfg: SftConfig):
    """The exact `TrainLmConfig` of a run: a TPU pod's, or for tiny models this CPU's."""
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
        # use_hf_model_config below replaces this with the checkpoint's own shapes.
        model = levanter_model_class(cfg.initialize_from_hf)(
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
        mp=precision_policy(r.mp),
        require_accelerator=False,
        checkpointer=checkpointer_config(f"{out}/checkpoints", r),
        log_dir=Path(out, "logs") if "://" not in out else Path("logs"),
        log_jaxprs=False,
        log_xla_hlo=False,
    )
    optimizer = AdamConfig(
        learning_rate=r.learning_rate,
        weight_decay=r.weight_decay,
        warmup=r.warmup,
        min_lr_ratio=r.min_lr_ratio,
        lr_schedule=r.lr_schedule,
        max_grad_norm=r.max_grad_norm,
    )
    return TrainLmConfig(
        data=levanter_data_config(cfg.rows, cfg.tokenizer, cfg.cache_dir, shuffle=r.shuffle),
        trainer=trainer,
        model=model,
        train_seq_len=r.seq_len,
        optimizer=optimizer,
        initialize_from_hf=cfg.initialize_from_hf or False,
        use_hf_model_config=bool(cfg.initialize_from_hf),
        hf_save_path=f"{out}/{HF_STEPS}",
        hf_save_steps=cfg.num_train_steps,
    )


def precision_policy(mp: str):
    """Levanter's `jmp.Policy` for a recipe's `mp` string; a string jmp cannot read is refused."""
    import jmp

    try:
        return jmp.get_policy(mp)
    except ValueError as e:
        raise InputError(f"mixed-precision policy {mp!r}: {e}") from None


def checkpointer_config(base_path: str, r: SftRecipe):
    """Levanter's checkpointer for a recipe: the rotating checkpoint on a timer, permanent ones at
    multiples of `checkpoint_every` steps if set; the final step is always saved."""
    from levanter.checkpoint import CheckpointerConfig

    keep = [{"every": r.checkpoint_every}] if r.checkpoint_every else []
    return CheckpointerConfig(
        base_path=base_path, save_interval=datetime.timedelta(minutes=r.checkpoint_minutes), keep=keep
    )


def run_sft(cfg: SftConfig) -> str:
    """Train, move the final HF export to `cfg.export_dir`, and return that folder."""
    from fsspec.core import url_to_fs
    from levanter.main.train_lm import main

    main(train_lm_config(cfg))
    fs, steps_dir = url_to_fs(f"{cfg.output_dir.rstrip('/')}/{HF_STEPS}/{cfg.run_id}")
    exports = step_folders(fs, steps_dir)
    if not exports:
        raise RuntimeError(f"training finished without an HF export under {cfg.output_dir}/{HF_STEPS}")
    _, dest = url_to_fs(cfg.export_dir)
    if fs.exists(dest):
        fs.rm(dest, recursive=True)
    fs.mv(exports[max(exports)], dest, recursive=True)
    return cfg.export_dir


def step_folders(fs, base: str) -> dict[int, str]:
    """Levanter's per-step folders under `base` (`step-N`: checkpoints, HF exports) by their step."""
    folders = [p.rstrip("/") for p in fs.glob(f"{base}/step-*")]
    return {int(p.rsplit("-", 1)[1]): p for p in folders if p.rsplit("-", 1)[1].isdigit()}
