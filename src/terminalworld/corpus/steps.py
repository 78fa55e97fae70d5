"""The corpus stage as Marin steps: the corpus (recorded here, or adopted where it lies), nested
training subsets, and the held-out set from repos unseen in training. Each step runs the stage's
function on its config, built from the artifacts it reads."""

from __future__ import annotations

import os

from terminalworld.corpus.recorder import RecordConfig, record_corpus
from terminalworld.corpus.sampling import HeldoutConfig, SubsetsConfig
from terminalworld.corpus.sharded import HeldoutJob, SubsetsJob, make_subsets_sharded, sample_heldout_sharded
from terminalworld.pipeline import artifacts
from terminalworld.pipeline.step import Corpus, HeldoutSet, Subsets, TaskSet, config_step
from terminalworld.pipeline.zephyr import Workers

SCRATCH = ".scratch"  # a sharded job's intermediate files inside its output folder, removed at the end


def recorded_corpus(
    *, trajectories: int, seed: int, max_output_chars: int, tasks: TaskSet | None = None, version: str
) -> Corpus:
    """A corpus recorded in the sandbox (the local demo's; SWE-ZERO's row format): exploration
    trajectories, plus task-solving episodes for `tasks`."""

    def config(ctx) -> RecordConfig:
        return RecordConfig(
            out=ctx.output_path,
            trajectories=trajectories,
            seed=seed,
            max_output_chars=max_output_chars,
            tasks=tasks.at(ctx) if tasks else None,
        )

    return Corpus(config_step(artifacts.RECORDED_CORPUS, record_corpus, config, version=version, deps=[tasks]))


def adopted_corpus(*, source: str, version: str) -> Corpus:
    """The SWE-ZERO 12M copy, adopted where it already lies (nothing is recomputed)."""
    from marin.execution.lazy import ArtifactStep

    return Corpus(ArtifactStep.adopt(artifacts.CORPUS, version, source))


def subsets(*, corpus: Corpus, sizes: list[int], seed: int, workers: Workers, resources=None, version: str) -> Subsets:
    """Nested subsets of `sizes` (each smaller one a prefix of each larger one), drawn by `workers`."""

    def config(ctx) -> SubsetsJob:
        return SubsetsJob(
            sampling=SubsetsConfig(
                corpus=[corpus.at(ctx, artifacts.CORPUS_FILES)],
                out=ctx.output_path,
                sizes=",".join(str(s) for s in sizes),
                seed=seed,
            ),
            workers=workers,
            scratch=os.path.join(ctx.output_path, SCRATCH),
        )

    step = config_step(
        artifacts.SUBSETS, make_subsets_sharded, config, version=version, deps=[corpus], resources=resources
    )
    return Subsets(step)


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

    def config(ctx) -> HeldoutJob:
        return HeldoutJob(
            sampling=HeldoutConfig(
                corpus=[corpus.at(ctx, artifacts.CORPUS_FILES)],
                train=[subsets.at(ctx, artifacts.subset_file(train_size))],
                out=os.path.join(ctx.output_path, file),
                n=n,
                context_turns=context_turns,
                seed=seed,
            ),
            workers=workers,
            scratch=os.path.join(ctx.output_path, SCRATCH),
        )

    step = config_step(
        artifacts.heldout(n),
        sample_heldout_sharded,
        config,
        version=version,
        deps=[corpus, subsets],
        resources=resources,
    )
    return HeldoutSet(step, file=file)
