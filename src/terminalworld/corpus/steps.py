"""The corpus stage as Marin steps: the corpus (recorded here, or adopted where it lies), nested
training subsets, and the held-out set from repos unseen in training."""

from __future__ import annotations

import os

from terminalworld.pipeline import artifacts
from terminalworld.pipeline.step import Corpus, HeldoutSet, Subsets, TaskSet, joined, step
from terminalworld.pipeline.zephyr import Workers

SCRATCH = ".scratch"  # a sharded job's intermediate files inside its output folder, removed at the end


def record_fn(*, out: str, trajectories: int, seed: int, max_output_chars: int, tasks: str | None) -> None:
    """Record a real-shell corpus into `out`, with one solving episode per task of `tasks`."""
    from terminalworld.corpus.recorder import RecordConfig, record_corpus

    record_corpus(
        RecordConfig(out=out, trajectories=trajectories, seed=seed, max_output_chars=max_output_chars, tasks=tasks)
    )


def recorded_corpus(
    *, trajectories: int, seed: int, max_output_chars: int, tasks: TaskSet | None = None, version: str
) -> Corpus:
    """A corpus recorded in the sandbox (the local demo's; SWE-ZERO's row format): exploration
    trajectories, plus task-solving episodes for `tasks`."""
    return Corpus(
        step(
            artifacts.RECORDED_CORPUS,
            record_fn,
            version=version,
            trajectories=trajectories,
            seed=seed,
            max_output_chars=max_output_chars,
            tasks=tasks.step if tasks else None,
        )
    )


def adopted_corpus(*, source: str, version: str) -> Corpus:
    """The SWE-ZERO 12M copy, adopted where it already lies (nothing is recomputed)."""
    from marin.execution.lazy import ArtifactStep

    return Corpus(ArtifactStep.adopt(artifacts.CORPUS, version, source))


def subsets_fn(*, corpus: str | list, out: str, sizes: list[int], seed: int, workers: Workers) -> None:
    """Nested subsets of the corpus files into `out`, as a Zephyr job on `workers`."""
    from terminalworld.corpus.sampling import SubsetsConfig
    from terminalworld.corpus.sharded import make_subsets_sharded

    make_subsets_sharded(
        SubsetsConfig(corpus=[joined(corpus)], out=out, sizes=",".join(str(s) for s in sizes), seed=seed),
        workers,
        scratch=os.path.join(out, SCRATCH),
    )


def subsets(*, corpus: Corpus, sizes: list[int], seed: int, workers: Workers, resources=None, version: str) -> Subsets:
    """Nested subsets of `sizes` (each smaller one a prefix of each larger one), drawn by `workers`."""
    return Subsets(
        step(
            artifacts.SUBSETS,
            subsets_fn,
            version=version,
            resources=resources,
            corpus=corpus.files,
            sizes=list(sizes),
            seed=seed,
            workers=workers,
        )
    )


def heldout_fn(
    *,
    corpus: str | list,
    train: str | list,
    out: str,
    file: str,
    n: int,
    context_turns: int,
    seed: int,
    workers: Workers,
) -> None:
    """The held-out rows into `{out}/{file}`, as a Zephyr job on `workers`."""
    from terminalworld.corpus.sampling import HeldoutConfig
    from terminalworld.corpus.sharded import sample_heldout_sharded

    sample_heldout_sharded(
        HeldoutConfig(
            corpus=[joined(corpus)],
            train=[joined(train)],
            out=os.path.join(out, file),
            n=n,
            context_turns=context_turns,
            seed=seed,
        ),
        workers,
        scratch=os.path.join(out, SCRATCH),
    )


def heldout(
    *,
    corpus: Corpus,
    subsets: Subsets,
    train_size: int,
    n: int,
    context_turns: int,
    seed: int,
    workers: Workers,
    resources=None,
    version: str,
) -> HeldoutSet:
    """n held-out rows from repos unseen in the training subset of `train_size`, drawn by `workers`."""
    file = artifacts.heldout_file(n)
    return HeldoutSet(
        step(
            artifacts.heldout(n),
            heldout_fn,
            version=version,
            resources=resources,
            corpus=corpus.files,
            train=subsets.subset(train_size),
            file=file,
            n=n,
            context_turns=context_turns,
            seed=seed,
            workers=workers,
        ),
        file=file,
    )
