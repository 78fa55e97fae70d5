"""Command-line options declared once, on the config dataclasses, and derived into argparse.

A config field becomes one flag: `--field-name` unless its `option(flag=...)` names another
spelling (`--in`, `--timeout`), typed from its annotation (`int`, `float`, `str`, `bool` as a
switch, `Literal[...]` as choices, `list[str]` as a repeatable flag whose values may also be
comma-separated), required when the field has no default. The library's functions take the
dataclass; the CLI and the scripts only parse into it.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import types
import typing
from collections.abc import Sequence
from typing import Any, Literal

from terminalworld.errors import InputError


def option(
    default: Any = dataclasses.MISSING,
    *,
    flag: str | None = None,
    aliases: Sequence[str] = (),
    help: str | None = None,
    metavar: str | None = None,
    cli: bool = True,
    positional: bool = False,
) -> Any:
    """A dataclass field that carries its command-line spelling and help.

    A list default is copied per instance; `cli=False` keeps a field off the command line;
    `positional=True` makes a `list[str]` field the command's positional arguments.
    """
    metadata = {
        "flag": flag,
        "aliases": tuple(aliases),
        "help": help,
        "metavar": metavar,
        "cli": cli,
        "positional": positional,
    }
    if isinstance(default, list | dict | set):
        value = default
        return dataclasses.field(default_factory=lambda: type(value)(value), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def _split_commas(values: list[str] | None) -> list[str] | None:
    if values is None:
        return None
    return [v for item in values for v in item.split(",") if v]


def add_options(parser: argparse.ArgumentParser, cls: type, *, skip: Sequence[str] = ()) -> None:
    """Add one flag per CLI field of dataclass `cls` to `parser`."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        meta = f.metadata
        if f.name in skip or not meta.get("cli", True):
            continue
        tp, _ = _unwrap_optional(hints[f.name])
        if meta.get("positional"):
            parser.add_argument(f.name, nargs="+", help=meta.get("help"))
            continue
        flag = meta.get("flag") or "--" + f.name.replace("_", "-")
        names = [flag, *meta.get("aliases", ())]
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        kwargs: dict[str, Any] = {"dest": f.name, "help": meta.get("help")}
        if meta.get("metavar"):
            kwargs["metavar"] = meta["metavar"]
        if tp is bool:
            parser.add_argument(*names, action="store_true", **kwargs)
            continue
        if typing.get_origin(tp) is Literal:
            kwargs["choices"] = list(typing.get_args(tp))
        elif typing.get_origin(tp) is list:
            kwargs["action"] = "append"
        elif tp in (int, float):
            kwargs["type"] = tp
        if not has_default:
            kwargs["required"] = True
        kwargs["default"] = None
        parser.add_argument(*names, **kwargs)


def from_args[T](cls: type[T], args: argparse.Namespace, **fixed: Any) -> T:
    """An instance of `cls` from parsed flags (absent ones keep the dataclass default)."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = dict(fixed)
    for f in dataclasses.fields(cls):
        if f.name in values or not hasattr(args, f.name):
            continue
        value = getattr(args, f.name)
        tp, _ = _unwrap_optional(hints[f.name])
        if typing.get_origin(tp) is list and not f.metadata.get("positional"):
            value = _split_commas(value)
        if value is None or (tp is bool and value is False):
            continue
        values[f.name] = value
    return cls(**values)


def named_files(pairs: list[str], flag: str, what: str) -> list[tuple[str, str]]:
    """`NAME=PATH` flag values as (name, path); raises `InputError` naming `flag` and `what` the path
    should be when a value is not of that form or its file does not exist."""
    out = []
    for pair in pairs:
        name, sep, path = pair.partition("=")
        if not sep or not os.path.isfile(path):
            raise InputError(f"{flag} {pair}: expected NAME=PATH to {what}")
        out.append((name, path))
    return out
