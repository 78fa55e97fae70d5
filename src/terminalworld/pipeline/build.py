"""An experiment's graph through Marin: its plan, and the run that builds it.

The plan lists every step of the graph, dependencies first: `name@version`, its output folder
(resolved by Marin from `MARIN_PREFIX`, exactly as the run resolves it), where it runs, the Zephyr
workers of a sharded step, what it needs, and its materialized config. The run builds the graph
through Marin's runner; finished artifacts are reused. A failing step ends the run with one line
naming the step and the log that holds its traceback (`{output}/failure.log`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from typing import Any

from terminalworld.errors import StepFailed
from terminalworld.pipeline.step import FAILURE_LOG, describe_resources
from terminalworld.pipeline.zephyr import Workers


def step_handles(targets: Sequence[Any]) -> list:
    """The step handles of `targets` (a target may hold its step as `.step`)."""
    return [getattr(t, "step", t) for t in targets]


def _plain(value: Any) -> Any:
    """A config value as JSON shows it: a typed config (a dataclass) by its fields, as Marin's
    fingerprint reads it, unless it says how to show itself (`__str__`); anything else by its text."""
    if dataclasses.is_dataclass(value) and type(value).__str__ is object.__str__:
        return dataclasses.asdict(value)
    return str(value)


def plan(targets: Sequence[Any]) -> str:
    """Each step of the graph (dependencies first): name@version, output, resources, needs, config."""
    from marin.execution.lazy import materialized_config
    from marin.experiment.cli import graph_handles
    from rigging.filesystem.cluster_config import marin_prefix

    prefix = marin_prefix()
    lines = []
    for h in graph_handles(step_handles(targets)):
        deps = ", ".join(f"{d.name}@{d.version}" for d in h.deps) or "-"
        lines += [
            f"{h.name}@{h.version}",
            f"    output:    {h.path(prefix)}",
            f"    resources: {describe_resources(h)}",
            f"    needs:     {deps}",
        ]
        if h.adopt_source is None:
            config = materialized_config(h, prefix)
            if dataclasses.is_dataclass(config):  # a stage's own config, shown by its fields
                config = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
            if isinstance(config.get("workers"), Workers):
                rows = next((v.shard_rows for v in config.values() if hasattr(v, "shard_rows")), None)
                lines.append(f"    zephyr:    {config['workers'].describe(config.get('shard_rows', rows))}")
            lines.append(f"    config:    {json.dumps(config, default=_plain)}")
    return "\n".join(lines)


class _DropStepTraceback(logging.Filter):
    """Marin logs a failing step's traceback to the console; ours goes to the step's log."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith("Step failed"):
            record.exc_info, record.exc_text = None, None
        return True


def run(targets: Sequence[Any]) -> None:
    """Build the targets (and everything they need); finished artifacts are reused. A failing
    step raises `StepFailed` naming the step, the cause and the log with its traceback."""
    from marin.execution.lazy import run as marin_run
    from marin.experiment.cli import graph_handles

    handles = step_handles(targets)
    quiet = _DropStepTraceback()
    runner_log = logging.getLogger("marin.execution.step_runner")
    runner_log.addFilter(quiet)
    try:
        marin_run(*handles, max_concurrent=1)
    except RuntimeError as e:
        failed = e.__cause__
        name = str(failed).removeprefix("Step failed: ").split(";")[0] if failed is not None else "?"
        cause = failed.__cause__ if failed is not None and failed.__cause__ is not None else e
        step = next((h for h in graph_handles(handles) if h.name == name.rsplit("_", 1)[0] or h.name == name), None)
        where = f"; traceback in {step.path()}/{FAILURE_LOG}" if step is not None else ""
        raise StepFailed(f"step {name} failed: {type(cause).__name__}: {cause}{where}") from None
    finally:
        runner_log.removeFilter(quiet)


def on_cluster() -> bool:
    """Whether this process runs on a cluster (not Fray's local client)."""
    from fray.current_client import current_client
    from fray.local_backend import LocalClient

    return not isinstance(current_client(), LocalClient)
