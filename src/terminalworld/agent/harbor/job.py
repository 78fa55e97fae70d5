"""Run one Harbor job from a JSON spec: `python -m terminalworld.agent.harbor.job SPEC.json`.

Runs inside Harbor's own environment (`runtime.harbor_python`), with the project's `src` on
PYTHONPATH, so that Harbor's real `Job`, trials, verifier and resume logic grade the tasks. The
spec (`evaluate.job_spec`) names the jobs folder, the environment, the agent, the dataset, the
attempts and the concurrency. Re-running the same spec resumes: Harbor keeps every
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


def job_config(spec: dict) -> JobConfig:
    """Harbor's job config for `spec` (see `evaluate.job_spec`): its environment, agent and dataset
    sections are Harbor's own config models, field for field."""
    return JobConfig(
        job_name=spec["job_name"],
        jobs_dir=Path(spec["jobs_dir"]),
        n_attempts=spec["n_attempts"],
        n_concurrent_trials=spec["n_concurrent"],
        quiet=True,
        environment=EnvironmentConfig(**spec["environment"]),
        agents=[AgentConfig(**spec["agent"])],
        datasets=[DatasetConfig(**spec["dataset"])],
    )


async def main(path: str) -> None:
    """Create (or resume) the job of the spec at `path` and run it."""
    spec = json.loads(Path(path).read_text())
    job = await Job.create(job_config(spec))
    await job.run()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
