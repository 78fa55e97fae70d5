"""A solver policy for generated tasks: the steps of a task-solving episode in SWE-ZERO's shape.

For one task (`terminalworld tasks make`), the policy finds the function, reads it, runs the
issue's reproduction, fixes the bug with `sed -i` edits (the reverse of the injected bug, line for
line), re-reads the edit, re-runs the reproduction, checks `git diff` and submits, under the task
system prompt (which, unlike the exploration prompt, offers `python3`). Seeded per task. With
`wrong=True` the same episode makes a wrong fix instead: it rewrites the buggy line unchanged but
for a trailing comment, so the diff touches the right line and the bug stays (`wrong_fix` picks
those episodes for a stated share, seeded). The
recorder runs it into the corpus's solving episodes (`corpus.recorder.record_solving`), and the
closed loop's scripted agent replays it (`sim.evaluate`).
"""

from __future__ import annotations

import ast
import difflib
import json
import random
import subprocess
import tomllib
from pathlib import Path

from terminalworld.core.trajectories import SUBMIT_SENTINEL
from terminalworld.corpus.actions import Step, shell_quote
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


def wrong_fix(seed: int, task: str, share: float) -> bool:
    """Whether the solver's episode on `task` makes a wrong fix, for a share `share` of tasks: a
    uniform draw seeded by (seed, task), so the same seed picks the same tasks."""
    return random.Random(f"wrong:{seed}:{task}").random() < share


def plan(task: Path, rng: random.Random, *, wrong: bool = False) -> list[Step]:
    """The episode's commands for the task folder `task` (a wrong fix when `wrong`)."""
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
    lines = bugged.splitlines()
    if wrong:  # the buggy line kept, with a comment: a diff at the right place that fixes nothing
        at = min(changed[0], len(lines)) - 1
        fixed_lines = [*lines[:at], lines[at] + "  # checked", *lines[at + 1 :]]
    else:
        fixed_lines = fixed.splitlines()
    steps += [
        Step(
            f"The result differs from the expected `{case['expected']}` because of the logic at line {changed[0]} of "
            f"`{path}`. Let me fix it.",
            fix_command(path, lines, fixed_lines),
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
