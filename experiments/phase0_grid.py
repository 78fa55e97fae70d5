"""Phase 0 (seeds): SWE-ZERO SFT of Qwen3-1.7B-Base under three loss masks at three scales.

Arms: assistant (a), full transcript (b), user (c), with (a) + (c) = (b) token for token.
Scales: nested 10K / 100K / 1M subsets of the 12M corpus. Recipe: one epoch, LR 2e-5 cosine,
warmup 0.03, min_lr_ratio 0.1, weight decay 0.1, max_grad_norm 30, data length 8192 packed into an
architecture of max_seq_len 32768, documents separated by <|endoftext|> (eos ids 151643 and 151645
in generation), seed 42. Every version below is pinned, so every gs:// path is pinned.
"""

from fray.types import ResourceConfig

from terminalworld.pipeline import builders as pipeline
from terminalworld.train.sft import SftRecipe

ARMS = ("assistant", "full", "user")
SCALES = {"10K": 10_000, "100K": 100_000, "1M": 1_000_000}
# 10K and 1M as in the seeds; 100K sits between them (batch 32 on a v5p-16).
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
    "checkpoint": "2026.11.03",
}

corpus = pipeline.corpus(V["corpus"], CORPUS_SOURCE)
subsets = pipeline.subsets(
    corpus, V["subsets"], sizes=list(SCALES.values()), seed=42, resources=ResourceConfig.with_cpu()
)
heldout = pipeline.heldout(
    corpus,
    subsets,
    train_size=SCALES["1M"],
    version=V["heldout"],
    n=100,
    context_turns=14,
    seed=42,
    resources=ResourceConfig.with_cpu(),
)


def recipe(scale: str) -> SftRecipe:
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
    )


def cell(arm: str, scale: str):
    """The checkpoint of one arm at one scale (and, through it, its tokenized data)."""
    data = pipeline.tokenized(
        subsets,
        SCALES[scale],
        arm,
        V["tokenized"],
        TOKENIZER,
        max_len=8191,
        seq_len=8192,
        resources=ResourceConfig.with_cpu(),
    )
    return pipeline.checkpoint(
        data,
        arm,
        scale,
        V["checkpoint"],
        recipe(scale),
        init_from=BASE_MODEL,
        resources=ResourceConfig.with_tpu(TPU[scale]),
    )


def grid() -> dict[tuple[str, str], object]:
    return {(arm, scale): cell(arm, scale) for arm in ARMS for scale in SCALES}
