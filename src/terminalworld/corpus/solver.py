"""A solver policy for generated tasks: task-solving episodes in SWE-ZERO's shape, for the corpus.

For one task (`terminalworld tasks make`), the policy finds the function, reads it, runs the
issue's reproduction, fixes the bug with `sed -i` edits (the reverse of the injected bug, line for
line), re-reads the edit, re-runs the reproduction, checks `git diff` and submits, under the task
system prompt (which, unlike the exploration prompt, offers `python3`). Every command runs in the
sandbox over a copy of the task's repository, and the task's own verifier then grades the final
repository: the episode keeps that reward in its metadata. Seeded per task: the same tasks and seed
re-record the same episodes.
"""

from __future__ import annotations

import ast
import difflib
import gzip
import hashlib
import json
import random
import subprocess
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tqdm import tqdm

from terminalworld.core.prompts import TASK_SYSTEM_PROMPT
from terminalworld.core.records import atomic_jsonl, dumps_row
from terminalworld.core.trajectories import OBSERVATION_PREFIX, SUBMIT_SENTINEL, Trajectory, Turn
from terminalworld.corpus.actions import FORMAT, Step, action_message, shell_quote, workspace_root
from terminalworld.env.codetrees import normalize_times
from terminalworld.env.sandbox import Sandbox, SandboxConfig
from terminalworld.errors import InputError
from terminalworld.tasks import layout


def _sed_text(line: str) -> str:
    # GNU sed's one-line i\ text: the backslash keeps leading blanks; backslashes are doubled.
    return line.replace("\\", "\\\\")


def fix_command(path: str, bugged: list[str], fixed: list[str]) -> str:
    """One `sed -i` command turning file `path` from `bugged` into `fixed` lines: each changed block
    becomes an insert of the fixed lines before it plus a delete of the old ones, applied bottom-up
    so that line numbers stay valid."""
    scripts = []
    for tag, i1, i2, j1, j2 in reversed(difflib.SequenceMatcher(a=bugged, b=fixed, autojunk=False).get_opcodes()):
        if tag == "equal":
            continue
        at = i1 + 1
        if i1 == len(bugged):  # appending after the last line
            scripts += [f"{len(bugged)}a\\{_sed_text(t)}" for t in reversed(fixed[j1:j2])]
            continue
        scripts += [f"{at}i\\{_sed_text(t)}" for t in fixed[j1:j2]]
        if i2 > i1:
            scripts.append(f"{at},{i2}d" if i2 > at else f"{at}d")
    return "sed -i " + " ".join(f"-e {shell_quote(s)}" for s in scripts) + f" {path}"


def _function_span(source: str, function: str) -> tuple[int, int]:
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == function)
    return node.lineno, node.end_lineno


def plan(task: Path, rng: random.Random) -> list[Step]:
    """The episode's commands for the task folder `task`."""
    meta = tomllib.loads((task / "task.toml").read_text())["metadata"]
    path, function, module = meta["path"], meta["function"], meta["module"]
    repo = task / layout.REPO_DIR
    bugged = (repo / path).read_text()
    fixed = _fixed(task, path)
    case = next(c for c in json.loads((task / "tests" / "cases.json").read_text()) if c["kind"] == "FAIL_TO_PASS")
    call = f"{function}({case['args'][1:-1].rstrip(',')})"
    repro = f"python3 -c {shell_quote(f'from {module} import {function}; print(repr({call}))')}"
    start, end = _function_span(bugged, function)
    changed = [
        i1 + 1
        for tag, i1, *_ in difflib.SequenceMatcher(a=bugged.splitlines(), b=fixed.splitlines()).get_opcodes()
        if tag != "equal"
    ]
    around = (max(start, changed[0] - 3), min(max(end, changed[0] + 3), changed[0] + 12))
    package = path.split("/", 1)[0]
    steps = [
        Step(f"Let me find where `{function}` is defined.", f"grep -rn {shell_quote(f'def {function}(')} {package}"),
        Step(f"Let me read `{function}` in full.", f"sed -n '{start},{end}p' {path}"),
        Step("Let me reproduce the reported behaviour first.", repro),
    ]
    if rng.random() < 0.5:
        steps.append(
            Step(
                "Let me look at the lines around the computation more closely.",
                f"nl -ba {path} | sed -n '{around[0]},{around[1]}p'",
            )
        )
    steps += [
        Step(
            f"The result differs from the expected `{case['expected']}` because of the logic at line {changed[0]} of "
            f"`{path}`. Let me fix it.",
            fix_command(path, bugged.splitlines(), fixed.splitlines()),
        ),
        Step("Let me re-read the edited lines.", f"sed -n '{around[0]},{around[1] + 2}p' {path}"),
        Step("Let me re-run the reproduction to confirm the fix.", repro),
        Step("Let me check that the diff contains only the fix.", "git diff"),
        Step("The fix is verified. Submitting.", f"echo {SUBMIT_SENTINEL}"),
    ]
    return steps


def _fixed(task: Path, path: str) -> str:
    """The file as the task's reference solution leaves it (its patch applied to a scratch copy)."""
    patch = layout.solution_patch(task)
    with layout.repo_copy(task) as repo:
        subprocess.run(["git", "apply", "-"], input=patch, text=True, cwd=repo, check=True, capture_output=True)
        return (repo / path).read_text()


def record_solving(task: Path, seed: int, sandbox_config: SandboxConfig) -> Trajectory:
    """Run the solver's episode for `task` in the sandbox and grade it with the task's verifier."""
    rng = random.Random(f"{seed}:{task.name}")
    meta = tomllib.loads((task / "task.toml").read_text())["metadata"]
    steps = plan(task, rng)
    with layout.repo_copy(task, prefix="tw-solve-", dir=workspace_root()) as repo:
        sandbox = Sandbox(str(repo), sandbox_config)
        turns = []
        for step in steps:
            result = sandbox.run(step.command)
            normalize_times(repo)
            turns.append(Turn(action_message(step), OBSERVATION_PREFIX + result.output))
        reward = layout.verify(task, repo)
    return Trajectory(
        instance_id=f"solve-{task.name}",
        repo=meta["repo"],
        system=TASK_SYSTEM_PROMPT,
        task=(task / "instruction.md").read_text(),
        turns=tuple(turns),
        format=FORMAT,
        metadata={"exit_status": "submitted", "source_version": meta["source_version"], "task_kind": "solve"}
        | {"reward": reward, "task_id": task.name, "bug_kind": meta["bug_kind"]},
    )


SOLVING = "solving.jsonl.gz"


def record_solving_shard(
    tasks_dir: str, out: Path, seed: int, sandbox_config: SandboxConfig, workers: int
) -> dict[str, Any]:
    """One solving episode per task folder of `tasks_dir` into `{out}/solving.jsonl.gz` (kept if
    present, so a recording resumes); its manifest entry, with the repos and how many were solved."""
    tasks = sorted(p for p in Path(tasks_dir).iterdir() if (p / "task.toml").is_file())
    if not tasks:
        raise InputError(f"--tasks {tasks_dir}: no task folder inside")
    path = out / SOLVING
    if not path.exists():
        with atomic_jsonl(str(path)) as f, ThreadPoolExecutor(workers) as pool:
            for traj in tqdm(
                pool.map(lambda t: record_solving(t, seed, sandbox_config), tasks), total=len(tasks), desc="solve"
            ):
                f.write(dumps_row(traj.to_swe_zero_row()))
    with gzip.open(path, "rt") as f:
        rows = [json.loads(line) for line in f]
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    solved = sum(r["reward"] >= 1.0 for r in rows)
    return {
        "path": path.name,
        "trajectories": len(rows),
        "solved": solved,
        "sha256": sha,
        "repos": [r["repo"] for r in rows],
    }
