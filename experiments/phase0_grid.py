"""Phase 0 of the write-up: SWE-ZERO SFT of Qwen3-1.7B-Base under three loss masks at three scales.

Arms: assistant (a), full transcript (b), user (c), with (a) + (c) = (b) token for token.
Scales: nested 10K / 100K / 1M subsets of the 12M corpus. Every version below is pinned, so every
gs:// path is pinned.
"""

import os

from fray.types import ResourceConfig

from terminalworld.corpus import steps as corpus_steps
from terminalworld.pipeline import artifacts
from terminalworld.pipeline.step import Checkpoint
from terminalworld.pipeline.zephyr import Workers
from terminalworld.train import steps as train
from terminalworld.train.sft import MARIN_PRECISION, SftRecipe

os.environ.setdefault("MARIN_PREFIX", artifacts.BUCKET)

ARMS = ("assistant", "full", "user")
SCALES = {"10K": 10_000, "100K": 100_000, "1M": 1_000_000}
# 10K and 1M as in the write-up; 100K sits between them (batch 32 on a v5p-16). The slices are
# estimates, not measurements: no GPU or TPU figure exists yet; they are pending
# benchmarks/results/gpu.json (benchmarks/gpu.py; docs/phase0.md, "Accelerator estimates").
BATCH = {"10K": 8, "100K": 32, "1M": 64}
TPU = {"10K": "v5p-8", "100K": "v5p-16", "1M": "v5p-32"}

BASE_MODEL = "Qwen/Qwen3-1.7B-Base"
TOKENIZER = "qwen3"  # the Qwen3 tokenizer and chat template (the same for the base model)
CORPUS_SOURCE = "gs://marin-us-east5/raw/swe-zero-12m-trajectories"

V = {
    "corpus": "2026.11.01",
    "subsets": "2026.11.01",
    "heldout": "2026.11.01",
    "tokenized": "2026.11.02",
    "checkpoint": "2026.12.07",  # the recipe names whether Levanter shuffles the rows (SftRecipe.shuffle)
}


def recipe(scale: str) -> SftRecipe:
    """The Phase 0 recipe: one epoch, LR 2e-5 cosine to 0.1x, warmup 0.03, weight decay 0.1,
    max_grad_norm 30, data length 8192 packed into an architecture of 32768, seed 42, float32 parameters
    with bfloat16 compute (Marin's `MARIN_PRECISION`). Documents
    are separated by <|endoftext|> (eos ids 151643 and 151645 in generation)."""
    return SftRecipe(
        epochs=1.0,
        batch_size=BATCH[scale],
        learning_rate=2e-5,
        warmup=0.03,
        min_lr_ratio=0.1,
        weight_decay=0.1,
        max_grad_norm=30.0,
        seed=42,
        seq_len=8192,
        max_seq_len=32768,
        mp=MARIN_PRECISION,  # float32 parameters, bfloat16 compute: Marin's own training precision
    )


# Corpus-scale stages run as Zephyr jobs: the step itself is a small CPU driver, the shards run on
# CPU workers. The 12M corpus is cut into 512 shards for 128 workers; each sampler shard holds at
# most 1M keys (about 0.2 GB), so 4 GB per worker leaves room. Tokenizing cuts 10,000 rows per shard.
SAMPLER_WORKERS = Workers(count=128, cpu=1, ram="4g", shards=512)
SHARD_ROWS = 10_000


def tokenize_workers(scale: str) -> Workers:
    """One worker per shard of rows, at most 100 (1M rows: 100 shards of 10,000)."""
    return Workers(count=min(100, -(-SCALES[scale] // SHARD_ROWS)), cpu=1, ram="8g")


corpus = corpus_steps.adopted_corpus(source=CORPUS_SOURCE, version=V["corpus"])
subsets = corpus_steps.subsets(
    corpus=corpus,
    sizes=list(SCALES.values()),
    seed=42,
    workers=SAMPLER_WORKERS,
    resources=ResourceConfig.with_cpu(),
    version=V["subsets"],
)
heldout = corpus_steps.heldout(
    corpus=corpus,
    subsets=subsets,
    train_size=SCALES["1M"],
    n=100,
    context_turns=14,
    seed=42,
    workers=SAMPLER_WORKERS,
    resources=ResourceConfig.with_cpu(),
    version=V["heldout"],
)


def cell(arm: str, scale: str) -> Checkpoint:
    """The checkpoint of one arm at one scale (and, through it, its tokenized data)."""
    data = train.tokenized(
        subsets=subsets,
        size=SCALES[scale],
        arm=arm,
        scale=scale,
        tokenizer=TOKENIZER,
        max_len=8191,
        seq_len=8192,
        workers=tokenize_workers(scale),
        shard_rows=SHARD_ROWS,
        resources=ResourceConfig.with_cpu(),
        version=V["tokenized"],
    )
    return train.checkpoint(
        tokenized=data,
        arm=arm,
        scale=scale,
        recipe=recipe(scale),
        init_from=BASE_MODEL,
        resources=ResourceConfig.with_tpu(TPU[scale]),
        version=V["checkpoint"],
    )


def grid() -> dict[tuple[str, str], Checkpoint]:
    """Every (arm, scale) checkpoint."""
    return {(arm, scale): cell(arm, scale) for arm in ARMS for scale in SCALES}
