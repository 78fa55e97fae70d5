"""Pinned agent benchmarks: a Hugging Face dataset of Harbor task folders at an exact revision with
its exact list of instance ids, or a Harbor registry dataset at an exact version. The pins
themselves live in the experiment files."""

from __future__ import annotations

import hashlib
import os
from dataclasses import asdict, dataclass, field

from terminalworld.agent.harness import HarnessConfig
from terminalworld.errors import StepFailed


@dataclass(frozen=True, kw_only=True)
class Benchmark:
    """Where a benchmark's tasks come from, pinned."""

    name: str
    hf_dataset: str | None = None
    revision: str | None = None
    instance_ids: tuple[str, ...] = ()
    registry: str | None = None  # Harbor's registry: "NAME@VERSION"

    def describe(self) -> str:
        """One line for the plan."""
        if self.registry:
            return f"{self.name}: Harbor registry {self.registry}"
        ids = hashlib.sha256("\n".join(self.instance_ids).encode()).hexdigest()[:12]
        return (
            f"{self.name}: hf://datasets/{self.hf_dataset}@{self.revision}, {len(self.instance_ids)} ids (sha256 {ids})"
        )

    def __str__(self) -> str:  # the plan shows this line, not a hundred ids
        return self.describe()

    def tasks(self, dest: str) -> str:
        """The `--tasks` argument of agent-eval: the registry dataset, or the HF snapshot downloaded
        into `dest` and checked to hold exactly the pinned instance ids."""
        if self.registry:
            return f"registry:{self.registry}"
        from huggingface_hub import snapshot_download

        snapshot_download(repo_id=self.hf_dataset, repo_type="dataset", revision=self.revision, local_dir=dest)
        found = {p for p in os.listdir(dest) if os.path.isdir(os.path.join(dest, p)) and not p.startswith(".")}
        if self.instance_ids and found != set(self.instance_ids):
            missing, extra = sorted(set(self.instance_ids) - found), sorted(found - set(self.instance_ids))
            raise StepFailed(
                f"{self.hf_dataset}@{self.revision} is not the pinned slice: missing {missing[:5]}, extra {extra[:5]}"
            )
        return dest


@dataclass(frozen=True)
class BenchmarkGradeConfig:
    """A model's grade on a pinned benchmark: the model (served by vLLM) and its name, the output
    folder, the benchmark, the agent, the episode limits (`agent-eval`'s flags of the same names),
    the attempts, and the secrets Harbor's environment needs."""

    model: str
    out: str
    model_name: str
    benchmark: Benchmark
    agent: str
    harness: HarnessConfig
    n_attempts: int
    secrets: list[str] = field(default_factory=list)


def grade_benchmark(cfg: BenchmarkGradeConfig) -> None:
    """Serve the model with vLLM and grade it with Harbor in Daytona on the benchmark, writing in a
    local copy of `cfg.out` (a rerun resumes what a preempted one put back)."""
    from terminalworld.agent.evaluate import AgentEvalConfig, agent_eval
    from terminalworld.agent.vllm import vllm_server
    from terminalworld.errors import InputError
    from terminalworld.pipeline.step import local_copy

    if missing := [name for name in cfg.secrets if not os.environ.get(name)]:
        raise InputError(f"the agent grade needs the secrets {', '.join(missing)} in its environment")
    with local_copy(cfg.out) as local:
        tasks = cfg.benchmark.tasks(os.path.join(local, "dataset"))
        served = {"model": cfg.model, "served_model": cfg.model_name, "max_model_len": cfg.harness.context_tokens}
        with vllm_server(**served) as url:
            run = {"tasks": tasks, "out": local, "agent": cfg.agent, "endpoint": url, "served_model": cfg.model_name}
            agent_eval(AgentEvalConfig(**run, environment="daytona", n_attempts=cfg.n_attempts, **asdict(cfg.harness)))
