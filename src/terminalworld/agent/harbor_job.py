"""Run one Harbor job from a JSON spec: `python -m terminalworld.agent.harbor_job SPEC.json`.

Runs inside Harbor's own environment (`harbor_runtime.harbor_python`), with the project's `src` on
PYTHONPATH, so that Harbor's real `Job`, trials, verifier and resume logic grade the tasks. The
spec (written by `evaluate.agent_eval`) names the tasks folder, the jobs folder, the agent and its
kwargs, the attempts and the concurrency. Re-running the same spec resumes: Harbor keeps every
trial that has a result and reruns the others.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from harbor.job import Job
from harbor.models.job.config import DatasetConfig, JobConfig
from harbor.models.trial.config import AgentConfig, EnvironmentConfig

ENVIRONMENT = "terminalworld.agent.harbor_env:SandboxEnvironment"
MODEL_AGENT = "terminalworld.agent.harbor_agent:SweZeroAgent"


def job_config(spec: dict) -> JobConfig:
    """Harbor's job config for `spec`: built-in `oracle`/`nop`, or the project's agent."""
    agent = spec["agent"]
    if agent in ("oracle", "nop"):
        agents = [AgentConfig(name=agent)]
    else:
        agents = [AgentConfig(import_path=MODEL_AGENT, kwargs=spec["agent_kwargs"])]
    return JobConfig(
        job_name=spec["job_name"],
        jobs_dir=Path(spec["jobs_dir"]),
        n_attempts=spec["n_attempts"],
        n_concurrent_trials=spec["n_concurrent"],
        quiet=True,
        environment=EnvironmentConfig(import_path=ENVIRONMENT, kwargs=spec["environment_kwargs"]),
        agents=agents,
        datasets=[DatasetConfig(path=Path(spec["tasks"]))],
    )


async def main(path: str) -> None:
    spec = json.loads(Path(path).read_text())
    job = await Job.create(job_config(spec))
    await job.run()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
