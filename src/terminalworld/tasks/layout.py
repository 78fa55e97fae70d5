"""A generated task on disk, in Harbor's task format, and its verifier run in the sandbox.

    <task>/task.toml             metadata (repo, function, bug kind) and time limits
    <task>/instruction.md        the issue: what the function returns and what it should
    <task>/environment/repo/     the bugged repository, one commit, nothing in `git diff`
    <task>/environment/Dockerfile  the same environment for Harbor's Docker backends
    <task>/tests/test.sh         runs the cases, writes /logs/verifier/reward.txt
    <task>/tests/check.py        `casecheck.py`; tests/cases.json: FAIL_TO_PASS and PASS_TO_PASS
    <task>/solution/solve.sh     applies the reverse patch

The verifier is the one Harbor runs (`bash /tests/test.sh` with the repository at /testbed), but
it runs the code under test, which can write anything it writes, so where the project runs it
(`verify`, and the Harbor sandbox environment) the verdict is the host's: the sandbox sees the cases
without their expected values (`blind_cases`) and the host compares (`verdict`); any other task's
reward is read as hostile (`read_reward`). Why and what each attack meets: docs/manual/sandbox.md,
"Rewards cannot be forged from inside".

A command task (`tasks.commands`) has the same folders: its tests hold the reference answer
(`tests/expected.json`) and `answercheck.py` as `tests/check.py`, its solution the reference
commands. The sandbox sees the reference blinded (`blind_command_tests`); the host reads the
trial's repository and grades it (`command_verdict`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from terminalworld.core import scratch
from terminalworld.env import copies, walk
from terminalworld.env.sandbox import Sandbox, SandboxConfig
from terminalworld.errors import InputError, VerifierError
from terminalworld.tasks import answercheck

REPO_DIR = "environment/repo"
REWARD_BYTES = 64
CASES_BYTES = 8 << 20  # more case output than this is flooding: a failed check
VERIFIER_FILES = 256  # what the host keeps of a folder it downloads: at most this many entries ...
VERIFIER_BYTES = 16 << 20  # ... and bytes; the rest is dropped, named in DROPPED_NOTE
DROPPED_NOTE = "dropped.txt"
_REWARD = re.compile(rb"[ \t]*(\d+(?:\.\d+)?)[ \t]*\n?")
CHECK_SCRIPT = Path(__file__).with_name("casecheck.py")
ANSWER_SCRIPT = Path(__file__).with_name("answercheck.py")
EXPECTED = "expected.json"  # a command task's reference, in tests/: the host's alone
BLIND_EXPECTED = '{"kind": "blind"}\n'  # what the sandbox sees in its place: the host grades

TEST_SH = """#!/bin/bash
# Runs FAIL_TO_PASS and PASS_TO_PASS cases; reward 1 only when every case passes.
cd /testbed
mkdir -p /logs/verifier
# Bytecode is never read from the repository (a planted .pyc stamped like its source would run in
# its place): a fresh, empty cache outside it, and nothing written.
cache=$(mktemp -d)
PYTHONDONTWRITEBYTECODE=1 PYTHONPYCACHEPREFIX="$cache" python3 -B /tests/check.py /tests/cases.json \
  > /logs/verifier/cases.jsonl 2>&1
status=$?
rm -rf "$cache"
cat /logs/verifier/cases.jsonl
if [ "$status" -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""

COMMAND_TEST_SH = """#!/bin/bash
# Checks the answer against tests/expected.json; reward 1 when it is right.
cd /testbed
mkdir -p /logs/verifier
if python3 -B /tests/check.py /tests/expected.json > /logs/verifier/check.log 2>&1; then echo 1; else echo 0; fi \
  > /logs/verifier/reward.txt
"""

COMMAND_SOLVE_SH = """#!/bin/bash
# The reference commands.
cd /testbed
{commands}
"""

SOLVE_SH = """#!/bin/bash
# The reference fix: the reverse of the injected bug.
cd /testbed
git apply - <<'TERMINALWORLD_PATCH'
{patch}TERMINALWORLD_PATCH
"""

PATCH_BLOCK = re.compile(r"<<'TERMINALWORLD_PATCH'\n(.*)TERMINALWORLD_PATCH", re.S)


def solution_patch(task_dir: Path) -> str:
    """The reference fix of a generated task: the patch inside its `solution/solve.sh`."""
    return PATCH_BLOCK.search((task_dir / "solution" / "solve.sh").read_text()).group(1)


DOCKERFILE = """FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/*
COPY repo /testbed
WORKDIR /testbed
"""

TASK_TOML = """version = "1.0"

[metadata]
author_name = "terminalworld"
difficulty = "easy"
category = "debugging"
tags = ["generated", "{kind}"]
repo = "{repo}"
source_version = "{version}"
module = "{module}"
function = "{function}"
path = "{path}"
line = {line}
bug_kind = "{kind}"
seed = {seed}
level = "{level}"
wrong_output = {wrong_output_toml}

[verifier]
timeout_sec = 120.0

[agent]
timeout_sec = 900.0

[environment]
build_timeout_sec = 600.0
cpus = 1
memory_mb = 2048
storage_mb = 4096
"""


def write_task(
    task_dir: Path,
    *,
    repo_dir: Path,
    instruction: str,
    cases: list[dict[str, Any]],
    patch: str,
    metadata: dict[str, Any],
) -> None:
    """Write a task folder around the bugged repository `repo_dir` (moved into it)."""
    (task_dir / "tests").mkdir(parents=True)
    (task_dir / "solution").mkdir()
    shutil.move(str(repo_dir), task_dir / REPO_DIR)
    (task_dir / "environment" / "Dockerfile").write_text(DOCKERFILE)
    write_instruction(task_dir, instruction=instruction, metadata=metadata)
    (task_dir / "tests" / "test.sh").write_text(TEST_SH)
    shutil.copyfile(CHECK_SCRIPT, task_dir / "tests" / "check.py")
    (task_dir / "tests" / "cases.json").write_text(json.dumps(cases, indent=1) + "\n")
    (task_dir / "solution" / "solve.sh").write_text(SOLVE_SH.format(patch=patch))
    for script in ("tests/test.sh", "solution/solve.sh"):
        os.chmod(task_dir / script, 0o755)


COMMAND_TASK_TOML = """version = "1.0"

[metadata]
author_name = "terminalworld"
difficulty = "easy"
category = "terminal"
tags = ["generated", "command", "{family}"]
repo = "{repo}"
source_version = "{version}"
family = "{family}"
variant = "{variant}"
target = {target_toml}
answer_file = {answer_toml}
seed = {seed}
level = "command"

[verifier]
timeout_sec = 60.0

[agent]
timeout_sec = 600.0

[environment]
build_timeout_sec = 600.0
cpus = 1
memory_mb = 2048
storage_mb = 4096
"""


def write_command_task(
    task_dir: Path,
    *,
    repo_dir: Path,
    instruction: str,
    expected: dict[str, Any],
    commands: str,
    metadata: dict[str, Any],
) -> None:
    """Write a command task's folder around `repo_dir` (moved into it): the reference `expected`
    (`answercheck`), the reference `commands` as the solution."""
    (task_dir / "tests").mkdir(parents=True)
    (task_dir / "solution").mkdir()
    shutil.move(str(repo_dir), task_dir / REPO_DIR)
    (task_dir / "environment" / "Dockerfile").write_text(DOCKERFILE)
    (task_dir / "instruction.md").write_text(instruction)
    toml = {k: toml_string(str(metadata.get(k) or "")) for k in ("target", "answer_file")}
    (task_dir / "task.toml").write_text(
        COMMAND_TASK_TOML.format(**metadata, target_toml=toml["target"], answer_toml=toml["answer_file"])
    )
    (task_dir / "tests" / "test.sh").write_text(COMMAND_TEST_SH)
    shutil.copyfile(ANSWER_SCRIPT, task_dir / "tests" / "check.py")
    (task_dir / "tests" / EXPECTED).write_text(json.dumps(expected, indent=1) + "\n")
    (task_dir / "solution" / "solve.sh").write_text(COMMAND_SOLVE_SH.format(commands=commands))
    for script in ("tests/test.sh", "solution/solve.sh"):
        os.chmod(task_dir / script, 0o755)


def command_spec(task_dir: Path) -> dict[str, Any] | None:
    """A command task's reference (`tests/expected.json`, a file the host wrote), None for any other task."""
    path = task_dir / "tests" / EXPECTED
    return json.loads(path.read_text()) if path.is_file() else None


def command_verdict(spec: dict[str, Any], repo: str) -> tuple[float, bool]:
    """(reward, whether an answer was written) of the trial's repository copy `repo` (a host folder a
    sandbox wrote) against the reference `spec`: every file read without following a link, a regular
    file of at most `answercheck.MAX_BYTES`, or none."""
    right, written = answercheck.check(spec, lambda rel: walk.read_regular(repo, rel, max_bytes=answercheck.MAX_BYTES))
    return float(right), written


def blind_command_tests(root: str, relpath: str) -> None:
    """Make the verifier's tests folder `root/relpath` of a command task one the host grades: the
    reference replaced by `BLIND_EXPECTED`, and the host's own `test.sh` and check script."""
    with tempfile.TemporaryDirectory() as scratch_dir:
        for name, text in ((EXPECTED, BLIND_EXPECTED), ("test.sh", COMMAND_TEST_SH)):
            Path(scratch_dir, name).write_text(text)
            os.chmod(Path(scratch_dir, name), 0o755 if name == "test.sh" else 0o644)
            walk.copy_in(os.path.join(scratch_dir, name), root, f"{relpath}/{name}")
    walk.copy_in(str(ANSWER_SCRIPT), root, f"{relpath}/check.py")


def toml_string(text: str) -> str:
    """`text` as a TOML basic string: JSON's escapes, plus the control character JSON leaves raw."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def write_instruction(task_dir: Path, *, instruction: str, metadata: dict[str, Any]) -> None:
    """The task's `instruction.md` and `task.toml`: the two files a level of the ladder changes."""
    (task_dir / "instruction.md").write_text(instruction)
    toml = {**metadata, "wrong_output_toml": toml_string(str(metadata.get("wrong_output", "")))}
    (task_dir / "task.toml").write_text(TASK_TOML.format(**{"level": "function", **toml}))


@contextlib.contextmanager
def repo_copy(task_dir: Path, *, prefix: str = "tw-task-", dir: str | None = None) -> Iterator[Path]:
    """A private copy of the task's repository (`env.copies`: on its own capped tmpfs where the host
    allows), which the verifier's folders join, removed afterwards."""
    with copies.repo_copy(str(task_dir / REPO_DIR), prefix=prefix, dir=dir) as repo:
        yield Path(repo)


def verify(task_dir: Path, repo_dir: Path, *, solve: bool = False, config: SandboxConfig | None = None) -> float:
    """The reward of `repo_dir` (changed in place) under the task's tests, optionally after running
    the task's `solution/solve.sh` first: Harbor's verifier steps, each command in the sandbox. A
    generated task's reward is the host's `verdict`; the reference solution is bound only to run it."""
    cases_file = task_dir / "tests" / "cases.json"
    cases = json.loads(cases_file.read_text()) if cases_file.is_file() else None
    spec = command_spec(task_dir)
    harness = [task_dir / "tests", task_dir / "solution"]
    copies.make_room(os.path.dirname(repo_dir), sum(walk.tree_bytes(str(d)) for d in harness) + walk.ENTRY_BYTES * 4)
    tmp = scratch.make_dir("tw-verify-", os.path.dirname(repo_dir))
    try:
        os.chmod(tmp, 0o711)
        binds = {"/tests": f"{tmp}/tests", "/logs": f"{tmp}/logs"}
        shutil.copytree(task_dir / "tests", binds["/tests"])
        if cases is not None:
            blind_tests(cases, tmp, "tests")
        if spec is not None:
            blind_command_tests(tmp, "tests")
        if solve:
            binds["/solution"] = f"{tmp}/solution"
            shutil.copytree(task_dir / "solution", binds["/solution"])
        os.makedirs(f"{tmp}/logs/verifier")
        sandbox = Sandbox(str(repo_dir), config or SandboxConfig(timeout_s=60), binds=binds)
        if solve:
            sandbox.run("bash /solution/solve.sh")
        sandbox.run("bash /tests/test.sh")  # returns once every process of the sandbox is gone
        if spec is not None:
            return command_verdict(spec, str(repo_dir))[0]
        if cases is not None:
            return verdict(cases, walk.read_regular(f"{tmp}/logs", "verifier/cases.jsonl", max_bytes=CASES_BYTES))
        reward = read_reward(f"{tmp}/logs", "verifier")
    finally:
        scratch.remove_tree(tmp)
    return 0.0 if reward is None else reward


BLIND_KEYS = ("id", "module", "function", "args")


def blind_cases(cases: list[dict[str, Any]]) -> str:
    """The task's cases as the sandbox may see them: the calls alone, in the order of their ids,
    without the expected values and without their kinds (code that reads them could otherwise tell
    a failing case from a passing one, and answer each differently)."""
    blind = [{k: c[k] for k in BLIND_KEYS if k in c} for c in sorted(cases, key=lambda c: str(c.get("id")))]
    return json.dumps(blind, indent=1) + "\n"


def blind_tests(cases: list[dict[str, Any]], root: str, relpath: str) -> None:
    """Make the verifier's tests folder `root/relpath` (holding the task's tests) one the host grades:
    its cases without their expected values (`blind_cases`), the host's own case runner, which
    reports calls without them, and the host's own `test.sh` (a task made earlier carries older
    ones). Written through `walk.copy_in`, since the folder may sit in a tree a command wrote."""
    with tempfile.TemporaryDirectory() as scratch_dir:
        blind = os.path.join(scratch_dir, "cases.json")
        Path(blind).write_text(blind_cases(cases))
        walk.copy_in(blind, root, f"{relpath}/cases.json")
        script = os.path.join(scratch_dir, "test.sh")
        Path(script).write_text(TEST_SH)
        os.chmod(script, 0o755)
        walk.copy_in(script, root, f"{relpath}/test.sh")
    walk.copy_in(str(CHECK_SCRIPT), root, f"{relpath}/check.py")


def verdict(cases: list[dict[str, Any]], output: bytes | None) -> float:
    """1.0 when every case passed, else 0.0, from the case lines the sandbox printed (`output`, None
    when there was no regular file of at most `CASES_BYTES`): a case passes when at least one line
    names its id and every line that does shows `got` equal to its expected value. Lines that are
    not such JSON objects are ignored (they cannot make a case pass)."""
    seen: dict[str, list[Any]] = {}
    for line in (output or b"").splitlines():
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(row, dict) and isinstance(row.get("id"), str):
            seen.setdefault(row["id"], []).append(row.get("got"))
    passed = [c["id"] in seen and all(g == c["expected"] for g in seen[c["id"]]) for c in cases]
    return 1.0 if cases and all(passed) else 0.0


def read_reward(root: str, verifier_dir: str) -> float | None:
    """The reward in `root/verifier_dir/reward.txt` (`root` a host folder, the rest written in a
    sandbox), None when there is none. Raises `VerifierError` unless it is a regular file (reached
    without following a symlink, never a FIFO or device) of at most `REWARD_BYTES` holding one
    decimal number in [0, 1]."""
    relpath = f"{verifier_dir}/reward.txt"
    path = os.path.join(root, relpath)
    if walk.lstat(root, relpath) is None:
        return None
    data = walk.read_regular(root, relpath, max_bytes=REWARD_BYTES)
    if data is None:
        raise VerifierError(f"{path}: not a regular file of at most {REWARD_BYTES} bytes, so not a reward")
    if not (m := _REWARD.fullmatch(data)):
        raise VerifierError(f"{path}: {data!r} is not one decimal number, so not a reward")
    value = float(m.group(1))
    if not 0.0 <= value <= 1.0:
        raise VerifierError(f"{path}: reward {value:g} is outside [0, 1]")
    return value


def task_order(tasks: str) -> list[Path]:
    """The suite's task folders in its manifest's order."""
    manifest = json.loads(Path(tasks, "manifest.json").read_text())
    folders = [Path(tasks, t["task_id"]) for t in manifest["tasks"]]
    if not folders:
        raise InputError(f"{tasks}: the task suite has no tasks")
    return folders
