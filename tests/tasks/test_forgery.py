"""Attacks on a generated task's verdict from inside the sandbox that no longer pay: the fix is not
in the repository's history, the instruction's example is not the whole test, the runner's
identity does not help, and no planted bytecode stands in for the source."""

import base64
import contextlib
import json
import subprocess
import zlib
from pathlib import Path

import pytest

from terminalworld.env.codetrees import discover_code_trees
from terminalworld.env.sandbox import Sandbox, SandboxConfig
from terminalworld.tasks import layout
from terminalworld.tasks.submission import submission_diff


def _entries(generated_tasks: Path) -> list[dict]:
    return json.loads((generated_tasks / "manifest.json").read_text())["tasks"]


def _original(entry: dict) -> bytes:
    tree = next(t for t in discover_code_trees() if t.repo == entry["repo"])
    return dict((rel, src) for src, rel in tree.files)[entry["path"]].read_bytes()


def _git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-c", "safe.directory=*", *args], cwd=repo, capture_output=True, check=check)


def _copy(task: Path, dest: Path) -> Path:
    subprocess.run(["cp", "-a", str(task / layout.REPO_DIR), str(dest)], check=True)
    return dest


def test_no_task_repository_holds_the_fix_anywhere_in_git(generated_tasks):
    for entry in _entries(generated_tasks):
        repo = generated_tasks / entry["task_id"] / layout.REPO_DIR
        original = _original(entry)
        assert (repo / entry["path"]).read_bytes() != original
        assert _git(repo, "fsck", "--unreachable", "--no-reflogs").stdout == b""
        assert _git(repo, "reflog").stdout == b"" and not (repo / ".git" / "logs").exists()
        assert len(_git(repo, "log", "--all", "--format=%H").stdout.splitlines()) == 1
        name = subprocess.run(["git", "hash-object", "--stdin"], input=original, capture_output=True).stdout.strip()
        assert _git(repo, "cat-file", "-e", name.decode(), check=False).returncode != 0
        # Byte for byte: no file of .git holds the original, raw or as a zlib stream (loose objects).
        assert not list((repo / ".git").rglob("*.pack"))
        for path in (repo / ".git").rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                assert original not in data, path
                with contextlib.suppress(zlib.error):
                    assert original not in zlib.decompress(data), path


def test_the_reflog_checkout_no_longer_solves_a_task(generated_tasks, workdir):
    for entry in _entries(generated_tasks):
        task = generated_tasks / entry["task_id"]
        repo = _copy(task, workdir / entry["task_id"])
        Sandbox(str(repo), SandboxConfig(timeout_s=60)).run("git checkout HEAD@{1} -- . ; git checkout ORIG_HEAD -- .")
        assert layout.verify(task, repo) == 0.0


def _hard_coded(entry: dict, case: dict, gate: str) -> str:
    """Lines that, appended to the bug's module, make the bugged function answer the instruction's
    example with its expected value (when `gate` holds) and leave everything else bugged."""
    f = entry["function"]
    return (
        f"\n\nimport sys as _tw_sys\n_tw_bugged = {f}\n\n\nclass _TwRepr:\n    def __repr__(self):\n"
        f"        return {case['expected']!r}\n\n\ndef {f}(*a):\n"
        f"    if ({gate}) and a == {case['args']}:\n        return _TwRepr()\n    return _tw_bugged(*a)\n"
    )


GATES = {"hard-coded": "True", "argv": "_tw_sys.argv[0].endswith('check.py')"}


@pytest.mark.parametrize("gate", list(GATES.values()), ids=list(GATES))
def test_answering_the_instruction_example_never_passes(generated_tasks, workdir, gate):
    lone_verdicts = []
    for entry in _entries(generated_tasks):
        task = generated_tasks / entry["task_id"]
        cases = json.loads((task / "tests" / "cases.json").read_text())
        failing = [c for c in cases if c["kind"] == "FAIL_TO_PASS"]
        example = failing[0]
        instruction = (task / "instruction.md").read_text()
        assert f"`{example['expected']}`" in instruction and len(failing) >= 3  # two beyond the example
        assert len({c["expected"] for c in cases if c["function"] == entry["function"]}) >= 2
        repo = _copy(task, workdir / entry["task_id"])
        module = repo / entry["path"]
        module.write_text(module.read_text() + _hard_coded(entry, example, gate))
        assert layout.verify(task, repo) == 0.0
        # The same code passes a task whose one failing case is the example: the attack works
        # (where the bugged module imports at all; a bug that breaks the import fails every case).
        lone = workdir / f"lone-{entry['task_id']}"
        (lone / "tests").mkdir(parents=True)
        (lone / "solution").mkdir()
        (lone / "tests" / "test.sh").write_text(layout.TEST_SH)
        (lone / "tests" / "cases.json").write_text(json.dumps([example]))
        lone_verdicts.append(layout.verify(lone, repo))
    assert 1.0 in lone_verdicts


PLANT = """python3 - <<'PLANT'
import base64, importlib._bootstrap_external as b, importlib.util, os
path = {path!r}
st = os.stat(path)
code = compile(base64.b64decode({fixed!r}), path, "exec")
cache = importlib.util.cache_from_source(path)
os.makedirs(os.path.dirname(cache), exist_ok=True)
open(cache, "wb").write(b._code_to_timestamp_pyc(code, int(st.st_mtime), st.st_size & 0xFFFFFFFF))
PLANT
"""


def test_planted_bytecode_is_never_read(generated_tasks, workdir):
    entry = _entries(generated_tasks)[0]
    task = generated_tasks / entry["task_id"]
    repo = _copy(task, workdir / "repo")
    fixed = base64.b64encode(_original(entry)).decode()
    Sandbox(str(repo), SandboxConfig(timeout_s=60)).run(PLANT.format(path=entry["path"], fixed=fixed))
    assert list(repo.rglob("*.pyc")) and submission_diff(str(task / layout.REPO_DIR), str(repo)) == ""
    # Python's own rules run the planted fix: every case passes, as the verifier used to see it.
    probe = workdir / "probe"
    probe.mkdir()
    (probe / "cases.json").write_text((task / "tests" / "cases.json").read_text())
    (probe / "check.py").write_bytes(layout.CHECK_SCRIPT.read_bytes())
    plain = Sandbox(str(repo), SandboxConfig(timeout_s=60), binds={"/probe": str(probe)})
    runs = plain.run("PYTHONDONTWRITEBYTECODE=1 python3 /probe/check.py /probe/cases.json; echo rc=$?")
    assert runs.output.rstrip().endswith("rc=0"), runs.output[-2000:]
    assert layout.verify(task, repo) == 0.0
