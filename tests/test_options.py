"""The config layer on a small config: spellings (the field's own name still parses), positionals,
repeatable and comma-separated lists, switches, strict numbers, bounds in `__post_init__`, choices,
required fields, `--config_path` (data only) under the flags, nested fields, values never read
again as YAML, path checks in one call, and subcommands; every refusal is one line."""

from dataclasses import dataclass, field
from typing import Literal

import pytest

from terminalworld.cli import Commands
from terminalworld.core.paths import readable_file
from terminalworld.errors import InputError
from terminalworld.options import above, at_least, option, parse, parse_pair


@dataclass(frozen=True)
class Inner:
    depth: int = option(2, help="how deep")
    plain: str = "x"  # a plain field: a flag all the same

    def __post_init__(self) -> None:
        at_least(self, depth=1)


@dataclass(frozen=True)
class Config:
    out: str = option(flag=("--out", "--out-path", "-o"), help="where")
    inputs: list[str] = option(flag="--in", help="files; repeat or comma-separate")
    n: int = option(10)
    rate: float = option(0.5)
    mode: Literal["agent", "sim"] = option("agent")
    all_depths: bool = option(False)
    name: str = option("base")
    template: str | None = option(None)
    hidden: int = option(3, cli=False)
    inner: Inner = field(default_factory=Inner)

    def __post_init__(self) -> None:
        at_least(self, n=1)
        above(self, rate=0)

    def check_paths(self) -> None:
        if self.template is not None:
            readable_file("--template", self.template)


@dataclass(frozen=True)
class Words:
    command: list[str] = option(positional=True)
    timeout_s: float | None = option(None, flag="--timeout")

    def __post_init__(self) -> None:
        above(self, timeout_s=0)


def refused(capsys, cls, argv, *needles):
    with pytest.raises(SystemExit) as e:
        parse(cls, argv, "prog")
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and err.startswith("error: prog: "), err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


def test_spellings_and_the_field_name():
    base = ["--in", "a"]
    assert parse(Config, [*base, "--out", "o"]).out == "o"
    assert parse(Config, [*base, "--out-path", "o"]).out == "o"
    assert parse(Config, [*base, "-o", "o"]).out == "o"
    assert parse(Config, ["--out", "o", "--inputs", "a"]).inputs == ["a"]  # the field's own --field_name
    assert parse(Config, [*base, "-o", "o", "--all_depths"]).all_depths is True
    cfg = parse(Config, [*base, "-o", "o", "--all-depths", "--mode", "sim", "--n", "3", "--rate", "2"])
    assert (cfg.all_depths, cfg.mode, cfg.n, cfg.rate, cfg.hidden) == (True, "sim", 3, 2.0, 3)
    assert parse(Config, [*base, "-o", "o"]) == Config(out="o", inputs=["a"])


def test_lists_repeat_and_split_on_commas():
    cfg = parse(Config, ["--in", "a,b", "--in", "c", "-o", "o"])
    assert cfg.inputs == ["a", "b", "c"]


def test_positional_words():
    cfg = parse(Words, ["--timeout", "2", "--", "ls", "-la"])
    assert cfg == Words(command=["ls", "-la"], timeout_s=2.0)


def test_declared_values_are_not_read_again_as_yaml():
    cfg = parse(Config, ["--in", "yes", "-o", "010", "--name", "a: b", "--n", "010"])
    assert (cfg.inputs, cfg.out, cfg.name, cfg.n) == (["yes"], "010", "a: b", 10)


def test_nested_fields_are_dotted_and_keep_their_bounds(capsys):
    cfg = parse(Config, ["--in", "a", "-o", "o", "--inner.depth", "5", "--inner.plain", "y"])
    assert cfg.inner == Inner(depth=5, plain="y")
    refused(capsys, Config, ["--in", "a", "-o", "o", "--inner.depth", "0"], "argument --inner.depth:", "at least 1")


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["--n", "0"], ["argument --n:", "must be at least 1, got 0"]),
        (["--n", "1e3"], ["argument --n:", "expected an integer"]),
        (["--n", "3.5"], ["argument --n:", "expected an integer"]),
        (["--rate", "0"], ["argument --rate:", "greater than 0"]),
        (["--rate", "nan"], ["argument --rate:", "finite"]),
        (["--mode", "both"], ["argument --mode:", "invalid choice: 'both'"]),
        (["--hidden", "4"], ["unrecognized arguments: --hidden"]),
        (["--bogus", "1"], ["unrecognized arguments: --bogus"]),
        (["--all-depths=no"], ["argument --all-depths:"]),
    ],
)
def test_bad_values_are_one_line_naming_the_flag(argv, needles, capsys):
    refused(capsys, Config, ["--in", "a", "-o", "o", *argv], *needles)


def test_bounds_hold_for_built_configs_and_paths_are_one_call():
    with pytest.raises(ValueError, match=r"^--n must be at least 1, got 0$"):
        Config(out="o", inputs=["a"], n=0)
    with pytest.raises(InputError, match=r"--template /nonexistent/t\.jinja: no such file"):
        parse(Config, ["--in", "a", "-o", "o", "--template", "/nonexistent/t.jinja"]).check_paths()


def test_required_fields_and_positionals(capsys):
    refused(capsys, Config, ["--in", "a"], "required: --out")
    refused(capsys, Config, [], "required: --out, --in")
    refused(capsys, Words, ["--timeout", "1"], "required")


def test_config_path_is_a_layer_under_the_flags(tmp_path, capsys):
    yaml = tmp_path / "c.yaml"
    yaml.write_text("out: from-file\ninputs: [a, b]\nn: 4\ninner:\n  depth: 7\n")
    cfg = parse(Config, ["--config_path", str(yaml), "--n", "5"])
    assert (cfg.out, cfg.inputs, cfg.n, cfg.inner.depth) == ("from-file", ["a", "b"], 5, 7)
    (tmp_path / "list.yaml").write_text("- a\n")
    refused(capsys, Config, ["--config_path", str(tmp_path / "list.yaml")], "a mapping of the config's fields")
    refused(capsys, Config, ["--config_path", str(tmp_path / "none.yaml")], "--config_path", "none.yaml")
    (tmp_path / "bad.yaml").write_text("n: many\nout: o\ninputs: [a]\n")
    refused(capsys, Config, ["--config_path", str(tmp_path / "bad.yaml")], "many")
    (tmp_path / "low.yaml").write_text("n: 0\nout: o\ninputs: [a]\ninner: {depth: 0}\n")
    refused(capsys, Config, ["--config_path", str(tmp_path / "low.yaml")], "argument --inner.depth:", "at least 1")


def test_a_default_instance_is_the_first_layer():
    preset = Config(out="p", inputs=["q"], n=7)
    assert parse(Config, ["--n", "8"], default=preset) == Config(out="p", inputs=["q"], n=8)


def test_a_second_config_shares_the_command_line(capsys):
    cfg, words = parse_pair(Words, Config, ["--in", "a", "-o", "o", "--timeout", "1", "--", "ls"])
    assert (cfg, words) == (Words(command=["ls"], timeout_s=1.0), Config(out="o", inputs=["a"]))
    with pytest.raises(SystemExit):
        parse_pair(Words, Config, ["--help"], "prog")
    out = capsys.readouterr().out
    assert out.index("--in") < out.index("--timeout")  # the second config's flags come first


def test_help_lists_declared_flags_with_types_defaults_and_required(capsys):
    with pytest.raises(SystemExit) as e:
        parse(Config, ["--help"], "prog")
    out = " ".join(capsys.readouterr().out.split())
    assert e.value.code == 0
    assert "--out str, --out-path str, -o str where (required)" in out
    assert "--n int (default: 10)" in out and "--mode {agent,sim}" in out and "--inner.depth int how deep" in out
    assert "--hidden" not in out and "--all_depths" not in out  # off the command line; the field's name unlisted


def test_subcommands(capsys):
    table = Commands("tool", "A tool.", {"a b": ("does b", Words, print), "c": ("does c", Config, print)})
    cfg, fn = table.parse(["a", "b", "--", "ls"])
    assert (cfg, fn) == (Words(command=["ls"]), print)
    for argv, code, stream, needle in [
        (["--help"], 0, "out", "a b  does b"),
        (["a", "--help"], 0, "out", "usage: tool a COMMAND"),
        ([], 2, "err", "error: tool: a command is needed (choose from a, c; see --help)"),
        (["a"], 2, "err", "error: tool a: a command is needed (choose from b; see --help)"),
        (["a", "x"], 2, "err", "error: tool a: no command 'a x' (choose from b; see --help)"),
        (["c", "--n", "0", "--in", "a", "-o", "o"], 2, "err", "error: tool c: argument --n: must be at least 1"),
    ]:
        with pytest.raises(SystemExit) as e:
            table.parse(argv)
        captured = capsys.readouterr()
        text = captured.out if stream == "out" else captured.err
        assert e.value.code == code and needle in text, (argv, text)
        if stream == "err":
            assert text.count("\n") == 1


def test_config_path_is_data_only(tmp_path, capsys):
    """A `--config_path` file is read as data: no Python object is built from a tag, and no other
    file is read in through `!include`, so an error never shows what such a file holds."""
    secret = tmp_path / "secret.txt"
    secret.write_text("root:$6$hash-that-must-stay-private:19000:0:99999:7:::\n")
    for name, body in [
        ("object.yaml", "out: !!python/name:os.system\ninputs: [a]\n"),
        ("apply.yaml", "out: !!python/object/apply:os.getcwd []\ninputs: [a]\n"),
        ("include.yaml", f"out: o\ninputs: [a]\nn: !include {secret}\n"),
        ("include-str.yaml", f"out: !include {secret}\ninputs: [a]\n"),
    ]:
        (tmp_path / name).write_text(body)
        err = refused(capsys, Config, ["--config_path", str(tmp_path / name)], "--config_path", name)
        assert "hash-that-must-stay-private" not in err, err
