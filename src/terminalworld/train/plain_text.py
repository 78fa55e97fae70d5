"""Unrelated text for a control run: the source files of the training repos as plain documents,
every token in the loss, packed like an arm's rows.

Why: the pilot's base is a Q4_1 GGUF dequantised to float32, so a few SFT steps on anything may
move it back towards the original weights. Fine-tuning the base for as many steps on text that is
not a terminal session, and scoring it on the same held-out rows, tells how much of "every arm
beats the base" that recovery alone gives. The text comes from the training repos only, so the
control never reads a held-out repository's files (the probe's read targets).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from terminalworld.pipeline import artifacts

TEXT_SUFFIXES = (".py", ".md", ".rst", ".txt")


@dataclass(frozen=True, kw_only=True)
class PlainTextJob:
    """`sequences` packed rows of `seq_len` tokens from the files of the repos that `trajectories`
    (a training subset) were recorded in, into `out` as a tokenized artifact."""

    trajectories: list[str]
    out: str
    tokenizer: str
    seq_len: int
    sequences: int
    separator: str = "<|endoftext|>"
    max_file_chars: int = 200_000  # a larger file is cut: one document need not fill a run


def training_repos(files: list[str]) -> list[str]:
    """The repos of the trajectories in `files`, sorted; a malformed line is an error."""
    from terminalworld.core.formats import repos_in
    from terminalworld.errors import InputError

    repos = repos_in(files)
    if not repos:
        raise InputError(f"{', '.join(files)}: no trajectory, so no training repo to take text from")
    return sorted(repos)


def plain_text_rows(repos: list[str], tokenizer: Any, max_len: int, max_chars: int) -> Iterator[dict[str, Any]]:
    """Each text file of `repos`' code trees (in repo then path order) as rows of at most `max_len`
    tokens: a header naming the file, then its text; every token trained."""
    from terminalworld.env.codetrees import discover_code_trees

    wanted = set(repos)
    for tree in (t for t in discover_code_trees() if t.repo in wanted):
        for src, rel in tree.files:
            if not rel.endswith(TEXT_SUFFIXES):
                continue
            text = src.read_text(encoding="utf-8", errors="replace")[:max_chars]
            ids = tokenizer(f"# {tree.repo}/{rel}\n\n{text}", add_special_tokens=False)["input_ids"]
            for k in range(0, len(ids), max_len):
                piece = ids[k : k + max_len]
                yield {
                    "instance_id": f"{tree.repo}/{rel}#{k // max_len}",
                    "input_ids": piece,
                    "loss_weights": [1] * len(piece),
                }


def write_plain_text(job: PlainTextJob) -> dict[str, Any]:
    """Write the packed rows, the training tokenizer and `stats.json` (the shape `train_checkpoint`
    reads); returns the statistics. Fails when the repos hold too little text for `sequences`."""
    from terminalworld.core.assets import load_tokenizer
    from terminalworld.core.records import atomic_jsonl, dumps_row, write_json
    from terminalworld.errors import InputError
    from terminalworld.train.packing import PackStats, pack_rows, training_tokenizer

    if job.sequences < 1 or job.seq_len < 2:
        raise InputError(f"sequences ({job.sequences}) and seq_len ({job.seq_len}) must be positive")
    repos = training_repos(job.trajectories)
    tok = load_tokenizer(job.tokenizer)
    sep = tok.convert_tokens_to_ids(job.separator)
    rows = (r for r in plain_text_rows(repos, tok, job.seq_len - 1, job.max_file_chars) if sep not in r["input_ids"])
    pack = PackStats()
    packed = list(itertools.islice(pack_rows(rows, job.seq_len, sep, pack), job.sequences))
    if len(packed) < job.sequences:
        raise InputError(f"the training repos' text fills {len(packed)} sequences, not {job.sequences}")
    with atomic_jsonl(os.path.join(job.out, artifacts.PACKED_ROWS, "packed-00000.jsonl.gz")) as f:
        for p in packed:
            f.write(dumps_row({"input_ids": p["input_ids"], "loss_weights": p["loss_weights"]}))
    training_tokenizer(job.tokenizer, os.path.join(job.out, artifacts.TRAINING_TOKENIZER), job.separator)
    stats = {
        "arm": "plain-text",
        "repos": repos,
        "documents": sorted({i for p in packed for i in p["instance_ids"]}),
        "seq_len": job.seq_len,
        "separator": job.separator,
        "render_tokenizer": job.tokenizer,
        "inputs": job.trajectories,
        "pack": {**asdict(pack), "sequences": len(packed)},
    }
    write_json(os.path.join(job.out, artifacts.STATS), stats)
    return stats
