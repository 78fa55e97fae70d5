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
n repos whose candidates have the smallest keys are written in key order in the seeds' schema.
"""

from __future__ import annotations

import hashlib
import heapq
import os
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from terminalworld.core.formats import to_trajectory
from terminalworld.core.records import BadLine, atomic_jsonl, dumps_row, expand_all, iter_records, write_json
from terminalworld.core.trajectories import Trajectory
from terminalworld.errors import InputError, TrajectoryError

MAX_BAD_LINES = 100


def sample_key(seed: int, instance_id: str, file: str, line: int) -> int:
    digest = hashlib.blake2b(f"{seed}\0{instance_id}\0{os.path.basename(file)}:{line}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big")


@dataclass
class Tally:
    """Counts of a pass over records, plus the first MAX_BAD_LINES bad lines with file and line."""

    counts: Counter = field(default_factory=Counter)
    bad_lines: list[dict[str, Any]] = field(default_factory=list)

    def bad(self, b: BadLine) -> None:
        self.counts["malformed"] += 1
        if len(self.bad_lines) < MAX_BAD_LINES:
            self.bad_lines.append(b.to_json())


def _trajectories(patterns: list[str] | str, tally: Tally, desc: str):
    """(record, trajectory) of every valid record; the rest are tallied as malformed."""
    for rec in tqdm(iter_records(patterns), desc=desc, unit="traj", mininterval=1.0):
        tally.counts["scanned"] += 1
        if isinstance(rec, BadLine):
            tally.bad(rec)
            continue
        try:
            yield rec, to_trajectory(rec.value, f"{rec.file}:{rec.line}")
        except TrajectoryError as e:
            tally.bad(BadLine(rec.file, rec.line, e.problem))


@dataclass(frozen=True)
class SubsetsConfig:
    corpus: str  # glob (comma-separated for several)
    out: str
    sizes: str = "10000,100000,1000000"
    seed: int = 42


def subset_path(out: str, size: int) -> str:
    return os.path.join(out, f"subset-{size}.jsonl.gz")


def make_subsets(cfg: SubsetsConfig) -> dict[str, Any]:
    sizes = sorted({int(s) for s in cfg.sizes.split(",") if s.strip()})
    if not sizes or sizes[0] <= 0:
        raise InputError(f"--sizes must be positive integers, got {cfg.sizes!r}")
    k = sizes[-1]
    tally = Tally()
    heap: list[tuple[int, int]] = []  # (-key, spill offset): the k smallest keys seen so far
    with tempfile.TemporaryFile() as spill:
        for rec, traj in _trajectories(cfg.corpus.split(","), tally, "subsets"):
            key = sample_key(cfg.seed, traj.instance_id, rec.file, rec.line)
            if len(heap) == k and key >= -heap[0][0]:
                continue
            offset = spill.tell()
            spill.write(rec.line_bytes())
            item = (-key, offset)
            heapq.heappush(heap, item) if len(heap) < k else heapq.heapreplace(heap, item)
        if len(heap) < k:
            raise InputError(f"the corpus has {len(heap)} valid trajectories, fewer than the largest subset ({k})")
        ranked = sorted((-neg, off) for neg, off in heap)
        for size in sizes:
            with atomic_jsonl(subset_path(cfg.out, size)) as f:
                for _, off in ranked[:size]:
                    spill.seek(off)
                    f.write(spill.readline().decode())
    manifest = {
        "corpus": cfg.corpus,
        "seed": cfg.seed,
        "sizes": sizes,
        "scanned": tally.counts["scanned"],
        "malformed": tally.counts["malformed"],
        "bad_lines": tally.bad_lines,
        "subsets": {str(s): os.path.basename(subset_path(cfg.out, s)) for s in sizes},
    }
    write_json(os.path.join(cfg.out, "manifest.json"), manifest)
    return manifest


@dataclass(frozen=True)
class HeldoutConfig:
    corpus: list[str]
    train: list[str]
    out: str
    n: int = 100
    context_turns: int = 14
    seed: int = 42


def heldout_row(traj: Trajectory, context_turns: int) -> dict[str, Any]:
    """The seeds' schema: the first `context_turns` (command, observation) pairs as prefix, the next
    pair as target; `cmd` and `env` are the full assistant and observation messages."""
    pairs = [[t.action, t.observation] for t in traj.turns[: context_turns + 1]]
    return {
        "instance_id": traj.instance_id,
        "repo": traj.repo,
        "system": traj.system,
        "task": traj.task,
        "prefix": pairs[:context_turns],
        "target_cmd": pairs[context_turns][0],
        "target_env": pairs[context_turns][1],
    }


def observed_prefix(traj: Trajectory) -> int:
    """How many leading turns are complete (action, observation) pairs."""
    n = 0
    for t in traj.turns:
        if t.observation is None:
            break
        n += 1
    return n


def sample_heldout(cfg: HeldoutConfig) -> dict[str, Any]:
    if cfg.n <= 0 or cfg.context_turns < 0:
        raise InputError("--n must be positive and --context-turns non-negative")
    expand_all(cfg.corpus)  # fail on an empty glob before the long training pass
    train_tally = Tally()
    train_repos: set[str] = set()
    train_ids: set[str] = set()
    for _, traj in _trajectories(cfg.train, train_tally, "train ids"):
        train_ids.add(traj.instance_id)
        if traj.repo is not None:
            train_repos.add(traj.repo)

    tally = Tally()
    best: dict[str, tuple[int, dict[str, Any]]] = {}  # repo -> (key, held-out row)
    for rec, traj in _trajectories(cfg.corpus, tally, "held-out"):
        if not traj.repo:
            tally.bad(BadLine(rec.file, rec.line, "missing field 'repo'"))
            continue
        if observed_prefix(traj) < cfg.context_turns + 1:
            tally.counts["too_short"] += 1
        elif traj.repo in train_repos:
            tally.counts["excluded_repo"] += 1
        elif traj.instance_id in train_ids:
            tally.counts["excluded_instance"] += 1
        else:
            tally.counts["eligible"] += 1
            key = sample_key(cfg.seed, traj.instance_id, rec.file, rec.line)
            if traj.repo not in best or key < best[traj.repo][0]:
                best[traj.repo] = (key, heldout_row(traj, cfg.context_turns))
    if len(best) < cfg.n:
        raise InputError(
            f"only {len(best)} eligible repos ({tally.counts['eligible']} eligible trajectories) for --n {cfg.n}: "
            f"{tally.counts['too_short']} too short, {tally.counts['excluded_repo']} in training repos, "
            f"{tally.counts['excluded_instance']} training instances, {tally.counts['malformed']} malformed"
        )
    chosen = sorted(best.values(), key=lambda kv: kv[0])[: cfg.n]
    with atomic_jsonl(cfg.out) as f:
        for _, row in chosen:
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
        "eligible_repos": len(best),
        "selected": len(chosen),
        "train_scanned": train_tally.counts["scanned"],
        "train_malformed": train_tally.counts["malformed"],
        "train_repos": len(train_repos),
        "train_instances": len(train_ids),
        "bad_lines": tally.bad_lines,
        "train_bad_lines": train_tally.bad_lines,
    }
    write_json(cfg.out + ".manifest.json", manifest)
    return manifest


def read_heldout(path: str) -> list[dict[str, Any]]:
    """Held-out rows; a malformed row is an error naming file and line."""
    rows = []
    for rec in iter_records(path):
        if isinstance(rec, BadLine):
            raise TrajectoryError(f"{rec.file}:{rec.line}", rec.reason)
        problem = _heldout_problem(rec.value)
        if problem:
            raise TrajectoryError(f"{rec.file}:{rec.line}", problem)
        rows.append(rec.value)
    return rows


def _heldout_problem(row: Any) -> str | None:
    """What makes a record not a held-out row, or None."""
    if not isinstance(row, dict):
        return f"a held-out row is a JSON object, not {type(row).__name__}"
    missing = [k for k in ("instance_id", "task", "prefix", "target_cmd", "target_env") if k not in row]
    if missing:
        return f"held-out row lacks {', '.join(missing)}"
    for k in ("instance_id", "task", "target_cmd", "target_env"):
        if not isinstance(row[k], str):
            return f"held-out row field {k!r} is {type(row[k]).__name__}, not a string"
    if row.get("system") is not None and not isinstance(row["system"], str):
        return "held-out row field 'system' is neither a string nor null"
    pairs = row["prefix"]
    if not isinstance(pairs, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in pairs
    ):
        return "held-out row field 'prefix' is not a list of [command, observation] string pairs"
    return None
