"""The one config system: every command line (each `terminalworld` subcommand, each experiment and
its recipe) is a config dataclass parsed by draccus, as Marin and Levanter parse theirs, with what
draccus lacks added here (docs/design.md, "One config system"): a field declared with `option(...)`
gets its spelling and aliases, positional words, repeatable lists, switches, strict numbers within
its bounds, choices, checks, and input and output roles (`check_paths`), each bad value refused in
one line naming the flag before any work starts; `Commands` adds subcommands.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import os
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from terminalworld.errors import TerminalworldError

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

    The flag is `--field-name` unless `flag` names another spelling (`--in`), plus `aliases`; a
    `bool` is a switch, a `Literal` a choice, a `list[str]` a repeatable flag whose values may be
    comma-separated, or with `positional=True` the command's words; no default: required. A list
    default is copied per instance; `cli=False` keeps a field off the command line. Numbers parse
    strictly within `minimum` (inclusive) or `above`; `check` converts and validates each value.
    `path` says the field is an input (`"input"`, globs; `"named-input"`, NAME=PATH) or an output
    (`"output-file"` with `companions` written beside it, `"output-dir"`), for `check_paths`.
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
        values = [value] if isinstance(value, str) else list(value)  # a list: comma parts already split
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


@dataclasses.dataclass(frozen=True)
class Given:
    """A value already converted and checked by its flag's action, so it is not read again as YAML
    (draccus reads each flag's text as YAML: `yes` would become True, `010` eight)."""

    value: Any


def _converter(tp: Any, meta: Mapping[str, Any]) -> Callable[[str], Any]:
    """One raw value to the field's type: strict numbers within bounds, then the declared check."""
    check, minimum, above = meta.get("check"), meta.get("minimum"), meta.get("above")
    number = tp if tp in (int, float) else None

    def convert(text: str) -> Any:
        value: Any = text
        if number is not None:
            value = strict_number(text, number)
            if problem := bound_problem(value, minimum, above):
                raise ValueError(problem)
        return check(value) if check is not None else value

    return convert


class _Declared(argparse.Action):
    """The action of a declared field: converts and checks what it is given (`kind`: a `value`, a
    `switch`, a repeatable comma-separated `list`, or the `positional` words) and stores a `Given`;
    a bad value is an argparse error naming the flag."""

    def __init__(self, option_strings: list[str], dest: str, *, kind: str, convert: Callable, **kwargs: Any):
        super().__init__(option_strings, dest, **kwargs)
        self.kind, self.convert = kind, convert

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        try:
            if self.kind == "switch":
                value: Any = True
            elif self.kind == "positional":
                value = [self.convert(v) for v in values]
            elif self.kind == "list":
                prior = getattr(namespace, self.dest, None)
                value = [*(prior.value if isinstance(prior, Given) else [])]
                value += [self.convert(part) for part in values.split(",") if part]
            else:
                value = self.convert(values)
        except (ValueError, TerminalworldError) as e:
            raise argparse.ArgumentError(self, str(e)) from None
        setattr(namespace, self.dest, Given(value))


def _add_declared(group: Any, child: Any, top_level: bool) -> None:
    """The flag(s) of one declared field (`child`, draccus's wrapper of it). Help shows the type as
    draccus shows it, the default, or that the flag is required."""
    f, meta = child.field, child.field.metadata
    tp, _ = _unwrap_optional(child.type)
    default = _default_of(f)
    quiet = default is dataclasses.MISSING or default is None or default is False or default == []
    shown, help_ = (
        (argparse.SUPPRESS, meta.get("help") or "")
        if quiet
        else (default, meta.get("help") or "(default: %(default)s)")
    )
    if default is dataclasses.MISSING:
        help_ = f"{help_} (required)".strip()
    common: dict[str, Any] = {"action": _Declared, "help": help_, "convert": _converter(tp, meta), "default": shown}
    if meta.get("positional"):
        group.add_argument(child.dest, nargs="+", kind="positional", metavar=f"{f.name.upper()} ...", **common)
        return
    names = [flag_of(f), *meta.get("aliases", ())] if top_level else ["--" + child.dest]
    common |= {"dest": child.dest, "metavar": meta.get("metavar")}
    if tp is bool:
        common |= {"kind": "switch", "nargs": 0}
    elif typing.get_origin(tp) is list:
        item = typing.get_args(tp)[0]
        common |= {"kind": "list", "convert": _converter(item, meta), "metavar": meta.get("metavar") or item.__name__}
    else:
        common |= {"kind": "value"}
        if typing.get_origin(tp) is Literal:
            common["choices"] = [str(c) for c in typing.get_args(tp)]
        else:
            common["metavar"] = meta.get("metavar") or getattr(tp, "__name__", "str")
    group.add_argument(*names, **common)
    if "--" + child.dest not in names:  # draccus's own spelling parses too, unlisted
        group.add_argument("--" + child.dest, **(common | {"help": argparse.SUPPRESS}))


def _default_of(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def _register(wrapper: Any, parser: Any) -> None:
    """draccus's `DataclassWrapper.register_actions`, declared fields given their own flags."""
    from draccus.wrappers import DataclassWrapper, FieldWrapper

    group = parser.add_argument_group(title=wrapper.title, description=wrapper.description)
    for child in wrapper._children:
        if isinstance(child, FieldWrapper) and "cli" in child.field.metadata:
            if child.field.metadata["cli"]:
                _add_declared(group, child, top_level=wrapper.parent is None)
        elif isinstance(child, DataclassWrapper):
            _register(child, parser)
        elif isinstance(child, FieldWrapper):
            child.add_action(group)
        else:
            child.register_actions(parser)


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` on top of `base`: nested mappings merged, anything else replaced."""
    return {
        k: _merged(base[k], v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v for k, v in over.items()
    } | {k: v for k, v in base.items() if k not in over}


def load_data(path: str) -> Any:
    """The data in a YAML (or JSON) file, or TOML for `.toml`: plain values only, so no tag builds
    an object and no `!include` reads another file (whose text an error would then show)."""
    import tomllib

    import yaml

    with open(path, "rb") as f:
        raw = f.read()
    try:
        return tomllib.loads(raw.decode()) if path.endswith(".toml") else yaml.safe_load(raw)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, yaml.YAMLError) as e:
        raise ValueError(str(e).splitlines()[0]) from None


def parse[T](
    cls: type[T],
    argv: Sequence[str],
    prog: str | None = None,
    *,
    default: T | None = None,
    description: str | None = None,
) -> T:
    """The config of `argv`, parsed by draccus: `default` (or the class's defaults), then the file
    of `--config_path`, then the flags. A bad flag, value or file, or a required field left out,
    prints one line (`error: PROG: ...`) and exits with status 2; `--help` lists the flags."""
    return parse_pair(cls, None, argv, prog, default=default, description=description)[0]


def parse_pair[T, E](
    cls: type[T],
    extra: type[E] | None,
    argv: Sequence[str],
    prog: str | None = None,
    *,
    default: T | Callable[[E], T] | None = None,
    description: str | None = None,
) -> tuple[T, E | None]:
    """`parse`, with the flags of a second config class `extra` (say, what to do with the first:
    an experiment's `--run`) taken from the same command line; its fields come first in `--help`.
    `default` may be a function of the `extra` config (say, the preset it names)."""
    import draccus
    from draccus import cfgparsing, utils
    from draccus.argparsing import ArgumentParser
    from draccus.wrappers import DataclassWrapper
    from draccus.wrappers.suppressing_argparse import SuppressingArgumentParser

    extra_names = {f.name for f in dataclasses.fields(extra)} if extra is not None else set()
    assert not extra_names & {f.name for f in dataclasses.fields(cls)}, "the two configs share a field"

    class OneLine(SuppressingArgumentParser):
        def error(self, message: str) -> typing.NoReturn:
            self.exit(2, f"error: {self.prog}: {message.splitlines()[0]} (see --help)\n")

    class Fields(DataclassWrapper):
        def register_actions(self, parser: argparse.ArgumentParser) -> None:
            _register(self, parser)

    class Parser(ArgumentParser):
        def _set_dataclass(self, dataclass: Any, default: Any = None, dataclass_wrapper_class: Any = None) -> None:
            if extra is not None and dataclass is cls:
                super()._set_dataclass(extra, None, Fields)
            super()._set_dataclass(dataclass, default, Fields)

        def _postprocessing(self, parsed_args: argparse.Namespace) -> tuple[T, E | None]:
            """draccus's layering and decoding, with declared values taken as given."""
            values = {
                k: v.value if isinstance(v, Given) else cfgparsing.parse_string(v) for k, v in vars(parsed_args).items()
            }
            chosen = {k: values.pop(k) for k in list(values) if k in extra_names}
            second = self._decoded(extra, chosen) if extra is not None else None
            first = default(second) if callable(default) else default
            layers = draccus.encode(first) if first is not None else {}
            if (path := values.pop(utils.CONFIG_ARG, None)) is not None:
                layers = _merged(layers, self._file(path))
            layers = _merged(layers, utils.deflatten(values, sep="."))
            missing = [
                f.name.upper() if f.metadata.get("positional") else flag_of(f)
                for f in dataclasses.fields(cls)
                if f.name not in layers and _default_of(f) is dataclasses.MISSING
            ]
            if missing:
                self.parser.error("the following arguments are required: " + ", ".join(missing))
            return self._decoded(cls, layers), second

        def _decoded(self, config: type, layers: dict[str, Any]) -> Any:
            try:
                return draccus.decode(config, layers)
            except utils.DraccusException as e:
                self.parser.error(str(e))

        def _file(self, path: str) -> dict[str, Any]:
            """The mapping in the YAML (JSON, TOML) file of `--config_path`, read as data only."""
            try:
                given = load_data(path)
            except (OSError, ValueError) as e:
                self.parser.error(f"--{utils.CONFIG_ARG} {path}: {type(e).__name__}: {e}")
            if not isinstance(given, dict):
                self.parser.error(
                    f"--{utils.CONFIG_ARG} {path}: a mapping of the config's fields, not {type(given).__name__}"
                )
            return given

    parser = Parser(cls, prog=prog, description=description)
    parser.parser.__class__ = OneLine  # draccus builds its argparse parser itself; its errors become one line
    return parser.parse_args(list(argv))


class Commands:
    """Subcommands, which draccus lacks: each is its words (`corpus record`), a help line, a config
    class and a function taking the config. `parse(argv)` picks the command its leading words name
    and parses the rest into its config; no or unknown words print the commands."""

    def __init__(self, prog: str, description: str, commands: Sequence[tuple[tuple[str, ...], str, type, Callable]]):
        self.prog, self.description, self.commands = prog, description, list(commands)

    def find(self, argv: Sequence[str]) -> tuple[tuple[str, ...], str, type, Callable] | None:
        """The command whose words `argv` starts with."""
        return next((c for c in self.commands if tuple(argv[: len(c[0])]) == c[0]), None)

    def help(self, words: Sequence[str] = ()) -> str:
        """The commands under `words` (all of them for none), one a line with its help."""
        rows = [(" ".join(w), h) for w, h, _, _ in self.commands if tuple(w[: len(words)]) == tuple(words)]
        listed = "".join(f"  {name.ljust(max(len(n) for n, _ in rows))}  {h}\n" for name, h in rows)
        return f"usage: {' '.join([self.prog, *words])} COMMAND [--FLAG VALUE ...]\n\n{self.description}\n\ncommands:\n{listed}"

    def parse(self, argv: Sequence[str]) -> tuple[Any, Callable]:
        """(the config, the function) that `argv` names; exits 0 after help and 2 on bad input."""
        argv = list(argv)
        if (command := self.find(argv)) is not None:
            words, help_, cls, fn = command
            return parse(cls, argv[len(words) :], f"{self.prog} {' '.join(words)}", description=help_), fn
        words = list(itertools.takewhile(lambda w: not w.startswith("-"), argv))
        under: tuple[str, ...] = ()
        for word in words:
            if not any(c[0][: len(under) + 1] == (*under, word) for c in self.commands):
                break
            under = (*under, word)
        if len(under) == len(words) and {"-h", "--help"} & set(argv):
            print(self.help(under), end="")
            raise SystemExit(0)
        choices = sorted({c[0][len(under)] for c in self.commands if c[0][: len(under)] == under})
        what = f"no command {' '.join(words[: len(under) + 1])!r}" if len(words) > len(under) else "a command is needed"
        head = " ".join([self.prog, *under])
        print(f"error: {head}: {what} (choose from {', '.join(choices)}; see --help)", file=sys.stderr)
        raise SystemExit(2)
