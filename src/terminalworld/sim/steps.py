"""The simulator grade as Marin steps: a probe set made in the sandbox, and one checkpoint's
free-running grade on held-out rows (tier 1), probes (tier 2) or tasks with a real shadow (tier 3)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any, Literal

from terminalworld.pipeline import artifacts
from terminalworld.pipeline.step import (
    HeldoutSet,
    Model,
    ProbeSet,
    SimGrade,
    Subsets,
    TaskSet,
    joined,
    local_copy,
    model_input,
    step,
)


@dataclass(frozen=True, kw_only=True)
class Decoding:
    """A simulator grade's decoding: `sim-eval`'s flags of the same names (`SimEvalConfig`). Marin
    fingerprints a decoding by its fields, so a plan that sets more of them subclasses it with
    exactly those (a field added here, even at its default, would move every grade made before)."""

    max_new_tokens: int


@dataclass(frozen=True, kw_only=True)
class DecodingOn(Decoding):
    """A decoding on a named device."""

    device: Literal["cpu", "cuda"]


@dataclass(frozen=True, kw_only=True)
class DecodingIn(DecodingOn):
    """A decoding on a named device in a stated compute precision (`core.precision`)."""

    dtype: Literal["float32", "bfloat16", "auto"]


def probes_fn(*, out: str, n: int, seed: int, exclude_from: list | None) -> None:
    """`n` probes into `out`, from code trees absent from the trajectories of `exclude_from`."""
    from terminalworld.core.formats import iter_trajectories
    from terminalworld.core.records import BadLine
    from terminalworld.errors import InputError
    from terminalworld.sim.probes import ProbesConfig, make_probes

    excluded = set()
    for item in iter_trajectories(joined(exclude_from)) if exclude_from else ():
        if isinstance(item, BadLine):
            raise InputError(f"{item.file}:{item.line}: {item.reason}")
        excluded.add(item[1].repo)
    make_probes(
        ProbesConfig(out=os.path.join(out, artifacts.PROBES_FILE), n=n, seed=seed, exclude_repos=sorted(excluded))
    )


def probe_set(*, n: int, seed: int, unseen_in: Subsets | None = None, size: int = 0, version: str) -> ProbeSet:
    """`n` probes round-robin over the families; with `unseen_in`, from repos absent from its subset of `size`."""
    return ProbeSet(
        step(
            artifacts.PROBES,
            probes_fn,
            version=version,
            n=n,
            seed=seed,
            exclude_from=unseen_in.subset(size) if unseen_in else None,
        )
    )


def snapshot_store_fn(*, out: str, instances: str | list, clone_url: str) -> None:
    """The grounding snapshot store of the instances in `instances` (JSON Lines of
    `{instance_id, repo, base_commit}`), built into `out` (resumable)."""
    from terminalworld.grounding.snapshots import build_store, read_instances

    build_store(instances=read_instances(joined(instances)), store=out, clone_url=clone_url)


def snapshot_store(*, instances: str, version: str, clone_url: str = "https://github.com/{repo}.git"):
    """The step that snapshots every SWE-ZERO instance's repository at its base commit, the source
    `--grounding-store` reads (`grounding.snapshots`)."""
    return step(artifacts.SNAPSHOTS, snapshot_store_fn, version=version, instances=instances, clone_url=clone_url)


def sim_grade_fn(
    *, model: str | list, out: str, model_name: str, source: dict[str, Any], decoding: Decoding | dict[str, Any]
) -> None:
    """`sim-eval` of `model` on `source` ({"heldout"|"probes"|"tasks": path}), rows to `out`; `decoding`
    is a `Decoding`, or its fields and `chat_template_from` in a dict (see `sim_grade`)."""
    from terminalworld.sim.evaluate import SimEvalConfig, sim_eval

    paths = {k: joined(v) for k, v in source.items()}
    fields = asdict(decoding) if isinstance(decoding, Decoding) else decoding
    options = {k: joined(v) if k in ("chat_template_from", "agent_model") else v for k, v in fields.items()}
    options.setdefault("dtype", "float32")  # a grade computes in float32 unless its plan states a precision
    with local_copy(out) as local:  # the rows file resumes from what a preempted run put back
        cfg = SimEvalConfig(
            model_path=joined(model),
            out=os.path.join(local, artifacts.SIM_ROWS),
            model_name=model_name,
            **paths,
            **options,
        )
        sim_eval(cfg)


def sim_grade(
    *,
    model: Model,
    model_name: str,
    heldout: HeldoutSet | None = None,
    probes: ProbeSet | None = None,
    tasks: TaskSet | None = None,
    decoding: Decoding,
    chat_template_from: Model | None = None,
    wrong_share: float = 0.0,
    agent: tuple[Model, Any] | None = None,
    resources=None,
    version: str,
) -> SimGrade:
    """`model` as a simulator on one of held-out rows (tier 1), probes (tier 2) or tasks (tier 3),
    rendered with `chat_template_from`'s chat template if given (a base model); on tasks, the
    solver's episodes make wrong fixes for a `wrong_share` of them (seeded), so outcomes differ; or
    `agent` (a checkpoint and its episode limits) acts instead of the solver."""
    if sum(x is not None for x in (heldout, probes, tasks)) != 1:
        raise ValueError("a simulator grade reads one of heldout, probes and tasks")
    tier, source = (
        (1, {"heldout": heldout.rows})
        if heldout
        else (2, {"probes": probes.rows})
        if probes
        else (3, {"tasks": tasks.step})
    )
    # Marin finds a dependency only inside lists, tuples and dicts, so a checkpoint's template joins
    # the decoding's fields in a dict, where the grades made before this keyword carried it.
    template = {"chat_template_from": model_input(chat_template_from)} if chat_template_from is not None else {}
    # Only where set, so the grades made before it keep their identity.
    template |= {"wrong_share": wrong_share} if wrong_share and tasks is not None else {}
    if agent is not None and tasks is not None:
        checkpoint, limits = agent
        # The episode's limits only: sim-eval's one temperature is the simulator's and the agent's.
        caps = {k: getattr(limits, k) for k in ("max_turns", "context_tokens", "max_tokens_per_turn")}
        template |= {"agent": "model", "agent_model": model_input(checkpoint), **caps}
    return SimGrade(
        step(
            artifacts.sim_grade(tier, model_name),
            sim_grade_fn,
            version=version,
            resources=resources,
            model=model_input(model),
            model_name=model_name,
            source=source,
            decoding={**asdict(decoding), **template} if template else decoding,
        ),
        model_name=model_name,
        tier=tier,
    )
