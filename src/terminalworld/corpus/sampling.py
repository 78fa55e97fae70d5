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
A trajectory whose target is a sentinel (`core.targets`: the submit echo, a fixed output of the
policy) is not eligible: its tokens would measure the template, not the terminal. Each row records
its target's class (`target_class`).
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
from terminalworld.core.paths import check_outputs
from terminalworld.core.records import BadLine, Record, Tally, atomic_jsonl, dumps_row, expand_all, tallied, write_json
from terminalworld.core.targets import class_counts, classify_turn, sentinel_turn
from terminalworld.core.trajectories import Trajectory
from terminalworld.errors import InputError
from terminalworld.options import ConfigError, at_least, option
from terminalworld.pipeline.artifacts import subset_file


def sample_key(seed: int, instance_id: str, file: str, line: int) -> int:
    """The seeded 64-bit ranking key of one record; samplers keep the smallest keys."""
    digest = hashlib.blake2b(f"{seed}\0{instance_id}\0{os.path.basename(file)}:{line}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big")


def digest64(data: bytes) -> int:
    """A 64-bit content hash: equal for byte-identical records (and, among a million distinct
    ones, equal by chance with probability about 3e-8)."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def count_ids(id_hashes: list[int], sizes: list[int]) -> dict[str, int]:
    """Distinct instance ids among the first `size` ranked rows, per size (for the manifest)."""
    seen: set[int] = set()
    out, done = {}, 0
    for size in sizes:
        seen.update(id_hashes[done:size])
        done = size
        out[str(size)] = len(seen)
    return out


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

    def __post_init__(self) -> None:
        subset_sizes(self)
        at_least(self, seed=0)

    def check_paths(self) -> None:
        """Refuse, before any work, outputs that cannot be written or that touch an input."""
        check_outputs([("--out", self.out, "dir", ())], [("--corpus", p) for p in self.corpus])


def subset_path(out: str, size: int) -> str:
    """The file of the subset of `size` inside a subsets folder."""
    return os.path.join(out, subset_file(size))


def subset_sizes(cfg: SubsetsConfig) -> list[int]:
    """The distinct subset sizes, ascending; raises `ConfigError` (an `InputError`) unless all are
    positive integers (parsed as strictly as a flag is)."""
    parts = [p.strip() for p in cfg.sizes.split(",") if p.strip()]
    if not parts or not all(p.isascii() and p.isdigit() and int(p) >= 1 for p in parts):
        raise ConfigError("sizes", f"must be positive integers, got {cfg.sizes!r}")
    return sorted({int(p) for p in parts})


def too_few(valid: int, k: int) -> InputError:
    """The error for a corpus with fewer valid trajectories than the largest subset."""
    return InputError(f"the corpus has {valid} valid trajectories, fewer than the largest subset ({k})")


def write_subsets_manifest(
    cfg: SubsetsConfig, sizes: list[int], tally: Tally, duplicates: int, instance_ids: dict[str, int]
) -> dict[str, Any]:
    """`manifest.json` of a subsets folder: inputs, sizes, counts (duplicate records skipped,
    distinct instance ids per subset) and the first bad lines."""
    manifest = {
        "corpus": cfg.corpus,
        "seed": cfg.seed,
        "sizes": sizes,
        "scanned": tally.counts["scanned"],
        "malformed": tally.counts["malformed"],
        "duplicates": duplicates,
        "instance_ids": instance_ids,
        "bad_lines": tally.bad_lines,
        "subsets": {str(s): subset_file(s) for s in sizes},
    }
    write_json(os.path.join(cfg.out, "manifest.json"), manifest)
    return manifest


def make_subsets(cfg: SubsetsConfig) -> dict[str, Any]:
    """Write every subset and `manifest.json` (counts and the first bad lines); the subset of
    size k is the first k rows of one seeded ranking, so smaller subsets nest in larger ones.
    Rows rank by (key, reading position), so even equal keys have one order.

    Duplicates (the rule): a record byte-identical to another is the same trajectory read twice
    (a shard copied, a line repeated), so only its best-ranked occurrence is sampled and the
    manifest counts, as `duplicates`, the occurrences skipped among the records ranked up to the
    last one sampled (a count that depends only on the inputs and the seed). Distinct records that
    share an instance id are distinct rollouts of one task (SWE-ZERO holds about a hundred per
    PR) and are kept; `instance_ids` counts the distinct ids of each subset."""
    sizes = subset_sizes(cfg)
    k = sizes[-1]
    tally = Tally()
    # Max-heap of (-key, -position, spill offset, digest); an entry whose digest has since been
    # taken by a better-ranked copy is dead and dropped when it reaches the top.
    heap: list[tuple[int, int, int, int]] = []
    live: dict[int, tuple[int, int, int, int]] = {}  # digest -> (key, position, offset, id hash)
    skipped: list[tuple[int, int]] = []  # (key, position) of each occurrence skipped as a duplicate

    def top() -> tuple[int, int]:
        while live.get(heap[0][3], (None, None))[:2] != (-heap[0][0], -heap[0][1]):
            heapq.heappop(heap)
        return -heap[0][0], -heap[0][1]

    with tempfile.TemporaryFile() as spill:
        for position, (rec, traj) in enumerate(_trajectories(cfg.corpus, tally, "subsets")):
            rank = (sample_key(cfg.seed, traj.instance_id, rec.file, rec.line), position)
            if len(live) == k and rank > top():
                continue
            line = rec.line_bytes()
            digest = digest64(line)
            if digest in live:
                skipped.append(max(rank, live[digest][:2]))
                if rank > live[digest][:2]:
                    continue
            elif len(live) == k:
                top()  # the worst-ranked live entry is on top: it makes room
                del live[heapq.heappop(heap)[3]]
            offset = spill.tell()
            spill.write(line)
            live[digest] = (*rank, offset, digest64(traj.instance_id.encode()))
            heapq.heappush(heap, (-rank[0], -rank[1], offset, digest))
            if len(heap) > 2 * k:  # dead entries of replaced copies: memory stays O(k)
                heap[:] = [(-v[0], -v[1], v[2], d) for d, v in live.items()]
                heapq.heapify(heap)
        if len(live) < k:
            raise too_few(len(live), k)
        ranked = sorted(live.values())
        last = ranked[-1][:2]
        for size in sizes:
            with atomic_jsonl(subset_path(cfg.out, size)) as f:
                for _, _, off, _ in ranked[:size]:
                    spill.seek(off)
                    f.write(spill.readline().decode())
    duplicates = sum(r <= last for r in skipped)
    return write_subsets_manifest(cfg, sizes, tally, duplicates, count_ids([r[3] for r in ranked], sizes))


@dataclass(frozen=True, kw_only=True)
class HeldoutConfig:
    """The held-out set: trajectories from repos (and instances) unseen in the training subsets.
    No `train` is an explicit zero-shot set (nothing to exclude); a `train` file given with no
    valid trajectory is an error, never an empty exclusion."""

    corpus: list[str] = option(help="corpus file or glob; repeat for several")
    train: list[str] = option(
        [],
        help="training subset file or glob; repeat for several; none: nothing is excluded (a zero-shot set)",
    )
    out: str = option(
        help="output file (rows in the held-out schema); PATH.manifest.json beside it",
    )
    n: int = option(100, help="how many rows (one per repo)")
    context_turns: int = option(14, help="context pairs before the target pair")
    seed: int = option(42)

    def __post_init__(self) -> None:
        at_least(self, n=1, context_turns=0, seed=0)

    def check_paths(self) -> None:
        """Refuse, before any work, outputs that cannot be written or that touch an input."""
        check_outputs(
            [("--out", self.out, "file", (".manifest.json",))],
            [*[("--corpus", p) for p in self.corpus], *[("--train", p) for p in self.train]],
        )


def check_heldout(cfg: HeldoutConfig) -> None:
    """Raise `InputError` for a corpus glob that matches nothing (before the long training pass);
    n and the context length are bounded by the config itself."""
    expand_all(cfg.corpus)


def check_train(cfg: HeldoutConfig, tally: Tally) -> None:
    """Raise `InputError` when the training files hold no valid trajectory: excluding nothing
    would silently hold out trajectories the models were trained on."""
    if cfg.train and tally.counts["scanned"] == tally.counts["malformed"]:
        first = tally.bad_lines[0] if tally.bad_lines else None
        where = f"; first: {first['file']}:{first['line']}: {first['reason']}" if first else ""
        raise InputError(
            f"--train {','.join(cfg.train)}: no valid trajectory in {tally.counts['scanned']} records, "
            f"so nothing could be excluded{where}"
        )


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
    elif sentinel_turn(traj, cfg.context_turns):
        tally.counts["sentinel_target"] += 1
    else:
        tally.counts["eligible"] += 1
        return True
    return False


def classed_row(traj: Trajectory, context_turns: int) -> dict[str, Any]:
    """The held-out row of a trajectory with its target's class (`core.targets`)."""
    return {**heldout_row(traj, context_turns), "target_class": classify_turn(traj, context_turns)}


def sample_heldout(cfg: HeldoutConfig) -> dict[str, Any]:
    """Write the n rows whose repos' smallest eligible keys are smallest, in key order, plus a
    manifest counting every reason a trajectory was not eligible. Candidates rank by (key,
    reading position), so even equal keys have one order."""
    check_heldout(cfg)
    train_tally = Tally()
    train_repos, train_ids = train_sets(_trajectories(cfg.train, train_tally, "train ids"))
    check_train(cfg, train_tally)

    tally = Tally()
    best: dict[str, tuple[int, int, dict[str, Any]]] = {}  # repo -> (key, reading position, held-out row)
    for position, (rec, traj) in enumerate(_trajectories(cfg.corpus, tally, "held-out")):
        if eligibility(rec, traj, cfg, train_repos, train_ids, tally):
            key = sample_key(cfg.seed, traj.instance_id, rec.file, rec.line)
            if traj.repo not in best or key < best[traj.repo][0]:
                best[traj.repo] = (key, position, classed_row(traj, cfg.context_turns))
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
            f"{tally.counts['too_short']} too short, {tally.counts['sentinel_target']} sentinel targets, "
            f"{tally.counts['excluded_repo']} in training repos, "
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
        "sentinel_target": tally.counts["sentinel_target"],
        "excluded_repo": tally.counts["excluded_repo"],
        "excluded_instance": tally.counts["excluded_instance"],
        "eligible": tally.counts["eligible"],
        "eligible_repos": eligible_repos,
        "selected": len(rows),
        "target_classes": class_counts(r["target_class"] for r in rows),
        "train_scanned": train_tally.counts["scanned"],
        "train_malformed": train_tally.counts["malformed"],
        "train_repos": len(train_repos),
        "train_instances": len(train_ids),
        "bad_lines": tally.bad_lines,
        "train_bad_lines": train_tally.bad_lines,
    }
    write_json(cfg.out + ".manifest.json", manifest)
    return manifest
