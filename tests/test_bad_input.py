"""Every bad input gets one line and loses nothing, for every command that reads or writes files.

Each case drives a command through the CLI (in process, `cli.main`; a few in a subprocess, to
prove no traceback reaches a real terminal) and asserts: exit status 2, exactly one message line
on stderr (progress bars aside) naming the file or flag, no traceback, every file under the test
folder byte-identical afterwards, and no output written. The cases: broken containers of every
format fed to every reader, output paths that are folders, files, unwritable, equal to an input
(directly, through a symlink, through `..`, as a companion file) or in an input glob's reach, flag
values out of bounds or not numbers, broken templates and tokenizers, broken results files, and
data that used to pass silently (a training file with no valid record)."""

import dataclasses
import json
import re
import shutil
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from terminalworld.cli import _commands, commands, main
from tests.core.test_records import broken_files, jsonl
from tests.paths import REPO_ROOT

TQDM = re.compile(r"\[\d\d:\d\d")  # a progress bar's elapsed-time field


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def message_lines(err: str) -> list[str]:
    """stderr without progress bars (tqdm redraws with carriage returns)."""
    return [part for line in err.splitlines() for part in line.split("\r") if part.strip() and not TQDM.search(part)]


def refused(capsys, root: Path, argv, names, absent=()) -> str:
    """Run `argv` in process and assert the contract; returns the error line."""
    before = snapshot(root)
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    lines = message_lines(err)
    assert code == 2, (argv, code, err[-2000:])
    assert "Traceback" not in err
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    for name in [names] if isinstance(names, str) else names:
        assert str(name) in lines[0], (name, lines[0])
    assert snapshot(root) == before, "an input changed or an output was written"
    for path in absent:
        assert not Path(path).exists(), path
    return lines[0]


@pytest.fixture(scope="module")
def rows(fixtures):
    """SWE-ZERO rows of the real sample, one repo each (15 complete turns)."""
    base = json.loads((fixtures / "adp_swe-zero-12m" / "sample_raw.json").read_text())
    return [{**base[i % 3], "instance_id": f"org{i}__repo-{i}", "repo": f"org{i}/repo"} for i in range(12)]


@pytest.fixture
def data(rows, tmp_path):
    """A test folder: a corpus, a training file, held-out rows, scores, a chat template, broken files."""
    import gzip

    from terminalworld.core.formats import load_trajectories
    from terminalworld.core.heldout import heldout_row

    root = tmp_path / "data"
    (root / "corpus").mkdir(parents=True)
    (root / "corpus" / "c.jsonl.gz").write_bytes(gzip.compress(jsonl(rows), mtime=0))
    (root / "train.jsonl").write_bytes(jsonl(rows[:4]))
    trajs = load_trajectories(str(root / "train.jsonl"))
    (root / "heldout.jsonl").write_text("".join(json.dumps(heldout_row(t, 3)) + "\n" for t in trajs))
    score = {"instance_id": "a", "repo": "r", "n_target_tokens": 5, "sum_nll": 5.0, "mean_nll": 1.0, "ppl": 2.7}
    summary = {"_summary": True, "model_name": "base"}
    (root / "scores.jsonl").write_text(json.dumps(score) + "\n" + json.dumps(summary) + "\n")
    (root / "template.jinja").write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    (root / "broken").mkdir()
    files = {name: path for name, (path, _) in broken_files(rows[:6], root / "broken").items()}
    return root, files


READERS = {
    "subsets": lambda d, f, o: ["corpus", "subsets", "--corpus", f, "--sizes", "2", "--out", o],
    "heldout --corpus": lambda d, f, o: [
        *("heldout", "--corpus", f, "--train", d / "train.jsonl", "--n", "1", "--context-turns", "3"),
        *("--out", o / "h.jsonl"),
    ],
    "heldout --train": lambda d, f, o: [
        *("heldout", "--corpus", d / "corpus" / "c.jsonl.gz", "--train", f, "--n", "1", "--context-turns", "3"),
        *("--out", o / "h.jsonl"),
    ],
    "render": lambda d, f, o: ["render", "--tokenizer", "qwen3", "--arm", "full", "--in", f, "--out", o / "r.jsonl"],
    "show-mask": lambda d, f, o: ["show-mask", "--tokenizer", "qwen3", "--in", f],
    "score --heldout": lambda d, f, o: ["score", "--model-path", d, "--heldout", f, "--out", o / "s.jsonl"],
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_broken_containers_are_one_line_for_every_reader(reader, data, capsys):
    root, files = data
    out = root.parent / "out"
    for path in files.values():
        refused(capsys, root, READERS[reader](root, path, out), [path], absent=[out])


def test_a_training_file_with_no_valid_record_is_an_error(data, capsys):
    root, _ = data
    (root / "junk.jsonl").write_text('{"not": "a trajectory"}\n{broken\n')
    out = root.parent / "h.jsonl"
    for flag, argv in [
        ("--train", ["heldout", "--corpus", root / "corpus" / "c.jsonl.gz", "--train", root / "junk.jsonl"]),
        ("--exclude-repos-from", ["tasks", "make", "--exclude-repos-from", root / "junk.jsonl", "--n", "1"]),
    ]:
        line = refused(capsys, root, [*argv, "--out", out], [flag, "junk.jsonl", "no valid trajectory"], [out])
        assert "2 records" in line
    # render counts malformed records and goes on, but an input with nothing to render is no result.
    render = ["render", "--tokenizer", "qwen3", "--arm", "full", "--in", root / "junk.jsonl", "--out", out]
    refused(capsys, root, render, ["junk.jsonl:1", "no trajectory rendered, 2 failed"], [out])


def test_deeply_nested_lines_are_counted_not_fatal(rows, data, capsys):
    root, _ = data
    deep = root / "deep.jsonl"
    deep.write_bytes(jsonl(rows[:3]) + b"[" * 100_000 + b"]" * 100_000 + b"\n")
    assert main(["corpus", "subsets", "--corpus", str(deep), "--sizes", "2", "--out", str(root.parent / "s")]) == 0
    manifest = json.loads((root.parent / "s" / "manifest.json").read_text())
    assert manifest["malformed"] == 1
    assert manifest["bad_lines"] == [
        {"file": str(deep), "line": 4, "reason": "invalid JSON: nested too deeply to parse"}
    ]


def _output_cases(root: Path) -> list[tuple[str, list, list[str]]]:
    corpus, train, heldout = root / "corpus" / "c.jsonl.gz", root / "train.jsonl", root / "heldout.jsonl"
    (root / "link").symlink_to(root / "corpus")
    (root / "link-h.jsonl").symlink_to(root / "heldout.jsonl")
    (root / "a-file").write_text("x")
    manifest = root / "h.jsonl.manifest.json"
    shutil.copy(train, manifest)
    tasks = root / "tasks"
    tasks.mkdir()
    template = root / "template.jinja"
    template.write_text("{% for m in messages %}{{ m['content'] }}<|end|>{% endfor %}")
    h = ["heldout", "--corpus", corpus, "--train", train, "--n", "1", "--context-turns", "3"]
    r = ["render", "--tokenizer", "qwen3", "--arm", "full", "--in", train]
    s = ["score", "--model-path", root, "--heldout", heldout]
    c = ["compare", root / "scores.jsonl", "--base", "base"]
    return [
        ("heldout --out = --corpus", [*h, "--out", corpus], ["--out", "--corpus"]),
        ("heldout --out = --train", [*h, "--out", train], ["--out", "--train"]),
        ("heldout --out = --corpus via symlink", [*h, "--out", root / "link" / "c.jsonl.gz"], ["--corpus"]),
        (
            "heldout --out = --corpus via ..",
            [*h, "--out", root / "tasks" / ".." / "corpus" / "c.jsonl.gz"],
            ["--corpus"],
        ),
        ("heldout manifest = --train", [*h[:4], manifest, *h[5:], "--out", root / "h.jsonl"], ["--train"]),
        (
            "heldout --out in the corpus glob",
            [*h[:2], root / "corpus" / "*.jsonl.gz", *h[3:], "--out", root / "corpus" / "h.jsonl.gz"],
            ["glob"],
        ),
        ("heldout --out is a folder", [*h, "--out", tasks], ["--out", "folder"]),
        ("heldout --out under a file", [*h, "--out", root / "a-file" / "h.jsonl"], ["a-file", "not a folder"]),
        ("render --out = --in", [*r, "--out", train], ["--out", "--in"]),
        ("render --out in the --in glob", [*r[:-1], root / "*.jsonl", "--out", root / "rows.jsonl"], ["glob"]),
        ("render --out is a folder", [*r, "--out", tasks], ["folder"]),
        ("render --out = --chat-template", [*r, "--chat-template", template, "--out", template], ["--chat-template"]),
        ("score --out = --heldout", [*s, "--out", heldout], ["--out", "--heldout"]),
        ("score --out = --heldout via symlink", [*s, "--out", root / "link-h.jsonl"], ["--heldout"]),
        ("score --out is a folder", [*s, "--out", tasks], ["folder"]),
        ("score --out is another run's", [*s, "--out", root / "scores.jsonl"], ["not among the inputs"]),
        ("score --out is not a scores file", [*s, "--out", root / "a-file"], ["a-file:1", "not a row"]),
        (
            "subsets --out holds the corpus",
            ["corpus", "subsets", "--corpus", corpus, "--out", root / "corpus"],
            ["holds the input"],
        ),
        (
            "subsets --out in the glob",
            ["corpus", "subsets", "--corpus", root / "*" / "*.gz", "--out", root / "new"],
            ["glob"],
        ),
        ("subsets --out is a file", ["corpus", "subsets", "--corpus", corpus, "--out", root / "a-file"], ["is a file"]),
        ("compare --out is a file", [*c, "--out", root / "a-file"], ["is a file"]),
        ("compare --out holds a result", [*c, "--out", root], ["holds the input"]),
        ("tasks make --out is a file", ["tasks", "make", "--out", root / "a-file"], ["is a file"]),
        (
            "tasks make --out holds --exclude-repos-from",
            ["tasks", "make", "--exclude-repos-from", train, "--out", root],
            ["--exclude-repos-from"],
        ),
        ("probes make --out is a folder", ["probes", "make", "--out", tasks], ["folder"]),
        ("record --out is a file", ["corpus", "record", "--out", root / "a-file"], ["is a file"]),
        ("record --out inside --tasks", ["corpus", "record", "--tasks", tasks, "--out", tasks / "corpus"], ["--tasks"]),
        (
            "sim-eval --out = --heldout",
            ["sim-eval", "--model", root, "--heldout", heldout, "--out", heldout],
            ["--heldout"],
        ),
        ("agent-eval --out = --tasks", ["agent-eval", "--tasks", tasks, "--agent", "nop", "--out", tasks], ["--tasks"]),
    ]


def test_outputs_that_would_destroy_or_reread_an_input_are_refused(data, capsys):
    root, _ = data
    for case, argv, names in _output_cases(root):
        try:
            refused(capsys, root, argv, names)
        except AssertionError as e:
            raise AssertionError(case) from e


def _read_only_mount(folder: Path) -> list[str] | None:
    """A command prefix that runs a command with `folder` mounted read-only (a private mount
    namespace, so even root gets EROFS), or None where user namespaces are unavailable."""
    script = f'mount --bind "{folder}" "{folder}" && mount -o remount,bind,ro "{folder}" && exec "$@"'
    prefix = ["unshare", "--map-root-user", "--mount", "sh", "-c", script, "sh"]
    probe = subprocess.run([*prefix, "true"], capture_output=True)
    return prefix if probe.returncode == 0 else None


DRIVER = """
import contextlib, io, json, sys
from terminalworld.cli import main
results = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code
    results.append([code, err.getvalue()])
print(json.dumps(results))
"""


def test_a_read_only_folder_is_refused_in_one_line_by_every_command_that_writes(data):
    """The output folder on a read-only mount, in a private mount namespace (root writes in any
    folder a mode forbids, not on a read-only mount), for every command that writes: one line
    naming the folder, exit 2, nothing written. One interpreter runs them all."""
    root, _ = data
    locked = root.parent / "locked"
    locked.mkdir()
    prefix = _read_only_mount(locked)
    if prefix is None:
        pytest.skip("user namespaces are unavailable, so no read-only mount can be made")
    corpus, heldout, tasks = root / "corpus" / "c.jsonl.gz", root / "heldout.jsonl", root / "corpus"
    commands = [
        ["corpus", "subsets", "--corpus", corpus, "--sizes", "2", "--out", locked / "s"],
        ["heldout", "--corpus", corpus, "--train", root / "train.jsonl", "--out", locked / "h.jsonl"],
        ["render", "--tokenizer", "qwen3", "--arm", "full", "--in", corpus, "--out", locked / "r.jsonl"],
        ["score", "--model-path", root, "--heldout", heldout, "--out", locked / "s.jsonl"],
        ["compare", root / "scores.jsonl", "--base", "base", "--out", locked],
        ["tasks", "make", "--out", locked / "t"],
        ["probes", "make", "--out", locked / "p.jsonl"],
        ["corpus", "record", "--out", locked / "c"],
        ["sim-eval", "--model", root, "--heldout", heldout, "--out", locked / "e.jsonl"],
        ["agent-eval", "--tasks", tasks, "--agent", "nop", "--out", locked / "a"],
    ]
    before = snapshot(root.parent)
    argv = json.dumps([[str(a) for a in c] for c in commands])
    done = subprocess.run([*prefix, sys.executable, "-c", DRIVER, argv], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    for command, (code, err) in zip(commands, json.loads(done.stdout.splitlines()[-1]), strict=True):
        lines = message_lines(err)
        assert code == 2 and "Traceback" not in err, (command, err[-2000:])
        assert len(lines) == 1 and f"cannot write in {locked} (Read-only file system)" in lines[0], (command, lines)
    assert snapshot(root.parent) == before


FLAG_CASES = [
    (["corpus", "subsets", "--corpus", "c", "--out", "o", "--sizes", "abc"], "--sizes"),
    (["corpus", "subsets", "--corpus", "c", "--out", "o", "--sizes", "1e3"], "--sizes"),
    (["corpus", "subsets", "--corpus", "c", "--out", "o", "--sizes", "3.5"], "--sizes"),
    (["corpus", "subsets", "--corpus", "c", "--out", "o", "--sizes", "10,0"], "--sizes"),
    (["render", "--tokenizer", "qwen3", "--arm", "full", "--in", "x", "--out", "o", "--max-len", "0"], "--max-len"),
    (["render", "--tokenizer", "qwen3", "--arm", "full", "--in", "x", "--out", "o", "--max-len", "-5"], "--max-len"),
    (["tasks", "make", "--out", "o", "--n", "0"], "--n"),
    (["tasks", "make", "--out", "o", "--n", "-1"], "--n"),
    (["tasks", "make", "--out", "o", "--per-repo", "0"], "--per-repo"),
    (["tasks", "make", "--out", "o", "--max-bugs", "0"], "--max-bugs"),
    (["tasks", "make", "--out", "o", "--workers", "-1"], "--workers"),
    (["probes", "make", "--out", "o", "--max-output-chars", "0"], "--max-output-chars"),
    (["probes", "make", "--out", "o", "--max-output-chars", "-1"], "--max-output-chars"),
    (["probes", "make", "--out", "o", "--timeout-s", "nan"], "--timeout-s"),
    (["corpus", "record", "--out", "o", "--workers", "-1"], "--workers"),
    (["corpus", "record", "--out", "o", "--timeout", "0"], "--timeout"),
    (["heldout", "--corpus", "c", "--train", "t", "--out", "o", "--n", "1.5"], "--n"),
]


@pytest.mark.parametrize(("argv", "flag"), FLAG_CASES, ids=[" ".join(a[-2:]) for a, _ in FLAG_CASES])
def test_bad_flag_values_are_one_line(argv, flag, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    refused(capsys, tmp_path, argv, [f"argument {flag}:"], absent=[tmp_path / "o"])


def test_bad_templates_and_tokenizers_are_one_line(data, capsys):
    root, _ = data
    (root / "binary.jinja").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    (root / "broken.jinja").write_text("{% for m in messages %}{{ m.content }")
    (root / "garbage-tok").mkdir()
    (root / "garbage-tok" / "tokenizer.json").write_text("{not a tokenizer")
    (root / "garbage-tok" / "tokenizer_config.json").write_text('{"tokenizer_class": "PreTrainedTokenizerFast"}')
    (root / "garbage.gguf").write_bytes(b"GGUF" + bytes(64))
    render = ["render", "--arm", "full", "--in", root / "train.jsonl", "--out", root.parent / "r.jsonl"]
    cases = [
        ([*render, "--tokenizer", "qwen3", "--chat-template", root / "missing.jinja"], ["--chat-template", "no such"]),
        ([*render, "--tokenizer", "qwen3", "--chat-template", root / "binary.jinja"], ["--chat-template", "UTF-8"]),
        ([*render, "--tokenizer", "qwen3", "--chat-template", root / "broken.jinja"], ["--chat-template", "Jinja"]),
        ([*render, "--tokenizer", "qwen3", "--chat-template", root], ["--chat-template", "not a file"]),
        ([*render, "--tokenizer", root / "garbage-tok"], ["--tokenizer", "garbage-tok"]),
        ([*render, "--tokenizer", root / "garbage.gguf"], ["--tokenizer", "garbage.gguf"]),
        ([*render, "--tokenizer", root / "nothing-here"], ["--tokenizer", "not found"]),
        (["show-mask", "--in", root / "train.jsonl", "--tokenizer", root / "garbage-tok"], ["--tokenizer"]),
        (
            [
                "score",
                "--model-path",
                root / "garbage-tok",
                "--heldout",
                root / "heldout.jsonl",
                "--out",
                root.parent / "s",
            ],
            ["garbage-tok"],
        ),
    ]
    for argv, names in cases:
        refused(capsys, root, argv, names, absent=[root.parent / "r.jsonl", root.parent / "s"])


def test_broken_results_files_are_one_line_and_never_written_as_non_json(data, capsys):
    root, _ = data
    good = json.loads((root / "scores.jsonl").read_text().splitlines()[0])
    summary = '{"_summary": true, "model_name": "arm"}\n'
    for name, ppl in [("nan", "NaN"), ("inf", "Infinity"), ("string", '"12.5"'), ("null", "null")]:
        row = json.dumps({**good, "ppl": 0}).replace('"ppl": 0', f'"ppl": {ppl}')
        (root / f"{name}.jsonl").write_text(row + "\n" + summary)
    (root / "binary.jsonl").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00")
    (root / "unfinished.jsonl").write_text(json.dumps(good) + "\n")
    out = root.parent / "report"
    compare = ["compare", root / "scores.jsonl", "--base", "base", "--out", out]
    cases = [
        (root / "missing.jsonl", ["missing.jsonl", "no such file"]),
        (root / "broken", ["broken", "not a file"]),
        (root / "none-*.jsonl", ["none-*.jsonl"]),
        (root / "binary.jsonl", ["binary.jsonl:1", "undecodable"]),
        (root / "nan.jsonl", ["nan.jsonl:1", "NaN"]),
        (root / "inf.jsonl", ["inf.jsonl:1", "Infinity"]),
        (root / "string.jsonl", ["string.jsonl: row a", "ppl is '12.5'"]),
        (root / "null.jsonl", ["null.jsonl: row a", "ppl is None"]),
        (root / "unfinished.jsonl", ["unfinished.jsonl", "no summary row"]),
    ]
    for path, names in cases:
        refused(capsys, root, [*compare[:2], path, *compare[2:]], names, absent=[out])
    refused(capsys, root, [*compare, "--agent", f"x={root / 'binary.jsonl'}"], ["binary.jsonl", "undecodable"], [out])
    refused(capsys, root, [*compare, "--agent", "x=" + str(root / "nope.json")], ["--agent", "nope.json"], [out])
    refused(capsys, root, [*compare, "--agent", str(root / "nope.json")], ["--agent", "NAME=PATH"], [out])
    grade = {"pass_at_1": 0.5, "pass_at_1_stderr": 0.1, "solved_trials": 1, "scored_trials": 2}
    (root / "nan-grade.json").write_text(json.dumps(grade).replace("0.5", "NaN"))
    (root / "no-grade.json").write_text(json.dumps({k: v for k, v in grade.items() if k != "pass_at_1"}))
    for name, problem in (("nan-grade.json", "pass_at_1 is nan"), ("no-grade.json", "pass_at_1 is 'missing'")):
        refused(capsys, root, [*compare, "--agent", f"base={root / name}"], [name, problem], [out])
    sim = {"_summary": True, "tier": 1, "by_family": {}, "similarity": 0.5}
    (root / "no-tier.jsonl").write_text(json.dumps({k: v for k, v in sim.items() if k != "tier"}) + "\n")
    (root / "nan-sim.jsonl").write_text(json.dumps(sim).replace("0.5", "NaN") + "\n")
    for name, problem in (
        ("no-tier.jsonl", "tier is None"),
        ("nan-sim.jsonl", "similarity is not a finite number"),
        ("binary.jsonl", "not a readable sim-eval output"),
    ):
        refused(capsys, root, [*compare, "--sim", f"base={root / name}"], [name, problem], [out])


def _numeric_flags(cls: type) -> list[tuple[str, type]]:
    """The command-line flags of `cls` that take an int or a float (optional or not), with the type."""
    hints = typing.get_type_hints(cls)
    bare = {name: next((a for a in typing.get_args(tp) if a is not type(None)), tp) for name, tp in hints.items()}
    return [
        ((f.metadata.get("flags") or ("--" + f.name.replace("_", "-"),))[0], bare[f.name])
        for f in dataclasses.fields(cls)
        if f.metadata.get("cli", True) and bare[f.name] in (int, float)
    ]


def _required_filled(cls: type) -> list[str]:
    """The required flags of `cls`, each given a value it accepts (a choice's first), words last."""
    hints, flags, words = typing.get_type_hints(cls), [], []
    for f in dataclasses.fields(cls):
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            tp = hints[f.name]
            value = str(typing.get_args(tp)[0]) if typing.get_origin(tp) is typing.Literal else "x"
            if f.metadata.get("positional"):
                words = ["--", value]
            else:
                flags += [(f.metadata.get("flags") or ("--" + f.name.replace("_", "-"),))[0], value]
    return flags + words


def test_every_numeric_flag_of_every_command_states_and_enforces_its_bounds(capsys):
    """Each command's config bounds every numeric flag (its `__post_init__`): -1, a non-number and
    a number out of the type (1e3 for an int, inf for a float) are refused in one line naming the
    flag, with the other required flags given; 0 is refused so, or accepted, as the bound says."""
    parser = commands()
    checked = 0
    for words, (_, cls, _) in _commands().items():
        for flag, tp in _numeric_flags(cls):
            for value in ("0", "-1", "x", "1e3" if tp is int else "inf"):
                try:
                    parser.parse([*words.split(), flag, value, *_required_filled(cls)])
                except SystemExit as e:
                    lines = message_lines(capsys.readouterr().err)
                    assert e.code == 2 and len(lines) == 1, lines
                    assert f"argument {flag}:" in lines[0], (words, flag, value, lines[0])
                else:
                    assert value == "0", (words, flag, value, "accepted: no bound refuses it")
                checked += 1
    assert checked >= 4 * 40  # every command's numbers, walked
    page = " ".join((REPO_ROOT / "docs" / "manual" / "bad-input.md").read_text().split())
    assert f"feeds each of its {checked // 4} numeric flags" in page and f"({checked} probes" in page


def test_a_real_process_prints_one_line_and_no_traceback(data):
    """Three of the cases above through a real interpreter, as a user runs them."""
    root, files = data
    cases = [
        ["render", "--tokenizer", "qwen3", "--arm", "full", "--in", files["truncated.jsonl.gz"], "--out", root / "r"],
        [
            "heldout",
            "--corpus",
            root / "corpus" / "c.jsonl.gz",
            "--train",
            root / "train.jsonl",
            "--out",
            root / "train.jsonl",
        ],
        ["corpus", "subsets", "--corpus", root / "corpus", "--out", root / "s", "--sizes", "abc"],
    ]
    before = snapshot(root)
    for argv in cases:
        done = subprocess.run(
            [sys.executable, "-m", "terminalworld.cli", *map(str, argv)], capture_output=True, text=True, timeout=120
        )
        lines = message_lines(done.stderr)
        assert done.returncode == 2 and "Traceback" not in done.stderr and len(lines) == 1, done.stderr[-2000:]
    assert snapshot(root) == before
