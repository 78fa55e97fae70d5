"""Nested subsets and the held-out set as Zephyr jobs, byte-identical to `corpus.sampling`.

Both rules are mergeable, so each shard keeps only what could win and the driver merges:

- Subsets: each shard keeps its k best-ranked distinct records as (key, file, line, content
  digest, id hash) (a bounded heap of keys, no row text) and writes them sorted to scratch; the
  driver merges the sorted runs and takes the first k with distinct digests (the duplicate rule of
  `sampling.make_subsets`, whose counts the shards' skipped copies and the merge's add up to), then a second pass has each shard copy its selected lines (raw bytes, no parsing) with
  their ranks, and the driver interleaves the runs by rank into every subset file at once.
- Held-out: the training subsets' repos and instance ids are collected by one pass; each corpus
  shard then keeps, per eligible repo, its smallest candidate, plus the held-out rows of only its
  n best repos (no other can be among the n best overall); the driver takes the n best repos.

Ties on the 64-bit key are broken by reading position (file order, then line), as the single
process does, so the outputs do not depend on the shard count or the number of workers. Malformed
lines are counted where they are read and the tallies merged (`Tally.merged`). Memory: a shard
holds k keys (subsets) or one key per repo plus n rows (held-out); the driver holds k (key, file,
line) triples or one key per repo. The corpus itself is never held.
"""

from __future__ import annotations

import contextlib
import heapq
import io
import itertools
import os
import pickle
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from terminalworld.core.formats import trajectories_of
from terminalworld.core.records import (
    FilePart,
    Tally,
    as_line,
    atomic_jsonl,
    atomic_output,
    expand_all,
    iter_lines,
    iter_part,
    tallied,
)
from terminalworld.corpus.sampling import (
    HeldoutConfig,
    SubsetsConfig,
    check_heldout,
    check_train,
    classed_row,
    count_ids,
    digest64,
    eligibility,
    sample_key,
    subset_path,
    subset_sizes,
    too_few,
    train_sets,
    write_heldout,
    write_subsets_manifest,
)
from terminalworld.pipeline.zephyr import Workers, run_shards

Spec = list[tuple[int, FilePart]]  # one shard: (file index, part of that file)


def shard_parts(files: list[str], shards: int | None) -> list[Spec]:
    """The files cut into shards: contiguous groups of files when there are at least as many files
    as shards (None: one shard per file), else every file striped by line number."""
    n = len(files) if shards is None else max(1, shards)
    indexed = list(enumerate(files))
    if len(files) >= n:
        bounds = [round(i * len(files) / n) for i in range(n + 1)]
        return [[(i, FilePart(f)) for i, f in indexed[a:b]] for a, b in itertools.pairwise(bounds)]
    stripes = -(-n // len(files))
    return [[(i, FilePart(f, stripe=s, stripes=stripes))] for i, f in indexed for s in range(stripes)]


def _pairs(spec: Spec, tally: Tally):
    """(file index, record, trajectory) of the valid records of a shard, tallying the rest."""
    order = {part.path: i for i, part in spec}
    records = itertools.chain.from_iterable(iter_part(part) for _, part in spec)
    for rec, traj in tallied(trajectories_of(records), tally):
        yield order[rec.file], rec, traj


@contextlib.contextmanager
def _scratch(scratch: str | None) -> Iterator[str]:
    """A scratch folder: `scratch` (removed afterwards) or a local temporary one."""
    if scratch is None:
        with tempfile.TemporaryDirectory(prefix="tw-sharded-") as tmp:
            yield tmp
        return
    from fsspec.core import url_to_fs

    fs, path = url_to_fs(scratch)
    try:
        yield scratch
    finally:
        if fs.exists(path):
            fs.rm(path, recursive=True)


def _save_array(path: str, array: np.ndarray) -> None:
    buf = io.BytesIO()
    np.save(buf, array)
    with atomic_output(path) as f:
        f.write(buf.getvalue())


def _load_array(path: str) -> np.ndarray:
    import fsspec

    with fsspec.open(path, "rb") as f:
        return np.load(io.BytesIO(f.read()))


# --- nested subsets ---------------------------------------------------------------------------

_KEYS = np.dtype([("key", "<u8"), ("file", "<u4"), ("line", "<u8"), ("digest", "<u8"), ("id", "<u8")])
_RANKS = np.dtype([("key", "<u8"), ("file", "<u4"), ("line", "<u8")])


def _rank_shard(index: int, spec: Spec, *, seed: int, k: int, scratch: str) -> dict[str, Any]:
    """A shard's k best-ranked distinct records as (key, file, line, digest, id hash), sorted, and
    the ranks of the occurrences it skipped as duplicates, written to scratch; its tally. The
    duplicate rule is `sampling.make_subsets`'s, applied within the shard."""
    tally = Tally()
    heap: list[tuple[int, int, int, int]] = []  # negated rank, then digest: the worst kept on top
    live: dict[int, tuple[int, int, int, int]] = {}  # digest -> (key, file, line, id hash)
    skipped: list[tuple[int, int, int]] = []

    def top() -> tuple[int, int, int]:
        while live.get(heap[0][3], (None,) * 3)[:3] != (-heap[0][0], -heap[0][1], -heap[0][2]):
            heapq.heappop(heap)
        return -heap[0][0], -heap[0][1], -heap[0][2]

    for fi, rec, traj in _pairs(spec, tally):
        rank = (sample_key(seed, traj.instance_id, rec.file, rec.line), fi, rec.line)
        if len(live) == k and rank > top():
            continue
        digest = digest64(rec.line_bytes())
        if digest in live:
            skipped.append(max(rank, live[digest][:3]))
            if rank > live[digest][:3]:
                continue
        elif len(live) == k:
            top()
            del live[heapq.heappop(heap)[3]]
        live[digest] = (*rank, digest64(traj.instance_id.encode()))
        heapq.heappush(heap, (-rank[0], -rank[1], -rank[2], digest))
        if len(heap) > 2 * k:  # dead entries of replaced copies: memory stays O(k)
            heap[:] = [(-v[0], -v[1], -v[2], d) for d, v in live.items()]
            heapq.heapify(heap)
    keys = np.array(sorted((*v[:3], d, v[3]) for d, v in live.items()), dtype=_KEYS)
    path = os.path.join(scratch, f"keys-{index:05d}.npy")
    _save_array(path, keys)
    skipped_path = os.path.join(scratch, f"skipped-{index:05d}.npy")
    _save_array(skipped_path, np.array(sorted(skipped), dtype=_RANKS))
    return {"keys": path, "skipped": skipped_path, **tally.to_json()}


def _fetch_shard(index: int, spec: list[tuple[FilePart, np.ndarray, np.ndarray]], *, scratch: str) -> dict[str, Any]:
    """A shard's selected lines (raw bytes, newline-terminated) written to scratch in rank order,
    with their ranks beside them. Lines are spilled to a local file as they are read and copied
    out in rank order, so memory holds offsets, never rows."""
    found: list[tuple[int, int]] = []  # (rank, spill offset)
    with tempfile.TemporaryFile() as spill:
        for part, lines, ranks in spec:
            want = dict(zip(lines.tolist(), ranks.tolist(), strict=True))
            last = int(lines.max())
            for n, raw in iter_lines(part.path):
                if n in want:
                    found.append((want[n], spill.tell()))
                    spill.write(as_line(raw))
                if n >= last:
                    break
        found.sort()
        rows = os.path.join(scratch, f"rows-{index:05d}.jsonl")
        with atomic_output(rows) as f:
            for _, offset in found:
                spill.seek(offset)
                f.write(spill.readline())
    ranks_path = os.path.join(scratch, f"ranks-{index:05d}.npy")
    _save_array(ranks_path, np.array([r for r, _ in found], dtype=np.int64))
    return {"rows": rows, "ranks": ranks_path, "n": len(found)}


def _keys_run(path: str) -> Iterator[tuple[int, int, int, int, int]]:
    keys = _load_array(path)
    return zip(*(keys[name].tolist() for name in _KEYS.names), strict=True)


def _distinct(merged: Iterator[tuple[int, int, int, int, int]], k: int) -> tuple[list[tuple], int]:
    """The first k entries of the merged runs with distinct digests, and how many were skipped as
    copies of an earlier one (duplicates across shards)."""
    chosen, seen, skipped = [], set(), 0
    for entry in merged:
        if len(chosen) == k:
            break
        if entry[3] in seen:
            skipped += 1
            continue
        seen.add(entry[3])
        chosen.append(entry)
    return chosen, skipped


def _rows_run(result: dict[str, Any]) -> Iterator[tuple[int, bytes]]:
    import fsspec

    ranks = _load_array(result["ranks"]).tolist()
    with fsspec.open(result["rows"], "rb") as f:
        yield from zip(ranks, f, strict=True)


@dataclass(frozen=True)
class SubsetsJob:
    """Nested subsets drawn by a Zephyr job: the sampling, the workers, and the scratch folder for
    the shards' intermediate files (None: a local temporary one)."""

    sampling: SubsetsConfig
    workers: Workers
    scratch: str | None = None


def make_subsets_sharded(job: SubsetsJob) -> dict[str, Any]:
    """`sampling.make_subsets` of the job's sampling as a Zephyr job: the same files, byte for byte;
    returns the manifest."""
    cfg, workers, scratch = job.sampling, job.workers, job.scratch
    sizes = subset_sizes(cfg)
    k = sizes[-1]
    files = expand_all(cfg.corpus)
    specs = shard_parts(files, workers.shards)
    with _scratch(scratch) as tmp:
        ranked = run_shards(_rank_shard, specs, workers, name="subsets-rank", seed=cfg.seed, k=k, scratch=tmp)
        tally = Tally.merged([Tally.from_json(r) for r in ranked], files)
        chosen, duplicates = _distinct(heapq.merge(*(_keys_run(r["keys"]) for r in ranked)), k)
        if len(chosen) < k:
            raise too_few(len(chosen), k)
        last = chosen[-1][:3]
        for r in ranked:
            skipped = _load_array(r["skipped"])
            duplicates += sum(rank <= last for rank in zip(*(skipped[n].tolist() for n in _RANKS.names), strict=True))
        instance_ids = count_ids([entry[4] for entry in chosen], sizes)
        selected: dict[int, list[tuple[int, int]]] = {}  # file index -> (line, rank)
        for rank, (_, fi, line, _, _) in enumerate(chosen):
            selected.setdefault(fi, []).append((line, rank))
        del chosen
        fetch = []
        for spec in specs:
            parts = []
            for fi, part in spec:
                picks = [(line, rank) for line, rank in selected.get(fi, []) if part.holds(line)]
                if picks:
                    lines, ranks = zip(*sorted(picks), strict=True)
                    parts.append((part, np.array(lines, dtype=np.int64), np.array(ranks, dtype=np.int64)))
            if parts:
                fetch.append(parts)
        fetched = run_shards(_fetch_shard, fetch, workers, name="subsets-fetch", scratch=tmp)
        with contextlib.ExitStack() as stack:
            outs = [(size, stack.enter_context(atomic_jsonl(subset_path(cfg.out, size)))) for size in sizes]
            written = 0
            for written, (_, raw) in enumerate(heapq.merge(*(_rows_run(r) for r in fetched)), start=1):
                line = raw.decode()
                for size, f in outs:
                    if written <= size:
                        f.write(line)
            if written != k:
                raise RuntimeError(f"the fetch pass found {written} of the {k} selected rows")
    return write_subsets_manifest(cfg, sizes, tally, duplicates, instance_ids)


# --- held-out set -----------------------------------------------------------------------------


def _train_shard(index: int, spec: Spec) -> dict[str, Any]:
    """The training repos and instance ids of a shard of the training files; its tally."""
    tally = Tally()
    repos, ids = train_sets(((rec, traj) for _, rec, traj in _pairs(spec, tally)))
    return {"repos": sorted(repos), "ids": sorted(ids), **tally.to_json()}


def _candidate_shard(index: int, spec: Spec, *, cfg: HeldoutConfig, train: str) -> dict[str, Any]:
    """Per eligible repo of a shard, its smallest (key, file, line); the held-out rows of the n
    repos whose candidates are smallest; the tally of every reason a trajectory was not eligible."""
    import fsspec

    with fsspec.open(train, "rb") as f:
        repos, ids = pickle.load(f)
    tally = Tally()
    best: dict[str, tuple[int, int, int]] = {}
    rows: dict[str, dict[str, Any]] = {}
    bar = None  # the n-th smallest candidate at the last pruning; it never grows

    def prune() -> tuple[int, int, int] | None:
        if len(best) < cfg.n:
            return None
        nth = heapq.nsmallest(cfg.n, best.values())[-1]
        for repo in [r for r in rows if best[r] > nth]:
            del rows[repo]
        return nth

    for fi, rec, traj in _pairs(spec, tally):
        if not eligibility(rec, traj, cfg, repos, ids, tally):
            continue
        cand = (sample_key(cfg.seed, traj.instance_id, rec.file, rec.line), fi, rec.line)
        if traj.repo in best and cand >= best[traj.repo]:
            continue
        best[traj.repo] = cand
        if bar is None or cand <= bar:
            rows[traj.repo] = classed_row(traj, cfg.context_turns)
        else:
            rows.pop(traj.repo, None)
        if len(rows) > 2 * cfg.n:
            bar = prune()
    prune()
    return {"best": best, "rows": rows, **tally.to_json()}


@dataclass(frozen=True)
class HeldoutJob:
    """A held-out set drawn by a Zephyr job: the sampling, the workers, and the scratch folder."""

    sampling: HeldoutConfig
    workers: Workers
    scratch: str | None = None


def sample_heldout_sharded(job: HeldoutJob) -> dict[str, Any]:
    """`sampling.sample_heldout` of the job's sampling as a Zephyr job: the same rows and manifest,
    byte for byte."""
    cfg, workers, scratch = job.sampling, job.workers, job.scratch
    check_heldout(cfg)
    train_files, files = expand_all(cfg.train), expand_all(cfg.corpus)
    trained = run_shards(_train_shard, shard_parts(train_files, workers.shards), workers, name="heldout-train")
    train_tally = Tally.merged([Tally.from_json(r) for r in trained], train_files)
    check_train(cfg, train_tally)
    train_repos = {r for t in trained for r in t["repos"]}
    train_ids = {i for t in trained for i in t["ids"]}
    del trained
    with _scratch(scratch) as tmp:
        train = os.path.join(tmp, "train-sets.pkl")
        with atomic_output(train) as f:
            pickle.dump((train_repos, train_ids), f, protocol=pickle.HIGHEST_PROTOCOL)
        shards = run_shards(
            _candidate_shard,
            shard_parts(files, workers.shards),
            workers,
            name="heldout-candidates",
            cfg=cfg,
            train=train,
        )
    tally = Tally.merged([Tally.from_json(r) for r in shards], files)
    best: dict[str, tuple[tuple[int, int, int], int]] = {}  # repo -> (candidate, shard)
    for s, result in enumerate(shards):
        for repo, cand in result["best"].items():
            if repo not in best or cand < best[repo][0]:
                best[repo] = (cand, s)
    chosen = heapq.nsmallest(cfg.n, best.items(), key=lambda kv: kv[1][0])
    rows = [shards[s]["rows"][repo] for repo, (_, s) in chosen]
    return write_heldout(cfg, rows, tally, train_tally, train_repos, train_ids, len(best))
