"""Deterministic sampling from a trajectory corpus: nested training subsets and the held-out set.

Both rank trajectories by a seeded hash of (instance_id, file name, line), so a sample depends only
on the inputs and the seed, never on the machine, the number of workers or the corpus size read
so far.

Nested subsets (`make_subsets`). One streaming pass keeps the K = max(sizes) smallest keys in a
bounded max-heap (memory O(K) keys, never O(corpus)); a row is spilled to a temporary file only
when its key enters the heap, which happens for about K·(1 + ln(N/K)) of N rows in random order.
At the end the spill is filtered to the final K keys and sorted by key: the subset of size k is the
first k rows of that ranking, so every smaller subset is contained in every larger one (the 10K
file is literally the first 10K lines of the 100K file).

Held-out set (`sample_heldout`). The training subsets' repos and instance ids are collected
first; then one pass over the corpus keeps, per eligible repo, its smallest-key trajectory, and the
n repos whose candidates have the smallest keys are written in key order in the held-out schema (`core.heldout`).
"""

from __future__ import annotations

import hashlib
import heapq
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from tqdm import tqdm

from terminalworld.core.formats import iter_trajectories
from terminalworld.core.heldout import heldout_row, observed_prefix
from terminalworld.core.records import BadLine, Record, Tally, atomic_jsonl, dumps_row, expand_all, tallied, write_json
from terminalworld.core.trajectories import Trajectory
from terminalworld.errors import InputError
from terminalworld.options import option
from terminalworld.pipeline.artifacts import subset_file


def sample_key(seed: int, instance_id: str, file: str, line: int) -> int:
    """The seeded 64-bit ranking key of one record; samplers keep the smallest keys."""
    digest = hashlib.blake2b(f"{seed}\0{instance_id}\0{os.path.basename(file)}:{line}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big")


def _trajectories(patterns: list[str], tally: Tally, desc: str) -> Iterator[tuple[Record, Trajectory]]:
    """(record, trajectory) of every valid record; the rest are tallied as malformed."""
    return tallied(tqdm(iter_trajectories(patterns), desc=desc, unit="traj", mininterval=1.0), tally)


@dataclass(frozen=True)
class SubsetsConfig:
    """Nested subsets of a corpus: which files, which sizes, which seed, where to write."""

    corpus: list[str] = option(help="corpus file or glob; repeat (or comma-separate) for several")
    out: str = option(help="output folder: subset-{size}.jsonl.gz per size, plus manifest.json")
    sizes: str = option("10000,100000,1000000", help="comma-separated subset sizes")
    seed: int = option(42)


def subset_path(out: str, size: int) -> str:
    """The file of the subset of `size` inside a subsets folder."""
    return os.path.join(out, subset_file(size))


def subset_sizes(cfg: SubsetsConfig) -> list[int]:
    """The distinct subset sizes, ascending; raises `InputError` unless all are positive."""
    sizes = sorted({int(s) for s in cfg.sizes.split(",") if s.strip()})
    if not sizes or sizes[0] <= 0:
        raise InputError(f"--sizes must be positive integers, got {cfg.sizes!r}")
    return sizes


def too_few(valid: int, k: int) -> InputError:
    """The error for a corpus with fewer valid trajectories than the largest subset."""
    return InputError(f"the corpus has {valid} valid trajectories, fewer than the largest subset ({k})")


def write_subsets_manifest(cfg: SubsetsConfig, sizes: list[int], tally: Tally) -> dict[str, Any]:
    """`manifest.json` of a subsets folder: inputs, sizes, counts and the first bad lines."""
    manifest = {
        "corpus": cfg.corpus,
        "seed": cfg.seed,
        "sizes": sizes,
        "scanned": tally.counts["scanned"],
        "malformed": tally.counts["malformed"],
        "bad_lines": tally.bad_lines,
        "subsets": {str(s): subset_file(s) for s in sizes},
    }
    write_json(os.path.join(cfg.out, "manifest.json"), manifest)
    return manifest


def make_subsets(cfg: SubsetsConfig) -> dict[str, Any]:
    """Write every subset and `manifest.json` (counts and the first bad lines); the subset of
    size k is the first k rows of one seeded ranking, so smaller subsets nest in larger ones.
    Rows rank by (key, reading position), so even equal keys have one order."""
    sizes = subset_sizes(cfg)
    k = sizes[-1]
    tally = Tally()
    heap: list[tuple[int, int]] = []  # (-key, -spill offset): the k smallest (key, offset) so far
    with tempfile.TemporaryFile() as spill:
        for rec, traj in _trajectories(cfg.corpus, tally, "subsets"):
            key = sample_key(cfg.seed, traj.instance_id, rec.file, rec.line)
            if len(heap) == k and key >= -heap[0][0]:
                continue
            offset = spill.tell()
            spill.write(rec.line_bytes())
            item = (-key, -offset)
            heapq.heappush(heap, item) if len(heap) < k else heapq.heapreplace(heap, item)
        if len(heap) < k:
            raise too_few(len(heap), k)
        ranked = sorted((-neg, -off) for neg, off in heap)
        for size in sizes:
            with atomic_jsonl(subset_path(cfg.out, size)) as f:
                for _, off in ranked[:size]:
                    spill.seek(off)
                    f.write(spill.readline().decode())
    return write_subsets_manifest(cfg, sizes, tally)


@dataclass(frozen=True)
class HeldoutConfig:
    """The held-out set: trajectories from repos (and instances) unseen in the training subsets."""

    corpus: list[str] = option(help="corpus file or glob; repeat for several")
    train: list[str] = option(help="training subset file or glob; repeat for several")
    out: str = option(help="output file (rows in the held-out schema); PATH.manifest.json beside it")
    n: int = option(100, help="how many rows (one per repo)")
    context_turns: int = option(14, help="context pairs before the target pair")
    seed: int = option(42)


def check_heldout(cfg: HeldoutConfig) -> None:
    """Raise `InputError` for a bad n or context length, or a corpus glob that matches nothing
    (before the long training pass)."""
    if cfg.n <= 0 or cfg.context_turns < 0:
        raise InputError("--n must be positive and --context-turns non-negative")
    expand_all(cfg.corpus)


def train_sets(records: Iterable[tuple[Record, Trajectory]]) -> tuple[set[str], set[str]]:
    """The repos and instance ids of the training trajectories (record, trajectory) pairs."""
    repos: set[str] = set()
    ids: set[str] = set()
    for _, traj in records:
        ids.add(traj.instance_id)
        if traj.repo is not None:
            repos.add(traj.repo)
    return repos, ids


def eligibility(
    rec: Record, traj: Trajectory, cfg: HeldoutConfig, repos: set[str], ids: set[str], tally: Tally
) -> bool:
    """Whether a trajectory may be held out; every other outcome is counted in `tally` by reason
    (a trajectory without a repo is a bad line)."""
    if not traj.repo:
        tally.bad(BadLine(rec.file, rec.line, "missing field 'repo'"))
        return False
    if observed_prefix(traj) < cfg.context_turns + 1:
        tally.counts["too_short"] += 1
    elif traj.repo in repos:
        tally.counts["excluded_repo"] += 1
    elif traj.instance_id in ids:
        tally.counts["excluded_instance"] += 1
    else:
        tally.counts["eligible"] += 1
        return True
    return False


def sample_heldout(cfg: HeldoutConfig) -> dict[str, Any]:
    """Write the n rows whose repos' smallest eligible keys are smallest, in key order, plus a
    manifest counting every reason a trajectory was not eligible. Candidates rank by (key,
    reading position), so even equal keys have one order."""
    check_heldout(cfg)
    train_tally = Tally()
    train_repos, train_ids = train_sets(_trajectories(cfg.train, train_tally, "train ids"))

    tally = Tally()
    best: dict[str, tuple[int, int, dict[str, Any]]] = {}  # repo -> (key, reading position, held-out row)
    for position, (rec, traj) in enumerate(_trajectories(cfg.corpus, tally, "held-out")):
        if eligibility(rec, traj, cfg, train_repos, train_ids, tally):
            key = sample_key(cfg.seed, traj.instance_id, rec.file, rec.line)
            if traj.repo not in best or key < best[traj.repo][0]:
                best[traj.repo] = (key, position, heldout_row(traj, cfg.context_turns))
    chosen = sorted(best.values(), key=lambda c: c[:2])[: cfg.n]
    return write_heldout(cfg, [row for *_, row in chosen], tally, train_tally, train_repos, train_ids, len(best))


def write_heldout(
    cfg: HeldoutConfig,
    rows: list[dict[str, Any]],
    tally: Tally,
    train_tally: Tally,
    train_repos: set[str],
    train_ids: set[str],
    eligible_repos: int,
) -> dict[str, Any]:
    """Write the chosen rows and `PATH.manifest.json`; raises `InputError`, naming every reason
    trajectories were not eligible, when there are fewer than n eligible repos."""
    if eligible_repos < cfg.n:
        raise InputError(
            f"only {eligible_repos} eligible repos ({tally.counts['eligible']} eligible trajectories) for --n {cfg.n}: "
            f"{tally.counts['too_short']} too short, {tally.counts['excluded_repo']} in training repos, "
            f"{tally.counts['excluded_instance']} training instances, {tally.counts['malformed']} malformed"
        )
    with atomic_jsonl(cfg.out) as f:
        for row in rows:
            f.write(dumps_row(row))
    manifest = {
        "corpus": cfg.corpus,
        "train": cfg.train,
        "n": cfg.n,
        "context_turns": cfg.context_turns,
        "seed": cfg.seed,
        "scanned": tally.counts["scanned"],
        "malformed": tally.counts["malformed"],
        "too_short": tally.counts["too_short"],
        "excluded_repo": tally.counts["excluded_repo"],
        "excluded_instance": tally.counts["excluded_instance"],
        "eligible": tally.counts["eligible"],
        "eligible_repos": eligible_repos,
        "selected": len(rows),
        "train_scanned": train_tally.counts["scanned"],
        "train_malformed": train_tally.counts["malformed"],
        "train_repos": len(train_repos),
        "train_instances": len(train_ids),
        "bad_lines": tally.bad_lines,
        "train_bad_lines": train_tally.bad_lines,
    }
    write_json(cfg.out + ".manifest.json", manifest)
    return manifest
