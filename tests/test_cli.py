"""The command line is derived from the config dataclasses, keeping the documented flag spellings."""

import pytest

from terminalworld.cli import commands, main
from terminalworld.corpus.recorder import RecordConfig
from terminalworld.corpus.sampling import HeldoutConfig, SubsetsConfig
from terminalworld.eval.scoring import ScoreConfig
from terminalworld.train.render_rows import RenderConfig


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
