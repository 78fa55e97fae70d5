"""Command-line options declared once, on the config dataclasses, and derived into argparse.

A config field becomes one flag: `--field-name` unless its `option(flag=...)` names another
spelling (`--in`, `--timeout`), typed from its annotation (`int`, `float`, `str`, `bool` as a
switch, `Literal[...]` as choices, `list[str]` as a repeatable flag whose values may also be
comma-separated), required when the field has no default. The library's functions take the
dataclass; the CLI and the scripts only parse into it.

What a field accepts is declared beside it and checked by argparse, so a bad value is one line
naming the flag, with exit status 2, before any work starts:

- numbers parse strictly (`int` refuses `1e3` and `3.5`; `float` refuses `nan` and `inf`), and
  every numeric field states its bound: `minimum` (inclusive) or `above` (exclusive);
- `check` converts and validates one value (`int_list`, `readable_file`, `chat_template_file`,
  `loadable_tokenizer`), raising `ValueError` or `TerminalworldError` with the reason;
- `path` says which fields are inputs (`"input"`, globs; `"named-input"`, NAME=PATH) and which are
  outputs (`"output-file"`, `"output-dir"`, with `companions` written beside a file), so that
  `check_paths` can refuse an output that would overwrite, or later be read as, an input
  (`core.paths.check_outputs`).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, Literal

from terminalworld.errors import InputError, TerminalworldError

PathRole = Literal["input", "named-input", "output-file", "output-dir"]


def option(
    default: Any = dataclasses.MISSING,
    *,
    flag: str | None = None,
    aliases: Sequence[str] = (),
    help: str | None = None,
    metavar: str | None = None,
    cli: bool = True,
    positional: bool = False,
    minimum: float | None = None,
    above: float | None = None,
    check: Callable[[str], Any] | None = None,
    path: PathRole | None = None,
    companions: Sequence[str] = (),
) -> Any:
    """A dataclass field that carries its command-line spelling, help and what it accepts.

    A list default is copied per instance; `cli=False` keeps a field off the command line;
    `positional=True` makes a `list[str]` field the command's positional arguments. `minimum` /
    `above` bound a number; `check` converts and validates each value; `path` and `companions`
    declare the field as an input or an output (see the module docstring).
    """
    metadata = {
        "flag": flag,
        "aliases": tuple(aliases),
        "help": help,
        "metavar": metavar,
        "cli": cli,
        "positional": positional,
        "minimum": minimum,
        "above": above,
        "check": check,
        "path": path,
        "companions": tuple(companions),
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


_INT = re.compile(r"[+-]?[0-9]+")


def strict_number(text: str, tp: type) -> int | float:
    """`text` as an int (digits only: no `1e3`, no `3.5`) or a finite float; raises `ValueError`."""
    text = text.strip()
    if tp is int:
        if not _INT.fullmatch(text):
            raise ValueError(f"expected an integer, got {text!r}")
        return int(text)
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {text!r}")
    return value


def bound_problem(value: float, minimum: float | None, above: float | None) -> str | None:
    """Why `value` is out of its declared bounds, or None."""
    if minimum is not None and value < minimum:
        return f"must be at least {minimum:g}, got {value:g}"
    if above is not None and value <= above:
        return f"must be greater than {above:g}, got {value:g}"
    return None


def int_list(minimum: int = 1) -> Callable[[str], str]:
    """A check for a comma-separated list of integers of at least `minimum` (kept as the text)."""

    def check(text: str) -> str:
        values = [v for v in text.split(",") if v.strip()]
        if not values:
            raise ValueError(f"expected comma-separated integers, got {text!r}")
        for v in values:
            problem = bound_problem(strict_number(v, int), minimum, None)
            if problem:
                raise ValueError(f"{v.strip()} in {text!r}: {problem}")
        return text

    return check


def readable_file(text: str) -> str:
    """A check: `text` names an existing, readable local file (or a remote URL, checked on use)."""
    if "://" in text:
        return text
    if not os.path.exists(text):
        raise ValueError(f"{text}: no such file")
    if not os.path.isfile(text):
        raise ValueError(f"{text}: not a file")
    try:
        with open(text, "rb") as f:
            f.read(1)
    except OSError as e:
        raise ValueError(f"{text}: cannot be read ({e.strerror})") from None
    return text


def chat_template_file(text: str) -> str:
    """A check: `text` is a readable UTF-8 file holding a Jinja template that compiles."""
    from terminalworld.core.assets import read_chat_template

    read_chat_template(readable_file(text))
    return text


def loadable_tokenizer(text: str) -> str:
    """A check: `text` names a tokenizer that loads (folder, GGUF file or asset name); the loaded
    tokenizer is cached, so the command does not load it twice."""
    from terminalworld.core.assets import load_tokenizer

    load_tokenizer(text)
    return text


def _value_type(name: str, tp: Any, meta: dict[str, Any]) -> Callable[[str], Any] | None:
    """argparse's `type` for a field: strict numbers within bounds, then the declared check."""
    check, minimum, above = meta.get("check"), meta.get("minimum"), meta.get("above")
    number = tp if tp in (int, float) else None
    if number is None and check is None:
        return None

    def convert(text: str) -> Any:
        try:
            if number is not None:
                value = strict_number(text, number)
                problem = bound_problem(value, minimum, above)
                if problem:
                    raise ValueError(problem)
            else:
                value = text
            return check(value) if check is not None else value
        except (ValueError, TerminalworldError) as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    convert.__name__ = name
    return convert


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr (exit status 2), as every other
    expected failure of the command is; `--help` still prints the usage."""

    def error(self, message: str) -> typing.NoReturn:
        """Print `message` as one line and exit with status 2."""
        self.exit(2, f"error: {self.prog}: {message} (see --help)\n")


def _split_commas(values: list[str] | None) -> list[str] | None:
    if values is None:
        return None
    return [v for item in values for v in item.split(",") if v]


def add_options(parser: argparse.ArgumentParser, cls: type) -> None:
    """Add one flag per CLI field of dataclass `cls` to `parser`."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        meta = f.metadata
        if not meta.get("cli", True):
            continue
        tp, _ = _unwrap_optional(hints[f.name])
        value_type = _value_type(f.name.replace("_", "-"), tp, meta)
        if meta.get("positional"):
            parser.add_argument(f.name, nargs="+", help=meta.get("help"), type=value_type)
            continue
        names = [flag_of(f), *meta.get("aliases", ())]
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
            if value_type is not None:
                kwargs["type"] = _each_comma_part(value_type)
        elif value_type is not None:
            kwargs["type"] = value_type
        if not has_default:
            kwargs["required"] = True
        kwargs["default"] = None
        parser.add_argument(*names, **kwargs)


def _each_comma_part(convert: Callable[[str], Any]) -> Callable[[str], str]:
    """A repeatable flag's type: every comma-separated part checked, the text kept (split later)."""

    def each(text: str) -> str:
        for part in text.split(","):
            if part:
                convert(part)
        return text

    each.__name__ = convert.__name__
    return each


def numeric_fields(cls: type) -> list[dataclasses.Field]:
    """The command-line fields of `cls` typed `int` or `float` (optional or not)."""
    hints = typing.get_type_hints(cls)
    return [
        f
        for f in dataclasses.fields(cls)
        if f.metadata.get("cli", True) and _unwrap_optional(hints[f.name])[0] in (int, float)
    ]


def flag_of(f: dataclasses.Field) -> str:
    """The flag spelling of a config field."""
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def declared_paths(cfg: Any) -> tuple[list[tuple[str, str]], list[tuple[str, str, str, tuple[str, ...]]]]:
    """The inputs `[(flag, pattern)]` and outputs `[(flag, path, "file" | "dir", companions)]`
    that a config's fields declare (`path=`), with their current values."""
    inputs: list[tuple[str, str]] = []
    outputs: list[tuple[str, str, str, tuple[str, ...]]] = []
    for f in dataclasses.fields(cfg):
        role, value = f.metadata.get("path"), getattr(cfg, f.name)
        if role is None or value is None:
            continue
        if isinstance(value, str):
            values = [value]
        else:  # a repeatable flag's values may be comma-separated, as `from_args` splits them
            values = list(value) if f.metadata.get("positional") else _split_commas(list(value)) or []
        name = f.name if f.metadata.get("positional") else flag_of(f)
        if role in ("input", "named-input"):
            inputs += [(name, v.partition("=")[2] if role == "named-input" else v) for v in values]
        else:
            kind = "dir" if role == "output-dir" else "file"
            outputs += [(name, v, kind, f.metadata.get("companions", ())) for v in values]
    return inputs, outputs


def check_paths(cfg: Any) -> None:
    """Refuse, before any work, outputs that cannot be written or would overwrite (or be read back
    as) an input of the config (`core.paths.check_outputs`)."""
    from terminalworld.core.paths import check_outputs

    inputs, outputs = declared_paths(cfg)
    if outputs:
        check_outputs(outputs, inputs)


def from_args[T](cls: type[T], args: argparse.Namespace) -> T:
    """An instance of `cls` from parsed flags (absent ones keep the dataclass default)."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not hasattr(args, f.name):
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
        if not sep or not name:
            raise InputError(f"{flag} {pair}: expected NAME=PATH to {what}")
        if not os.path.isfile(path):
            raise InputError(f"{flag} {pair}: {path} is not a file (expected NAME=PATH to {what})")
        out.append((name, path))
    return out
