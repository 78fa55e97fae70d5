"""The agent grade as Marin steps: generated tasks, a model graded on them locally, and a model
served with vLLM and graded by Harbor on a pinned benchmark in production. Each step runs the
stage's function on its config, built from the artifacts it reads."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from terminalworld.agent.benchmarks import Benchmark, BenchmarkGradeConfig, grade_benchmark
from terminalworld.agent.evaluate import AgentEvalConfig, agent_eval
from terminalworld.agent.harness import HarnessConfig
from terminalworld.core.precision import Precision
from terminalworld.pipeline import artifacts
from terminalworld.pipeline.step import AgentGrade, Model, Subsets, TaskSet, config_step, model_path
from terminalworld.tasks.make import MakeTasksConfig, make_tasks

SECRETS = ("DAYTONA_API_KEY",)  # Harbor's Daytona environment


@dataclass(frozen=True, kw_only=True)
class Episodes:
    """An episode's limits alone, where the sampling is set elsewhere: a grade given them samples
    greedily (`HarnessConfig`'s defaults), ECHO's recipe at its own temperature and seed. A plan that
    samples its grades passes the whole `HarnessConfig`."""

    max_turns: int
    context_tokens: int
    max_tokens_per_turn: int


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
    """`n` generated tasks, at most `per_repo` from one repository, at `level` of the ladder
    (`tasks.make.LEVELS`, or "ladder": every level, one suite per level inside; the same seed gives
    the same bugs at every level); with `unseen_in`, only from repos absent from its subset of `size`."""

    def config(ctx) -> MakeTasksConfig:
        return MakeTasksConfig(
            out=ctx.output_path,
            n=n,
            seed=seed,
            exclude_repos_from=[unseen_in.at(ctx, artifacts.subset_file(size))] if unseen_in else [],
            per_repo=per_repo,
            level=level,
        )

    name = artifacts.tasks(purpose if level == "function" else f"{purpose}-{level}")
    return TaskSet(config_step(name, make_tasks, config, version=version, deps=[unseen_in]))


def local_grade(
    *,
    model: Model,
    model_name: str,
    tasks: TaskSet,
    harness: Episodes | HarnessConfig,
    dtype: Precision = "float32",
    n_attempts: int = 1,
    n_concurrent: int = 2,
    benchmark: str = "heldout-tasks",
    version: str,
) -> AgentGrade:
    """`model`'s agent grade on the generated tasks, in process on loopback, every command in the
    sandbox (`benchmark` names the suite in the artifact's path: one per level of the ladder), served
    in float32 unless the plan states another `dtype`, so a grade does not depend on the CPU.
    `n_concurrent` Harbor trials run at once; the loopback server decodes their requests together,
    sampled ones each with its own seed, so it sets the speed, not the tokens."""

    def config(ctx) -> AgentEvalConfig:
        return AgentEvalConfig(
            tasks=tasks.at(ctx),
            out=ctx.output_path,
            agent="model",
            model=model_path(ctx, model),
            n_attempts=n_attempts,
            n_concurrent=n_concurrent,
            dtype=dtype,
            **asdict(harness),
        )

    name = artifacts.agent_grade(benchmark, model_name)
    return AgentGrade(
        config_step(name, agent_eval, config, version=version, deps=[model, tasks]), model_name=model_name
    )


def harbor_grade(
    *,
    model: Model,
    model_name: str,
    benchmark: Benchmark,
    agent: str,
    harness: HarnessConfig,
    n_attempts: int,
    resources=None,
    version: str,
) -> AgentGrade:
    """`model`'s grade on a pinned benchmark: vLLM on the step's GPU, Harbor with Daytona
    (DAYTONA_API_KEY in the step's environment)."""

    def config(ctx) -> BenchmarkGradeConfig:
        return BenchmarkGradeConfig(
            model=model_path(ctx, model),
            out=ctx.output_path,
            model_name=model_name,
            benchmark=benchmark,
            agent=agent,
            harness=harness,
            n_attempts=n_attempts,
            secrets=list(SECRETS),
        )

    name = artifacts.agent_grade(benchmark.name, model_name)
    step = config_step(name, grade_benchmark, config, version=version, deps=[model], resources=resources)
    return AgentGrade(step, model_name=model_name)
