"""Command lines as config dataclasses (docs/design.md, "One config system").

Every field is a flag, `--field-name` (or the spellings `option(flag=...)` names; the field's own
name parses too), nested dataclasses' fields dotted (`--inner.depth`): a `bool` is a switch, a
`Literal` a choice, a list a repeatable flag whose values may be comma-separated, a number strict.
The layers are the default instance, the data of `--config_path FILE.yaml`, then the flags; draccus
decodes each value and the config's `__post_init__` checks them (`at_least`, `above`). Bad input
prints one line (`error: PROG: ...`) and exits with status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, Literal, NoReturn

from terminalworld.errors import InputError


def option(default: Any = dataclasses.MISSING, help: str = "", *, flag: str | tuple[str, ...] = (), **kw: bool) -> Any:
    """A field with its help, its spellings (`flag`) and, in `kw`, `positional=True` (the command's
    words) or `cli=False` (off the command line). A list default is copied; none: required."""
    meta = {"help": help, "flags": (flag,) if isinstance(flag, str) else flag, **kw}
    if isinstance(default, list):
        return dataclasses.field(default_factory=default.copy, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


class ConfigError(InputError, ValueError):
    """A field's value out of bounds: `--name problem`; the parser names the field's own flag."""

    def __init__(self, name: str, problem: str):
        super().__init__(f"--{name.replace('_', '-')} {problem}")
        self.name, self.problem = name, problem


def at_least(cfg: Any, **bounds: float) -> None:
    """Refuse each named field (None aside) below its bound, or NaN."""
    for name, low in bounds.items():
        if (value := getattr(cfg, name)) is not None and not value >= low:
            raise ConfigError(name, f"must be at least {low:g}, got {value:g}")


def above(cfg: Any, **bounds: float) -> None:
    """Refuse each named field (None aside) at or below its bound, or NaN."""
    for name, low in bounds.items():
        if (value := getattr(cfg, name)) is not None and not value > low:
            raise ConfigError(name, f"must be greater than {low:g}, got {value:g}")


def load_data(path: str) -> Any:
    """The data in a YAML (or JSON) file: plain values only, so no tag builds an object and no
    `!include` reads another file (whose text an error would then show)."""
    import yaml

    with open(path, "rb") as f:
        try:
            return yaml.safe_load(f)
        except yaml.YAMLError as e:
            raise ValueError(str(e).splitlines()[0]) from None


def _bare(tp: Any) -> Any:
    """`tp` without `| None`."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0] if len(args) == 1 else tp
    return tp


def _reader(tp: Any) -> Callable[[str], Any]:
    """A flag's text to a value of `tp` (a list: repeated, comma-separated or `[a, b]`); a string
    stays as it is, so `010` or `yes` is never read again as YAML."""
    import yaml

    def read(text: str) -> Any:
        if typing.get_origin(tp) is list and not text.startswith("["):
            return [_reader(typing.get_args(tp)[0])(part) for part in text.split(",") if part]
        if tp in (int, float):
            try:
                value = tp(text)
            except ValueError:
                what = "an integer" if tp is int else "a number"
                raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
            if not math.isfinite(value):
                raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
            return value
        if tp is bool and text.lower() not in ("true", "false"):
            raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
        try:
            return text if tp is str or typing.get_origin(tp) is Literal else yaml.safe_load(text)
        except yaml.YAMLError as e:  # a tuple or a mapping is YAML, decoded by draccus
            raise argparse.ArgumentTypeError(str(e).splitlines()[0]) from None

    return read


def _add_flags(parser: argparse.ArgumentParser, cls: type, prefix: str = "") -> dict[str, str]:
    """Add the flags of the fields of `cls`; returns each field's dotted name -> its flag."""
    shown: dict[str, str] = {}
    for f in (f for f in dataclasses.fields(cls) if f.metadata.get("cli", True)):
        tp, dest = _bare(typing.get_type_hints(cls)[f.name]), prefix + f.name
        if dataclasses.is_dataclass(tp):
            shown |= _add_flags(parser, tp, dest + ".")
            continue
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        help_ = f.metadata.get("help", "")
        if default is dataclasses.MISSING or default not in (None, False, []):
            help_ += " (required)" if default is dataclasses.MISSING else f" (default: {default})"
        kw: dict[str, Any] = {"help": help_.strip().replace("%", "%%"), "type": _reader(tp), "metavar": "str"}
        if f.metadata.get("positional"):
            shown[dest] = f.name.upper()
            item = _reader(typing.get_args(tp)[0])
            parser.add_argument(dest, nargs="+", **kw | {"type": item, "metavar": f"{f.name.upper()} ..."})
            continue
        names = f.metadata.get("flags") or ("--" + (dest if prefix else dest.replace("_", "-")),)
        if tp is bool:
            kw |= {"nargs": "?", "const": True, "metavar": "true|false"}
        elif typing.get_origin(tp) is list:
            kw |= {"action": "extend"}
        elif typing.get_origin(tp) is Literal:
            kw |= {"choices": [str(c) for c in typing.get_args(tp)], "metavar": None}
        else:
            kw["metavar"] = getattr(tp, "__name__", "str")
        kw |= {"dest": dest, "default": argparse.SUPPRESS}
        parser.add_argument(*names, **kw)
        if "--" + dest not in names:
            parser.add_argument("--" + dest, **kw | {"help": argparse.SUPPRESS})
        shown[dest] = names[0]
    return shown


def _decoded(cls: type, data: dict[str, Any], shown: dict[str, str], fail: Callable, prefix: str = "") -> Any:
    """`cls` from `data`, each nested dataclass built in turn, so that a refusal names its flag."""
    import draccus

    hints, fields = typing.get_type_hints(cls), dataclasses.fields(cls)
    if unknown := sorted(set(data) - {f.name for f in fields}):
        fail(f"unknown field(s): {', '.join(prefix + k for k in unknown)}")
    flag = {f.name: shown.get(prefix + f.name, "--" + prefix + f.name) for f in fields}
    required = [f for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing := [flag[f.name] for f in required if f.name not in data]:
        fail("the following arguments are required: " + ", ".join(missing))
    args = {}
    for name, value in data.items():
        tp = _bare(hints[name])
        try:
            if dataclasses.is_dataclass(tp) and isinstance(value, dict):
                args[name] = _decoded(tp, value, shown, fail, f"{prefix}{name}.")
            else:
                args[name] = draccus.decode(hints[name], value)
        except draccus.ParsingError as e:
            fail(f"argument {flag[name]}: {getattr(e, 'message', e)}")
    try:
        return cls(**args)
    except ConfigError as e:
        fail(f"argument {flag.get(e.name, e.name)}: {e.problem}")


class _OneLine(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {self.prog}: {message.splitlines()[0]} (see --help)\n")


def parse[T](cls: type[T], argv: Sequence[str], prog: str | None = None, **kw: Any) -> T:
    """The config of `argv` (`parse_pair` without a second config)."""
    return parse_pair(cls, None, argv, prog, **kw)[0]


def parse_pair[T, E](
    cls: type[T],
    extra: type[E] | None,
    argv: Sequence[str],
    prog: str | None = None,
    *,
    default: T | Callable[[E], T] | None = None,
    description: str | None = None,
) -> tuple[T, E | None]:
    """The config of `argv`: `default` (or the class's defaults), then the data of `--config_path`,
    then the flags; with `extra`, a second config (say, an experiment's `--run`) from the same
    command line, its flags listed first, and `default` may be a function of it (say, a preset)."""
    import draccus

    parser = _OneLine(prog=prog, description=description)
    first_flags = _add_flags(parser, extra) if extra is not None else {}
    shown = _add_flags(parser, cls)
    assert not shown.keys() & first_flags.keys(), "the two configs share a field"
    parser.add_argument("--config_path", help="a YAML file of the config's fields, under the flags")
    given = vars(parser.parse_args(list(argv)))
    chosen = {k: given.pop(k) for k in first_flags if k in given}
    second = _decoded(extra, chosen, first_flags, parser.error) if extra is not None else None
    first = default(second) if callable(default) else default
    layers = draccus.encode(first) if first is not None else {}
    if (path := given.pop("config_path", None)) is not None:
        try:
            data = load_data(path)
        except (OSError, ValueError) as e:
            parser.error(f"--config_path {path}: {type(e).__name__}: {e}")
        if not isinstance(data, dict):
            parser.error(f"--config_path {path}: a mapping of the config's fields, not {type(data).__name__}")
        layers = _merged(layers, data)
    for dest, value in given.items():
        for key in reversed(dest.split(".")):  # `inner.depth` as {"inner": {"depth": ...}}
            value = {key: value}
        layers = _merged(layers, value)
    return _decoded(cls, layers, shown, parser.error), second


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` on top of `base`: nested mappings merged, anything else replaced."""
    nested = {k: _merged(base[k], v) for k, v in over.items() if isinstance(v, dict) and isinstance(base.get(k), dict)}
    return {**base, **over, **nested}
