"""The agent grade as Marin steps: generated tasks, a model graded on them locally, and a model
served with vLLM and graded by Harbor on a pinned benchmark in production."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Literal

from terminalworld.agent.benchmarks import Benchmark
from terminalworld.agent.harness import HarnessConfig
from terminalworld.pipeline import artifacts
from terminalworld.pipeline.step import AgentGrade, Model, Subsets, TaskSet, joined, local_copy, model_input, step

SECRETS = ("DAYTONA_API_KEY",)  # Harbor's Daytona environment


@dataclass(frozen=True, kw_only=True)
class Episodes:
    """A grade's episode limits: `agent-eval`'s flags of the same names. Marin fingerprints a
    harness by its fields, so each plan passes exactly the fields it sets: these three,
    `SampledEpisodes` with a temperature, or the whole `HarnessConfig`."""

    max_turns: int
    context_tokens: int
    max_tokens_per_turn: int


@dataclass(frozen=True, kw_only=True)
class SampledEpisodes(Episodes):
    """Episode limits with replies sampled at `temperature` (each attempt seeds its own sampling)."""

    temperature: float


@dataclass(frozen=True, kw_only=True)
class SampledEpisodesIn(SampledEpisodes):
    """Sampled episodes whose model runs in a stated compute precision (`core.precision`)."""

    dtype: Literal["float32", "bfloat16", "auto"]


def tasks_fn(
    *, out: str, n: int, seed: int, exclude_from: list | None, per_repo: int = 1, level: str = "function"
) -> None:
    """Generate and validate `n` tasks into `out` (at most `per_repo` from one repository), from repos
    outside `exclude_from`, at `level` of the ladder (`tasks.make.LEVELS`, or "ladder": all of them)."""
    from terminalworld.tasks.make import MakeTasksConfig, make_tasks

    exclude = [joined(exclude_from)] if exclude_from else []
    cfg = MakeTasksConfig(out=out, n=n, seed=seed, exclude_repos_from=exclude, per_repo=per_repo, level=level)
    make_tasks(cfg)


def task_suite(
    *,
    purpose: str,
    n: int,
    seed: int,
    unseen_in: Subsets | None = None,
    size: int = 0,
    per_repo: int = 1,
    level: str = "function",
    version: str,
) -> TaskSet:
    """`n` generated tasks, at most `per_repo` from one repository, at `level` of the ladder (the same
    seed gives the same bugs at every level; "ladder" writes every level, one suite per level inside);
    with `unseen_in`, only from repos absent from its subset of `size`."""
    # per_repo and level are inputs only when not their defaults, so suites made before them keep
    # their identity.
    more = {"per_repo": per_repo} if per_repo != 1 else {}
    more |= {"level": level} if level != "function" else {}
    return TaskSet(
        step(
            artifacts.tasks(purpose if level == "function" else f"{purpose}-{level}"),
            tasks_fn,
            version=version,
            n=n,
            seed=seed,
            exclude_from=unseen_in.subset(size) if unseen_in else None,
            **more,
        )
    )


def local_grade_fn(
    *, model: str | list, tasks: str, out: str, harness: Episodes | HarnessConfig, n_attempts: int
) -> None:
    """Grade `model` (in process, on loopback) on the task folder `tasks` with Harbor."""
    from terminalworld.agent.evaluate import AgentEvalConfig, agent_eval

    limits = {"dtype": "float32", **asdict(harness)}  # float32 unless the plan's harness states a precision
    cfg = AgentEvalConfig(tasks=tasks, out=out, agent="model", model=joined(model), n_attempts=n_attempts, **limits)
    agent_eval(cfg)


def local_grade(
    *,
    model: Model,
    model_name: str,
    tasks: TaskSet,
    harness: Episodes | HarnessConfig,
    n_attempts: int = 1,
    benchmark: str = "heldout-tasks",
    version: str,
) -> AgentGrade:
    """`model`'s agent grade on the generated tasks, every command in the sandbox (`benchmark` names
    the suite in the artifact's path: one per level of the ladder)."""
    return AgentGrade(
        step(
            artifacts.agent_grade(benchmark, model_name),
            local_grade_fn,
            version=version,
            model=model_input(model),
            tasks=tasks.step,
            harness=harness,
            n_attempts=n_attempts,
        ),
        model_name=model_name,
    )


def harbor_grade_fn(
    *,
    model: str | list,
    out: str,
    model_name: str,
    benchmark: Benchmark,
    agent: str,
    harness: Episodes | HarnessConfig,
    n_attempts: int,
    secrets: list[str],
) -> None:
    """Serve `model` with vLLM inside the step and grade it with Harbor in Daytona on `benchmark`."""
    from terminalworld.agent.evaluate import AgentEvalConfig, agent_eval
    from terminalworld.agent.vllm import vllm_server
    from terminalworld.errors import InputError

    if missing := [name for name in secrets if not os.environ.get(name)]:
        raise InputError(f"the agent grade needs the secrets {', '.join(missing)} in its environment")
    with local_copy(out) as local:
        tasks = benchmark.tasks(os.path.join(local, "dataset"))
        with vllm_server(model=joined(model), served_model=model_name, max_model_len=harness.context_tokens) as url:
            cfg = AgentEvalConfig(
                tasks=tasks,
                out=local,
                agent=agent,
                endpoint=url,
                served_model=model_name,
                environment="daytona",
                n_attempts=n_attempts,
                **asdict(harness),
            )
            agent_eval(cfg)


def harbor_grade(
    *,
    model: Model,
    model_name: str,
    benchmark: Benchmark,
    agent: str,
    harness: Episodes | HarnessConfig,
    n_attempts: int,
    resources=None,
    version: str,
) -> AgentGrade:
    """`model`'s grade on a pinned benchmark: vLLM on the step's GPU, Harbor with Daytona
    (DAYTONA_API_KEY in the step's environment)."""
    return AgentGrade(
        step(
            artifacts.agent_grade(benchmark.name, model_name),
            harbor_grade_fn,
            version=version,
            resources=resources,
            model=model_input(model),
            model_name=model_name,
            benchmark=benchmark,
            agent=agent,
            harness=harness,
            n_attempts=n_attempts,
            secrets=list(SECRETS),
        ),
        model_name=model_name,
    )
