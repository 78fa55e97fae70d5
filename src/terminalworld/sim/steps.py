"""The simulator grade as Marin steps: a probe set made in the sandbox, the grounding snapshot
store, and one checkpoint's free-running grade on held-out rows (tier 1), probes (tier 2) or tasks
with a real shadow (tier 3). Each step runs the stage's function on its config, built from the
artifacts it reads."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Literal

from terminalworld.agent.harness import HarnessConfig
from terminalworld.core.precision import Precision
from terminalworld.grounding.snapshots import GITHUB, StoreConfig, build_store_from
from terminalworld.pipeline import artifacts
from terminalworld.pipeline.step import (
    HeldoutSet,
    Model,
    ProbeSet,
    SimGrade,
    Subsets,
    TaskSet,
    config_step,
    model_path,
)
from terminalworld.sim.evaluate import SimEvalConfig, sim_eval
from terminalworld.sim.probes import ProbesConfig, make_probes


@dataclass(frozen=True, kw_only=True)
class Decoding:
    """A simulator grade's decoding, in `sim-eval`'s names (`SimEvalConfig`); float32 unless a plan
    states another precision (`core.precision`), so a grade does not depend on the machine's CPU."""

    max_new_tokens: int = 1024
    temperature: float = 0.0
    backend: Literal["hf", "vllm"] = "hf"
    device: Literal["cpu", "cuda"] = "cpu"
    dtype: Precision = "float32"


def probe_set(*, n: int, seed: int, unseen_in: Subsets | None = None, size: int = 0, version: str) -> ProbeSet:
    """`n` probes round-robin over the families; with `unseen_in`, from repos absent from its subset of `size`."""

    def config(ctx) -> ProbesConfig:
        return ProbesConfig(
            out=os.path.join(ctx.output_path, artifacts.PROBES_FILE),
            n=n,
            seed=seed,
            exclude_repos_from=[unseen_in.at(ctx, artifacts.subset_file(size))] if unseen_in else [],
        )

    return ProbeSet(config_step(artifacts.PROBES, make_probes, config, version=version, deps=[unseen_in]))


def snapshot_store(*, instances: str, version: str, clone_url: str = GITHUB):
    """The step that snapshots every SWE-ZERO instance's repository at its base commit, the source
    `--grounding-store` reads (`grounding.snapshots`)."""

    def config(ctx) -> StoreConfig:
        return StoreConfig(instances=instances, store=ctx.output_path, clone_url=clone_url)

    return config_step(artifacts.SNAPSHOTS, build_store_from, config, version=version, deps=[])


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
    agent: Model | None = None,
    harness: HarnessConfig | None = None,
    resources=None,
    version: str,
) -> SimGrade:
    """`model` as a simulator on one of held-out rows (tier 1), probes (tier 2) or tasks (tier 3),
    rendered with `chat_template_from`'s chat template if given (a base model); on tasks, the
    solver's episodes make wrong fixes for a `wrong_share` of them (seeded), so outcomes differ, or
    the checkpoint `agent` acts instead; `harness` gives tier 3's episode limits."""
    if sum(x is not None for x in (heldout, probes, tasks)) != 1:
        raise ValueError("a simulator grade reads one of heldout, probes and tasks")
    tier = 1 if heldout else 2 if probes else 3
    checkpoint = agent if tasks is not None else None
    # The episode's limits only: sim-eval's one temperature is the simulator's and the agent's.
    limits = ("max_turns", "context_tokens", "max_tokens_per_turn")
    caps = {k: getattr(harness, k) for k in limits} if harness is not None and tasks is not None else {}

    def config(ctx) -> SimEvalConfig:
        if heldout:
            source = {"heldout": heldout.at(ctx, heldout.file)}
        else:
            source = {"probes": probes.at(ctx, artifacts.PROBES_FILE)} if probes else {"tasks": tasks.at(ctx)}
        return SimEvalConfig(
            model_path=model_path(ctx, model),
            out=os.path.join(ctx.output_path, artifacts.SIM_ROWS),
            model_name=model_name,
            chat_template_from=model_path(ctx, chat_template_from),
            wrong_share=wrong_share if tasks is not None else 0.0,
            agent="model" if checkpoint is not None else "solver",
            agent_model=model_path(ctx, checkpoint),
            **caps,
            **source,
            **asdict(decoding),
        )

    deps = [model, heldout, probes, tasks, chat_template_from, checkpoint]
    # The rows file resumes from what a preempted run put back (`local`).
    step = config_step(
        artifacts.sim_grade(tier, model_name),
        sim_eval,
        config,
        version=version,
        deps=deps,
        resources=resources,
        local="out",
    )
    return SimGrade(step, model_name=model_name, tier=tier)
