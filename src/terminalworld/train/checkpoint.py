"""One SFT checkpoint as the training stage's step makes it: the number of steps from the packed
data's statistics, Levanter training (from scratch, from HF weights, or continuing an earlier
checkpoint of the same run), and the final HF export with the rendering tokenizer and its chat
template, so the scorer renders exactly as training did."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from terminalworld.pipeline import artifacts
from terminalworld.train.sft import SftConfig, SftRecipe, levanter_source, run_sft, step_folders


@dataclass(frozen=True)
class CheckpointConfig:
    """A checkpoint to train: the tokenized artifact's folder, the output folder, the recipe, the
    model to start from (None: the recipe's tiny shape from scratch) and an earlier checkpoint
    folder of the same run to continue (None: a fresh run)."""

    tokenized: str
    out: str
    recipe: SftRecipe
    init_from: str | None = None
    continue_from: str | None = None


def train_checkpoint(cfg: CheckpointConfig) -> str:
    """Train on the tokenized artifact; the final HF export lands in `{out}/hf`. With
    `continue_from`, its last Levanter checkpoint is copied in first, so training resumes there:
    model, optimizer, step and data position; once this run has its own later checkpoint and its
    export, the copy is dropped (the run it came from keeps it), so each scale of a nested run holds
    only its own steps on disk. Returns the export's folder."""
    from fsspec.core import url_to_fs

    from terminalworld.core.assets import load_tokenizer
    from terminalworld.core.records import read_json

    r, out, tokenized = cfg.recipe, cfg.out, cfg.tokenized
    stats = read_json(os.path.join(tokenized, artifacts.STATS))
    steps = r.steps or max(1, math.ceil(stats["pack"]["sequences"] * r.epochs / r.batch_size))
    start = _copy_last_checkpoint(cfg.continue_from, out) if cfg.continue_from is not None else None
    fs, root = url_to_fs(tokenized)
    hf = run_sft(
        SftConfig(
            rows=[fs.unstrip_protocol(p) for p in sorted(fs.glob(f"{root}/{artifacts.PACKED_ROWS}/*.jsonl.gz"))],
            tokenizer=os.path.join(tokenized, artifacts.TRAINING_TOKENIZER),
            cache_dir=os.path.join(out, "cache"),
            output_dir=out,
            export_dir=os.path.join(out, artifacts.HF_EXPORT),
            num_train_steps=steps,
            recipe=r,
            initialize_from_hf=levanter_source(cfg.init_from) if cfg.init_from else None,
        )
    )
    load_tokenizer(stats["render_tokenizer"]).save_pretrained(hf)
    if start is not None:
        _drop_checkpoints_through(out, start)
    return hf


def _complete(fs, base: str) -> list[int]:
    """The steps of the complete checkpoints under `base`, in order."""
    return sorted(n for n, p in step_folders(fs, base).items() if fs.exists(f"{p}/metadata.json"))


def _copy_last_checkpoint(src: str, out: str, run_id: str = "sft") -> int | None:
    """Copy the newest complete Levanter checkpoint of `src`'s run into `out`'s, unless `out` already
    has one of its own (a rerun resumes from where it got to). Returns the step the run continues
    from (None where `out` resumes and `src` no longer holds its checkpoints)."""
    from fsspec.core import url_to_fs

    fs, base = url_to_fs(f"{src.rstrip('/')}/checkpoints/{run_id}")
    _, dest = url_to_fs(f"{out.rstrip('/')}/checkpoints/{run_id}")
    theirs = _complete(fs, base)
    if not _complete(fs, dest):
        if not theirs:
            raise FileNotFoundError(f"no complete Levanter checkpoint under {base} to continue from")
        fs.get(f"{base}/step-{theirs[-1]}/", f"{dest}/step-{theirs[-1]}/", recursive=True)
    return theirs[-1] if theirs else None


def _drop_checkpoints_through(out: str, step: int, run_id: str = "sft") -> list[int]:
    """Remove `out`'s checkpoints at or before `step` (the copy a continued run started from, and
    any incomplete one), only where a complete checkpoint after `step` remains. Returns the steps
    removed."""
    from fsspec.core import url_to_fs

    fs, base = url_to_fs(f"{out.rstrip('/')}/checkpoints/{run_id}")
    if not any(n > step for n in _complete(fs, base)):
        return []
    gone = sorted(n for n in step_folders(fs, base) if n <= step)
    for n in gone:
        fs.rm(f"{base}/step-{n}", recursive=True)
    return gone
