"""An experiment file's entry point: print the plan, or build it through Marin's step runner.

The plan lists every step of the graph, dependencies first: `name@version`, its output folder
(resolved by Marin from `MARIN_PREFIX`, exactly as the run resolves it), where it runs, the Zephyr
workers of a sharded step, what it needs, and its materialized config. `--run` builds the graph
through Marin's runner; finished artifacts are reused. Steps that ask for accelerators are refused outside a cluster unless `--local` says to run them here
anyway. A failing step ends the run with one line naming the step and the log that holds its
traceback (`{output}/failure.log`).

An experiment whose sizes live in a recipe dataclass passes the class and a function from a recipe
to its targets; the recipe and the launch flags (`Launch`: `--run`, `--local`) are then parsed from
one command line by draccus, as every config of the project is (`terminalworld.options`): every
field is a flag (`--trajectories 80`), nested dataclasses' fields are dotted (`--tiny.hidden_dim 64`),
and `--config_path file.yaml` reads a YAML file that the flags override in turn. An overridden
recipe must not be served the pinned recipe's artifacts (Marin serves a finished artifact of the
same name and version whatever its recipe), so each recipe, nested ones included, that differs
from its defaults while keeping the default `version` gets `{version}.{digest}`: a calendar version
whose last part is 8 digits of the SHA-256 of the recipe. The same override is the same version, so
a rerun resumes; a `--version` given explicitly is kept as it is. A preset (`default`, such as the
pilot's GPU sizes) replaces the class's defaults as the first layer, while versions still compare
with the class's defaults, so each preset gets a version of its own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from terminalworld.core import scratch
from terminalworld.errors import StepFailed, TerminalworldError
from terminalworld.options import option, parse, parse_pair
from terminalworld.pipeline.step import FAILURE_LOG, describe_resources, is_cluster_sized
from terminalworld.pipeline.zephyr import Workers

LAUNCH_HINT = "uv run iris --cluster=CLUSTER job run -- python {script} --run"
_CALVER = re.compile(r"^\d{4}\.\d{2}\.\d{2}")  # Marin's calendar versions: YYYY.MM.DD, optionally .N


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


def versioned[R](recipe: R, default: R) -> R:
    """`recipe` with every dataclass in it (itself included) that differs from `default` while
    keeping its default calendar `version` moved to `{version}.{8-digit digest of the recipe}`."""
    nested = {
        f.name: versioned(getattr(recipe, f.name), getattr(default, f.name))
        for f in dataclasses.fields(recipe)
        if dataclasses.is_dataclass(getattr(recipe, f.name))
        and type(getattr(default, f.name)) is type(getattr(recipe, f.name))
    }
    recipe = dataclasses.replace(recipe, **nested) if nested else recipe
    version = getattr(default, "version", None)
    if recipe == default or not isinstance(version, str) or recipe.version != version:
        return recipe
    if not (calver := _CALVER.match(version)):
        return recipe  # a mutable `dev` version rebuilds anyway
    import draccus

    encoded = json.dumps(draccus.encode(recipe), sort_keys=True, default=str).encode()
    digest = int(hashlib.sha256(encoded).hexdigest(), 16) % 10**8
    return dataclasses.replace(recipe, version=f"{calver.group(0)}.{digest:08d}")


def overrides(recipe: Any, default: Any, prefix: str = "") -> list[str]:
    """The fields of `recipe` that differ from `default`, dotted, as `name: default -> value`."""
    changed = []
    for f in dataclasses.fields(recipe):
        new, old = getattr(recipe, f.name), getattr(default, f.name)
        if dataclasses.is_dataclass(new) and type(new) is type(old):
            changed += overrides(new, old, f"{prefix}{f.name}.")
        elif new != old:
            changed.append(f"{prefix}{f.name}: {old!r} -> {new!r}")
    return changed


@dataclasses.dataclass(frozen=True)
class Launch:
    """What the experiment does with its plan (the experiment's recipe, if any, follows)."""

    run: bool = option(False, help="build the artifacts (default: print the plan)")
    local: bool = option(False, help="run accelerator steps on this machine anyway")


def _with_presets(names: Sequence[str]) -> type[Launch]:
    """`Launch` with `--preset`, one of `names` (the first by default)."""
    preset = option(names[0], help="the named sizes the recipe's flags override")
    return dataclasses.make_dataclass(
        "Launch", [("preset", Literal[tuple(names)], preset)], bases=(Launch,), frozen=True
    )


def parse_recipe[R](recipe: type[R], argv: Sequence[str], prog: str | None = None, *, default: R | None = None) -> R:
    """The recipe of `argv`, parsed as every config is (`options.parse`: draccus) and versioned by
    `versioned`: `default` (a preset; without one, the class's default instance, so nested recipes
    built by a factory keep their values), then the YAML of `--config_path`, then the flags, nested
    fields dotted. The version compares with the class's defaults, so a preset other than them gets
    its own. Bad flags print one line and exit with status 2."""
    return versioned(parse(recipe, argv, prog, default=recipe() if default is None else default), recipe())


def parse_command_line[R](
    argv: Sequence[str],
    description: str,
    *,
    recipe: type[R] | None = None,
    default: R | None = None,
    presets: Mapping[str, R] | None = None,
) -> tuple[Launch, R | None]:
    """An experiment's command line: its `Launch` flags and, with `recipe`, the recipe (versioned)
    on top of `default`, or of the one of `presets` that `--preset` names (the first by default)."""
    if recipe is None:
        return parse(Launch, argv, description=description), None
    first = recipe() if default is None else default
    launch = Launch if presets is None else _with_presets(list(presets))
    layer = first if presets is None else (lambda chosen: presets[chosen.preset])
    parsed, args = parse_pair(recipe, launch, argv, default=layer, description=description)
    return args, versioned(parsed, recipe())


def main[R](
    targets: Sequence[Any] | Callable[[R], Sequence[Any]],
    description: str,
    argv: Sequence[str] | None = None,
    *,
    recipe: type[R] | None = None,
    default: R | None = None,
    presets: Mapping[str, R] | None = None,
) -> int:
    """Print the plan, or with `--run` build it; returns the exit status (2 for an expected
    failure, printed in one line). With `recipe`, `targets` is a function of the recipe parsed from
    the same command line on top of `default` (`parse_recipe`), or of the one of `presets` that
    `--preset` names (the first by default), and the plan starts with the fields that differ from
    the class's defaults."""
    args, parsed = parse_command_line(
        sys.argv[1:] if argv is None else argv, description, recipe=recipe, default=default, presets=presets
    )
    if recipe is not None:
        changed = overrides(parsed, recipe())
        if changed and not args.run:
            print(f"recipe {recipe.__name__}, overridden: " + "; ".join(changed))
        targets = targets(parsed)
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
    scratch.install_cleanup()  # the steps run sandboxes and copies: end them at SIGTERM/SIGHUP too
    try:
        run(targets)
    except TerminalworldError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("\n".join(f"built: {h.path()}" for h in _handles(targets)))
    return 0
