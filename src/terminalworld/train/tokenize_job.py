"""One arm rendered, tokenized and packed for Levanter as a sharded Zephyr job.

A counting pass over the inputs' raw lines (no parsing) cuts records skip.. into shards of
`shard_rows` records. Each shard writes, atomically and in this order:

- `rows/rows-{shard:05d}.jsonl.gz`: its training rows, byte-identical to the same records' rows
  from `train.render_rows.render_file`, so the shards concatenated are the single process's rows;
- `packed/packed-{shard:05d}.jsonl.gz`: those rows packed for Levanter (packing restarts at each
  shard, so packed rows depend on `shard_rows`, a recipe value, never on the worker count);
- `rows/rows-{shard:05d}.json`: its counts, last: a shard whose counts exist is done, so a killed
  job that runs again resumes by shard.

A trajectory longer than `max_len` tokens is split into consecutive pieces of at most `max_len`
(`render_rows.split_row`), each packed as its own document: no trajectory is cut, and the counts say
how many were split. A failing example (malformed, unrenderable, unpackable) is counted and named in
its shard's counts and never fails the job; the merged counts go to `stats.json`.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import asdict, dataclass
from typing import Any

from terminalworld.core.records import FilePart, expand_all, is_record_line, iter_lines, iter_part
from terminalworld.pipeline import artifacts
from terminalworld.pipeline.zephyr import Workers, run_shards


@dataclass(frozen=True, kw_only=True)
class TokenizeJob:
    """Records skip.. of `inputs`, rendered under `arm` (`pretrain`: every token trained, plain LM
    text), packed to `seq_len` with `separator` between documents, into `out`."""

    inputs: list[str]
    out: str
    arm: str
    tokenizer: str
    max_len: int
    seq_len: int
    skip: int = 0
    separator: str = "<|endoftext|>"
    shard_rows: int = 10_000


def _record_lines(path: str):
    """The line (element, row) number of every record of a file, without parsing JSON Lines."""
    if path.endswith((".json", ".parquet")):
        return (rec.line for rec in iter_part(FilePart(path)))
    return (n for n, raw in iter_lines(path) if is_record_line(raw))


def range_parts(files: list[str], skip: int, shard_rows: int) -> list[list[FilePart]]:
    """Records skip.. of `files` in shards of `shard_rows` consecutive records (a shard may span
    files), each shard as its file parts."""
    shards: list[list[FilePart]] = []
    r = 0
    for path in files:
        first = None  # first line of this file's part of the open shard
        for n in _record_lines(path):
            if r >= skip and (r - skip) % shard_rows == 0:
                if first is not None:
                    shards[-1].append(FilePart(path, first, n))
                shards.append([])
                first = n
            elif r >= skip and first is None:
                first = n
            r += 1
        if first is not None:
            shards[-1].append(FilePart(path, first))
    return shards


def shard_file(kind: str, index: int, suffix: str) -> str:
    """`rows/rows-00003.jsonl.gz` and the like: one shard's file of one kind."""
    folder = artifacts.PACKED_ROWS if kind == "packed" else artifacts.TOKENIZED_ROWS_DIR
    return os.path.join(folder, f"{kind}-{index:05d}{suffix}")


def _tokenize_shard(index: int, parts: list[FilePart], *, job: TokenizeJob) -> dict[str, Any]:
    """Render, pack and count one shard, unless an earlier run finished it."""
    import fsspec

    from terminalworld.core.assets import load_tokenizer
    from terminalworld.core.formats import trajectories_of
    from terminalworld.core.records import atomic_jsonl, dumps_row, read_json, write_json
    from terminalworld.core.render import build_renderer
    from terminalworld.train.packing import PackStats, pack_problem, pack_rows
    from terminalworld.train.render_rows import RenderStats, rendered_rows, split_row

    done = os.path.join(job.out, shard_file("rows", index, ".json"))
    fs, path = fsspec.core.url_to_fs(done)
    if fs.exists(path):
        return read_json(done)
    renderer = build_renderer(tokenizer=job.tokenizer)  # never cut: long rows are split below
    stats = RenderStats()
    items = trajectories_of(itertools.chain.from_iterable(iter_part(p) for p in parts))
    rows_path = os.path.join(job.out, shard_file("rows", index, ".jsonl.gz"))
    sep = load_tokenizer(job.tokenizer).convert_tokens_to_ids(job.separator)
    pack = PackStats()
    with atomic_jsonl(rows_path) as rows_file:

        def packable():
            """Each rendered row, written to the rows file, then (if it can be packed) to packing."""
            rendered = rendered_rows(items, renderer, "full" if job.arm == "pretrain" else job.arm, stats)
            rows = (piece for row in rendered for piece in split_row(row, job.max_len, stats))
            for line, row in enumerate(rows, start=1):
                rows_file.write(dumps_row(row))
                if job.arm == "pretrain":
                    row = {**row, "loss_weights": [1] * len(row["input_ids"])}
                problem = pack_problem(row, job.seq_len, sep)
                if problem:
                    stats.fail(rows_path, line, row["instance_id"], "unpackable", problem)
                else:
                    yield row

        with atomic_jsonl(os.path.join(job.out, shard_file("packed", index, ".jsonl.gz"))) as f:
            for p in pack_rows(packable(), job.seq_len, sep, pack):
                f.write(dumps_row({"input_ids": p["input_ids"], "loss_weights": p["loss_weights"]}))
    result = {
        "shard": index,
        "inputs": [asdict(p) for p in parts],
        **asdict(stats),
        "pack": asdict(pack),
    }
    write_json(done, result)
    return result


@dataclass(frozen=True)
class ShardedTokenize:
    """A tokenize job and the Zephyr workers that run its shards."""

    job: TokenizeJob
    workers: Workers


def tokenize_sharded(cfg: ShardedTokenize) -> dict[str, Any]:
    """Run every shard of the job not yet done on its workers, then write the training tokenizer and
    the merged `stats.json`; returns the merged statistics."""
    job, workers = cfg.job, cfg.workers
    from terminalworld.core.records import write_json
    from terminalworld.train.packing import PackStats, training_tokenizer
    from terminalworld.train.render_rows import RenderStats

    specs = range_parts(expand_all(job.inputs), job.skip, job.shard_rows)
    results = run_shards(_tokenize_shard, specs, workers, name=f"tokenize-{job.arm}", job=job)
    render, pack = RenderStats(), PackStats()
    for r in results:
        render.add(RenderStats(**{k: r.get(k, v) for k, v in asdict(RenderStats()).items()}))
        for k, v in r["pack"].items():
            setattr(pack, k, getattr(pack, k) + v)
    training_tokenizer(job.tokenizer, os.path.join(job.out, artifacts.TRAINING_TOKENIZER), job.separator)
    stats = {
        **asdict(render),
        "arm": job.arm,
        "seq_len": job.seq_len,
        "max_len": job.max_len,
        "separator": job.separator,
        "render_tokenizer": job.tokenizer,
        "inputs": job.inputs,
        "skip": job.skip,
        "shard_rows": job.shard_rows,
        "shards": [
            {k: r.get(k) for k in ("shard", "examples", "tokens", "split_examples", "failed", "peak_rss_mib")}
            for r in results
        ],
        "pack": asdict(pack),
    }
    write_json(os.path.join(job.out, artifacts.STATS), stats)
    return stats
