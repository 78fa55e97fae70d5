"""An experiment file's entry point: print the plan, or build it through Marin's step runner.

The plan lists every step of the graph, dependencies first: `name@version`, its output folder
(resolved by Marin from `MARIN_PREFIX`, exactly as the run resolves it), where it runs, the Zephyr
workers of a sharded step, what it needs, and its materialized config. `--run` builds the graph; finished artifacts are reused. Steps
that ask for accelerators are refused outside a cluster unless `--local` says to run them here
anyway. A failing step ends the run with one line naming the step and the log that holds its
traceback (`{output}/failure.log`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any

from terminalworld.errors import StepFailed, TerminalworldError
from terminalworld.pipeline.step import FAILURE_LOG, describe_resources, is_cluster_sized
from terminalworld.pipeline.zephyr import Workers

LAUNCH_HINT = "uv run iris --cluster=CLUSTER job run -- python {script} --run"


def _handles(targets: Sequence[Any]) -> list:
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
    for h in graph_handles(_handles(targets)):
        deps = ", ".join(f"{d.name}@{d.version}" for d in h.deps) or "-"
        lines += [
            f"{h.name}@{h.version}",
            f"    output:    {h.path(prefix)}",
            f"    resources: {describe_resources(h)}",
            f"    needs:     {deps}",
        ]
        if h.adopt_source is None:
            config = materialized_config(h, prefix)
            if isinstance(config.get("workers"), Workers):
                lines.append(f"    zephyr:    {config['workers'].describe(config.get('shard_rows'))}")
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

    handles = _handles(targets)
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


def _on_cluster() -> bool:
    from fray.current_client import current_client
    from fray.local_backend import LocalClient

    return not isinstance(current_client(), LocalClient)


def main(targets: Sequence[Any], description: str, argv: Sequence[str] | None = None) -> int:
    """Print the plan, or with `--run` build it; returns the exit status (2 for an expected
    failure, printed in one line)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--run", action="store_true", help="build the artifacts (default: print the plan)")
    parser.add_argument("--local", action="store_true", help="run accelerator steps on this machine anyway")
    args = parser.parse_args(argv)
    if not args.run:
        print(plan(targets))
        return 0
    from marin.experiment.cli import graph_handles

    big = [h for h in graph_handles(_handles(targets)) if is_cluster_sized(h)]
    if big and not args.local and not _on_cluster():
        names = ", ".join(f"{h.name} ({describe_resources(h)})" for h in big)
        print(
            f"error: refusing to run {len(big)} accelerator step(s) on this machine: {names}. Launch it on the "
            f"cluster: {LAUNCH_HINT.format(script=sys.argv[0])} (or pass --local to run here anyway)",
            file=sys.stderr,
        )
        return 2
    try:
        run(targets)
    except TerminalworldError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("\n".join(f"built: {h.path()}" for h in _handles(targets)))
    return 0
