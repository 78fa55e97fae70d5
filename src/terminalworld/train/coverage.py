"""What a run trained on, counted from its packed rows: per scale (the first `steps x batch` packed
sequences, read in order as Levanter reads them, unshuffled), the sequences, the real tokens (the
documents' own, without separators and padding), the padding, and the loss tokens (positions with a
non-zero weight); per arm, what the tokenize job split or left out (`stats.json`).

The pilot's report states these beside the write-up's scales, so a ratio to the write-up is a ratio
of real tokens, never of padded sequence lengths.
"""

from __future__ import annotations

import os
from typing import Any

from terminalworld.core.records import iter_records, read_json
from terminalworld.pipeline import artifacts


def scale_tokens(tokenized: str, sequences: dict[str, int], separator_id: int) -> dict[str, dict[str, int]]:
    """Per scale name, counts over the first `sequences[name]` packed rows of the tokenized artifact
    `tokenized` (its `packed/*.jsonl.gz` in file order); a scale past the end counts what there is
    and says how many sequences that is, so an epoch over is visible."""
    limit = max(sequences.values(), default=0)
    counts: list[tuple[int, int, int]] = []  # (real, padding-and-separators, loss) per sequence
    for rec in iter_records(os.path.join(tokenized, artifacts.PACKED_ROWS, "*.jsonl.gz")):
        if len(counts) >= limit:
            break
        ids, w = rec.value["input_ids"], rec.value["loss_weights"]
        real = sum(1 for t in ids if t != separator_id)
        counts.append((real, len(ids) - real, sum(1 for x in w if x)))
    out = {}
    for name, n in sequences.items():
        part = counts[:n]
        out[name] = {
            "sequences": len(part),
            "real_tokens": sum(c[0] for c in part),
            "separator_and_padding_tokens": sum(c[1] for c in part),
            "loss_tokens": sum(c[2] for c in part),
        }
    return out


def arm_coverage(tokenized: str, sequences: dict[str, int]) -> dict[str, Any]:
    """One arm's training coverage: `scale_tokens` per scale plus the tokenize job's counts of rows
    split at the window, rows left out for having no trained token, failures and the packed total."""
    from terminalworld.core.assets import load_tokenizer

    stats = read_json(os.path.join(tokenized, artifacts.STATS))
    sep = load_tokenizer(stats["render_tokenizer"]).convert_tokens_to_ids(stats.get("separator", "<|endoftext|>"))
    pack = stats.get("pack", {})
    return {
        "window": stats.get("max_len"),
        "seq_len": stats.get("seq_len"),
        "trajectories": stats.get("examples"),
        "rendered_tokens": stats.get("tokens"),
        "split_trajectories": stats.get("split_examples", 0),
        "split_pieces": stats.get("split_pieces", 0),
        "truncated_tokens": stats.get("truncated_tokens", 0),
        "untrained_documents_left_out": pack.get("untrained", 0),
        "failed": stats.get("failed", {}),
        "packed_sequences": pack.get("sequences"),
        "scales": scale_tokens(tokenized, sequences, sep),
    }


def writeup_ratio(real_tokens: int, writeup_trajectories: int, max_tokens: int = 8192) -> float | None:
    """At most how many times fewer tokens than the write-up's scale of `writeup_trajectories`
    trajectories of up to `max_tokens` tokens (the write-up states trajectories, not tokens, so the
    ratio is an upper bound)."""
    return writeup_trajectories * max_tokens / real_tokens if real_tokens else None
