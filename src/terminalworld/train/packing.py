"""Our rendered rows as Levanter training data, without its three traps:

1. `PrebuiltLmDatasetFormat` does not pack: every cached row must be exactly `train_seq_len`
   tokens. `pack_rows` packs greedily, in input order, never splitting a document, and pads
   with the separator at loss 0.
2. Levanter's `loss_weight[t]` weights the prediction of token t+1 made at position t. Our rows say
   which *tokens* are trained, so `pack_rows` shifts them exactly once: `lw[t] = w[t+1]` inside a
   document, 0 on a document's last token, on separators and on padding.
3. With `block_cross_document_attention` Levanter starts a new segment after every `eos_id`
   token, and `eos_id` is the training tokenizer's eos. Qwen3's chat tokenizer calls `<|im_end|>`
   eos, which ends every turn. The separator must therefore be a token that never occurs inside a
   document (Qwen3-Base's `<|endoftext|>`, id 151643), and the tokenizer Levanter loads must report
   that token as eos: `training_tokenizer` writes such a copy and `pack_rows` refuses a separator
   that occurs inside a document.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from copy import deepcopy
from dataclasses import dataclass
from typing import Any

import numpy as np

from terminalworld.errors import PackingError

QWEN3_DOCUMENT_SEPARATOR = "<|endoftext|>"


@dataclass
class PackStats:
    """Running totals of one packing pass: documents packed, sequences emitted, document tokens
    (separators excluded), padding tokens, and documents left out for having no trained token."""

    documents: int = 0
    sequences: int = 0
    tokens: int = 0
    padding: int = 0
    untrained: int = 0


def pack_problem(row: dict[str, Any], seq_len: int, separator_id: int) -> str | None:
    """Why a rendered row cannot be packed (None when it can): mismatched weights, too long for
    `seq_len` with its separator, or the separator inside the document."""
    n, w = len(row["input_ids"]), len(row["loss_weights"])
    if w != n:
        return f"{w} loss weights for {n} tokens"
    if n + 1 > seq_len:
        return f"{n} tokens do not fit seq_len {seq_len} with a separator"
    if separator_id in row["input_ids"]:
        return (
            f"the separator id {separator_id} occurs inside the document, so Levanter would cut attention "
            "there; use a token that is not a turn terminator"
        )
    return None


def shifted_weights(loss_weights: np.ndarray) -> np.ndarray:
    """Per-position weights for Levanter from per-token weights: position t predicts token t+1."""
    out = np.zeros(len(loss_weights), dtype=np.float32)
    out[:-1] = loss_weights[1:]
    return out


def pack_rows(
    rows: Iterable[dict[str, Any]], seq_len: int, separator_id: int, stats: PackStats | None = None
) -> Iterator[dict[str, Any]]:
    """Greedy packing in input order into rows of exactly `seq_len` tokens: a row is emitted as soon
    as the next document does not fit, and never reopened. Each row is `{input_ids, loss_weights,
    instance_ids}` with Levanter-ready (shifted) weights; `stats`, when given, is updated in place.

    Each document is followed by one separator token, so a document may hold at most seq_len-1
    tokens (render with `--max-len` below that). Raises `PackingError` for a longer document or one
    that contains the separator. A document with no trained prediction is left out (and counted):
    a sequence made only of such documents would give Levanter's loss 0/0, a NaN step."""
    stats = stats if stats is not None else PackStats()
    ids: list[np.ndarray] = []
    weights: list[np.ndarray] = []
    names: list[str] = []
    used = 0

    def flush() -> dict[str, Any]:
        pad = seq_len - used
        stats.sequences += 1
        stats.padding += pad
        return {
            "input_ids": np.concatenate([*ids, np.full(pad, separator_id, dtype=np.int32)]).tolist(),
            "loss_weights": np.concatenate([*weights, np.zeros(pad, dtype=np.float32)]).tolist(),
            "instance_ids": list(names),
        }

    for row in rows:
        doc = np.asarray(row["input_ids"], dtype=np.int32)
        w = np.asarray(row["loss_weights"], dtype=np.float32)
        problem = pack_problem(row, seq_len, separator_id)
        if problem:
            raise PackingError(f"{row.get('instance_id')}: {problem}")
        shifted = shifted_weights(w)
        if not shifted.any():
            stats.untrained += 1
            continue
        if used + len(doc) + 1 > seq_len:
            yield flush()
            ids, weights, names, used = [], [], [], 0
        ids += [doc, np.array([separator_id], dtype=np.int32)]
        weights += [shifted, np.zeros(1, dtype=np.float32)]
        names.append(row.get("instance_id", ""))
        used += len(doc) + 1
        stats.documents += 1
        stats.tokens += len(doc)
    if names:
        yield flush()


def training_tokenizer(tokenizer_path: str, out_dir: str, separator: str = QWEN3_DOCUMENT_SEPARATOR) -> str:
    """Write a copy of a tokenizer whose eos is the document separator, for Levanter to load, and
    return its folder. Rendering still uses the original tokenizer and its chat template."""
    from terminalworld.core.assets import load_tokenizer

    tok = load_tokenizer(tokenizer_path)
    sep_id = tok.convert_tokens_to_ids(separator)
    if sep_id is None or tok.convert_ids_to_tokens(sep_id) != separator:
        raise PackingError(f"{tokenizer_path}: no token {separator!r} to use as document separator")
    if not os.path.exists(os.path.join(out_dir, "tokenizer_config.json")):
        os.makedirs(out_dir, exist_ok=True)
        copy = deepcopy(tok)  # the loaded tokenizer is shared (cached); never mutate it
        copy.eos_token = separator
        copy.save_pretrained(out_dir)
    return out_dir
