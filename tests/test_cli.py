"""The command line is derived from the config dataclasses, keeping the documented flag spellings."""

import contextlib
import io
import re
import shlex

import pytest

from terminalworld.cli import _commands, commands, main
from terminalworld.corpus.recorder import RecordConfig
from terminalworld.corpus.sampling import HeldoutConfig, SubsetsConfig
from terminalworld.eval.scoring import ScoreConfig
from terminalworld.train.render_rows import RenderConfig
from tests.paths import REPO_ROOT

RUNNING = REPO_ROOT / "docs" / "manual" / "running.md"  # the commands table


def parse(*argv):
    return commands().parse(list(argv))[0]


def test_flags_keep_their_spellings_and_defaults():
    render = parse(
        "render",
        "--tokenizer",
        "qwen3",
        "--in",
        "a.jsonl,b.jsonl",
        "--in",
        "c/*.json",
        "--out",
        "o.jsonl",
        "--arm",
        "user",
        "--max-len",
        "100",
    )
    assert render == RenderConfig(
        tokenizer="qwen3", inputs=["a.jsonl", "b.jsonl", "c/*.json"], out="o.jsonl", arm="user", max_len=100
    )
    assert parse("corpus", "record", "--out", "d", "--timeout", "2.5") == RecordConfig(out="d", timeout_s=2.5)
    assert parse("corpus", "subsets", "--corpus", "x,y", "--out", "d") == SubsetsConfig(corpus=["x", "y"], out="d")
    assert parse("heldout", "--corpus", "c", "--train", "t1", "--train", "t2", "--out", "h.jsonl", "--n", "7") == (
        HeldoutConfig(corpus=["c"], train=["t1", "t2"], out="h.jsonl", n=7)
    )
    # The write-up's scoring script spells the output --out-path; the command says --out.
    for flag in ("--out", "--out-path"):
        cfg = parse("score", "--model-path", "m", "--heldout", "h", flag, "s.jsonl", "--mode", "sim", "--all-depths")
        assert cfg == ScoreConfig(model_path="m", heldout="h", out="s.jsonl", mode="sim", all_depths=True)


def test_bad_values_are_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit):
        parse("render", "--tokenizer", "qwen3", "--in", "a", "--out", "o", "--arm", "everything")
    assert "invalid choice: 'everything'" in capsys.readouterr().err


def test_expected_failures_print_one_line_and_bugs_keep_their_traceback(tmp_path, capsys, monkeypatch):
    code = main(["heldout", "--corpus", str(tmp_path / "none-*.jsonl"), "--train", "x", "--out", str(tmp_path / "h")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: no file matches")

    import terminalworld.corpus.sampling as sampling

    def bug(cfg):
        raise ValueError("a bug")

    monkeypatch.setattr(sampling, "sample_heldout", bug)
    with pytest.raises(ValueError, match="a bug"):
        main(["heldout", "--corpus", "c", "--train", "t", "--out", "h"])


def help_entries(argv, parse) -> list[tuple[list[str], bool]]:
    """What `--help` lists: each entry's flags (or a positional's metavar) and whether it is required."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as e:
        parse([*argv, "--help"])
    assert e.value.code == 0
    entries: list[list[str]] = []
    for line in out.getvalue().split("\n\n", 1)[1].splitlines():  # past the usage lines
        if re.match(r"  (-|[A-Z])", line):
            entries.append([line])
        elif line.startswith("    ") and entries:
            entries[-1].append(line)
    listed = []
    for lines in entries:
        head = re.split(r"\s{2,}", lines[0].strip())[0]
        names = re.findall(r"(?<![\w-])--?[a-z][\w.-]*", head) or [head.split()[0]]
        listed.append((names, "(required)" in " ".join(" ".join(lines).split())))
    return listed


def command_lines(text: str, blocks_only: bool = False) -> list[str]:
    """The `terminalworld ...` command lines of a page: inline code (mentions) and code blocks."""
    spans = re.findall(r"`(?:uv run )?(terminalworld [a-z][^`]*)`", text)
    blocks = re.findall(r"^(?:uv run )?(terminalworld [a-z].*?)(?:\s+#.*)?$", text, flags=re.M)
    return blocks if blocks_only else spans + blocks


def which_command(line: str) -> tuple[str, ...] | None:
    words = line.split()[1:]
    return next((tuple(c.split()) for c in _commands() if words[: len(c.split())] == c.split()), None)


def flags_in(line: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])--[a-z][\w.-]*", line))


def test_help_and_the_commands_table_agree():
    """Per subcommand: the commands table of docs/manual/running.md has a row; every flag a row (or a docs page) shows is one
    that `--help` lists; every flag `--help` marks required is shown in the table, and a command
    that takes words shows them. The table may leave optional flags to `--help`."""
    table = [line.split("`")[1] for line in RUNNING.read_text().splitlines() if line.startswith("| `terminalworld ")]
    pages = [p.read_text() for p in sorted((REPO_ROOT / "docs").rglob("*.md"))]
    documented = [line for page in pages for line in command_lines(page)]
    assert table and len(documented) > 5
    for words in (tuple(c.split()) for c in _commands()):
        entries = help_entries(list(words), commands().parse)
        listed = {name for names, _ in entries for name in names}
        rows = [row for row in table if which_command(row) == words]
        assert rows, f"{' '.join(words)} has no row in the commands table"
        shown = set().union(*map(flags_in, rows))
        for line in rows + [line for line in documented if which_command(line) == words]:
            assert flags_in(line) <= listed, (line, flags_in(line) - listed)
        for names, required in entries:
            if required and names[0].startswith("--"):
                assert set(names) & shown, (words, names, "is required but not in the table's row")
            elif required:  # a positional: the row shows its words by the name `--help` gives them
                assert any(word.startswith(names[0]) for word in rows[0].split()), (rows[0], names)
    assert all(which_command(row) for row in table), [row for row in table if not which_command(row)]


def test_the_concrete_command_lines_of_the_docs_parse():
    """A command line in a code block with no placeholder (and no shell syntax) parses as it is."""
    pages = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
    concrete = [
        line
        for page in pages
        for line in command_lines(page.read_text(), blocks_only=True)
        if which_command(line) and flags_in(line) and not re.search(r"[A-Z]{2}|[$&|\\…<]|\.\.\.", line)
    ]
    assert len(concrete) >= 4
    for line in concrete:
        cfg, fn = commands().parse(shlex.split(line)[1:])
        assert callable(fn) and cfg is not None, line
