"""An experiment file's entry point: print its plan, or with `--run` build it (`pipeline.build`).

A recipe dataclass and the launch flags (`Launch`: `--run`, `--local`, a `--preset`) are parsed
from one command line as every config is (`terminalworld.options`). A recipe that differs from its
class's defaults while keeping the default calendar `version` gets `{version}.{8 digits of the
SHA-256 of the recipe}`, nested recipes included, so an override is never served the pinned
recipe's artifacts, the same override resumes, and each preset has a version of its own; a
`--version` given explicitly is kept. Steps that ask for accelerators are refused outside a cluster
unless `--local` says to run them here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from terminalworld.core import scratch
from terminalworld.errors import TerminalworldError
from terminalworld.options import option, parse, parse_pair
from terminalworld.pipeline.build import on_cluster, plan, run, step_handles
from terminalworld.pipeline.step import describe_resources, is_cluster_sized

LAUNCH_HINT = "uv run iris --cluster=CLUSTER job run -- python {script} --run"
_CALVER = re.compile(r"^\d{4}\.\d{2}\.\d{2}")  # Marin's calendar versions: YYYY.MM.DD, optionally .N


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


def parse_recipe[R](recipe: type[R], argv: Sequence[str], prog: str | None = None, *, default: R | None = None) -> R:
    """The recipe of `argv` on top of `default` (or the class's default instance), versioned."""
    return versioned(parse(recipe, argv, prog, default=recipe() if default is None else default), recipe())


def parse_command_line[R](
    argv: Sequence[str],
    description: str,
    *,
    recipe: type[R] | None = None,
    default: R | None = None,
    presets: Mapping[str, R] | None = None,
) -> tuple[Launch, R | None]:
    """The `Launch` flags and, with `recipe`, the recipe (versioned) on top of `default`, or of the
    one of `presets` that `--preset` names (the first by default)."""
    if recipe is None:
        return parse(Launch, argv, description=description), None
    launch, layer = Launch, recipe() if default is None else default
    if presets is not None:
        preset = option(next(iter(presets)), help="the named sizes the recipe's flags override")
        fields = [("preset", Literal[tuple(presets)], preset)]
        launch = dataclasses.make_dataclass("Launch", fields, bases=(Launch,), frozen=True)

        def layer(chosen: Any) -> R:
            return presets[chosen.preset]

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
    """Print the plan (after the recipe's overridden fields), or with `--run` build it; returns the
    exit status (2 for an expected failure, printed in one line). With `recipe`, `targets` is a
    function of the recipe parsed from the same command line (`parse_command_line`)."""
    argv = sys.argv[1:] if argv is None else argv
    args, parsed = parse_command_line(argv, description, recipe=recipe, default=default, presets=presets)
    if recipe is not None:
        if (changed := overrides(parsed, recipe())) and not args.run:
            print(f"recipe {recipe.__name__}, overridden: " + "; ".join(changed))
        targets = targets(parsed)
    if not args.run:
        print(plan(targets))
        return 0
    from marin.experiment.cli import graph_handles

    big = [h for h in graph_handles(step_handles(targets)) if is_cluster_sized(h)]
    if big and not args.local and not on_cluster():
        names = ", ".join(f"{h.name} ({describe_resources(h)})" for h in big)
        hint = LAUNCH_HINT.format(script=sys.argv[0])
        why = f"refusing to run {len(big)} accelerator step(s) on this machine: {names}"
        print(f"error: {why}. Launch it on the cluster: {hint} (or pass --local to run here anyway)", file=sys.stderr)
        return 2
    scratch.install_cleanup()  # the steps run sandboxes and copies: end them at SIGTERM/SIGHUP too
    try:
        run(targets)
    except TerminalworldError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("\n".join(f"built: {h.path()}" for h in step_handles(targets)))
    return 0
