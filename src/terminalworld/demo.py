"""The whole pipeline in miniature, as one Marin step graph (see experiments/local_demo.py).

Record a real-shell corpus; draw nested subsets, whose smaller one is the SFT set and whose
remainder is the base model's pretraining text (held apart from SFT); sample held-out rows from
repos unseen in either; pretrain a tiny Qwen3 "base" as a plain language model (every token
trained), so that, like Qwen3-1.7B-Base, it starts with some knowledge of terminal output;
fine-tune it under each loss-mask arm; export to HF; score the base and the arms on the held-out
rows; compare.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from terminalworld.pipeline import builders as pipeline
from terminalworld.train.sft import SftRecipe


@dataclass(frozen=True)
class DemoConfig:
    version: str = "2026.12.02"
    trajectories: int = 160
    record_seed: int = 0
    max_output_chars: int = 1000  # shorter observations than SWE-ZERO's 8000 keep rows CPU-sized
    sft_size: int = 40
    pretrain_size: int = 100  # rows sft_size..pretrain_size of the larger subset
    heldout_n: int = 24
    context_turns: int = 3  # rows of about 1.7K tokens, inside the trained sequence length
    seed: int = 42
    tokenizer: str = "smollm2"  # a real tokenizer with a small vocabulary keeps CPU training fast
    seq_len: int = 2048
    # Training cost on CPU is dominated by the 49K-word softmax, i.e. by width x tokens.
    tiny: dict[str, int] = field(
        default_factory=lambda: {
            "hidden_dim": 32,
            "intermediate_dim": 96,
            "num_layers": 2,
            "num_heads": 2,
            "num_kv_heads": 1,
            "head_dim": 16,
        }
    )
    pretrain_epochs: float = 3.0
    pretrain_lr: float = 5e-3
    sft_epochs: float = 2.0
    sft_lr: float = 3e-3
    batch_size: int = 2
    arms: tuple[str, ...] = ("assistant", "full", "user")


def build(cfg: DemoConfig) -> dict[str, object]:
    """The demo's handles by role; `report` depends on everything else."""
    v = cfg.version
    corpus = pipeline.recorded_corpus(v, cfg.trajectories, cfg.record_seed, cfg.max_output_chars)
    subsets = pipeline.subsets(corpus, v, sizes=[cfg.sft_size, cfg.pretrain_size], seed=cfg.seed)
    heldout = pipeline.heldout(corpus, subsets, cfg.pretrain_size, v, cfg.heldout_n, cfg.context_turns, cfg.seed)
    common = dict(
        batch_size=cfg.batch_size,
        warmup=0.1,
        weight_decay=0.0,
        max_grad_norm=1.0,
        seq_len=cfg.seq_len,
        max_seq_len=cfg.seq_len,
    )
    text = pipeline.tokenized(
        subsets,
        cfg.pretrain_size,
        "pretrain",
        v,
        cfg.tokenizer,
        cfg.seq_len - 1,
        cfg.seq_len,
        skip=cfg.sft_size,
        scale="demo",
    )
    base = pipeline.checkpoint(
        text,
        "base",
        "demo",
        v,
        SftRecipe(epochs=cfg.pretrain_epochs, learning_rate=cfg.pretrain_lr, tiny=cfg.tiny, **common),
    )
    models = {"base": base}
    for arm in cfg.arms:
        data = pipeline.tokenized(
            subsets, cfg.sft_size, arm, v, cfg.tokenizer, cfg.seq_len - 1, cfg.seq_len, scale="demo"
        )
        models[arm] = pipeline.checkpoint(
            data, arm, "demo", v, SftRecipe(epochs=cfg.sft_epochs, learning_rate=cfg.sft_lr, **common), init_from=base
        )
    scores = {name: pipeline.scores(m, name, heldout, cfg.heldout_n, v) for name, m in models.items()}
    report = pipeline.report(scores, base="base", reference="full" if "full" in cfg.arms else None, version=v)
    return {"corpus": corpus, "subsets": subsets, "heldout": heldout, **models, "report": report}
