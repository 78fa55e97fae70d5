"""The `command` level: tasks whose answer is the output or effect of one or two shell commands.

Below the fix levels of the ladder (`tasks.make.LEVELS`): on a held-out code tree, as it is
(one commit; the git family adds a few commits and a branch first), a task asks for one thing a
command shows or does. Families (`families.FAMILIES`, each made in `tasks.families` from the host's
`treeview.View` of the tree), each with a few variants:

- locate: the file that defines a function, a class or a module-level constant
- count: `.py` files under a folder, a file's lines, its top-level `def` lines, lines holding a word
- search: a file's lines holding a word or its `def` lines, with their numbers; the files holding a word
- inspect: one given line, a file's head or tail, a JSON file's field
- edit: one given change in one given file (replace a word on a line, delete a line, append one)
- git: the last commit's subject, the files it changed, the current branch, the number of commits
- files: create a file, move or copy one, list a folder into a file

The reference is computed by the host from the same tree and kept in the task's tests
(`layout.EXPECTED`, blinded wherever a sandbox runs), never in its repository; the solution holds
the reference commands, and a task is kept only when they score 1 and an untouched repository 0
(`layout.verify`). The instruction says where the answer goes in one sentence: `/testbed/answer.txt`
(or the file it names), or the repository's state. Answers are compared after `answercheck.normalise`.
A run's tasks take the families in turn, by the tree's place in the seeded order, so the mix is
fixed by the seed and the number of tasks, never by results.
"""

from __future__ import annotations

import hashlib
import random
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

from terminalworld.env import copies
from terminalworld.env.codetrees import CodeTree, materialize, materialized_bytes
from terminalworld.tasks import layout
from terminalworld.tasks.families import FAMILIES, MAKERS
from terminalworld.tasks.gather import gather
from terminalworld.tasks.treeview import Made, View


def family_order(position: int) -> list[str]:
    """The families a tree at `position` of the run's order tries, first its own (the families in
    turn), then the next ones, for a tree where its own fits nothing."""
    return [FAMILIES[(position + i) % len(FAMILIES)] for i in range(len(FAMILIES))]


def try_repo(
    tree: CodeTree, *, seed: int, position: int, per_repo: int, work: Path, out: Path
) -> tuple[list[dict], Counter]:
    """Up to `per_repo` validated command tasks from one code tree (its place `position` in the run's
    order picks the families), written to `out`; the counts of what was dropped."""
    rng = random.Random(f"{seed}:{tree.repo}:command")
    dropped: Counter = Counter()
    made: list[dict] = []
    orig = materialize(tree, work / "orig")
    files = [rel for _, rel in tree.files]
    families = family_order(position)
    for k in range(per_repo):
        for family in families[k:] + families[:k]:
            stage = work / f"command-{k}-{family}"
            repo = stage / "staging-repo"
            shutil.copytree(orig, repo, symlinks=True)
            task = MAKERS[family](rng, View(repo, files))
            if task is None:
                shutil.rmtree(stage)
                dropped[f"no_{family}_task"] += 1
                continue
            entry = _write(tree, seed, family, task, stage, repo, work, out)
            if entry is None:
                dropped["validation_failed"] += 1
                continue
            made.append(entry)
            break
    if not made:
        dropped["repo_without_task"] += 1
    return made, dropped


def _write(
    tree: CodeTree, seed: int, family: str, task: Made, stage: Path, repo: Path, work: Path, out: Path
) -> dict | None:
    """Write the task folder, validate it (the reference commands score 1, the untouched repository 0)
    and move it to `out`; its manifest entry, or None when validation fails."""
    name = tree.repo.split("/", 1)[1]
    digest = hashlib.sha256(task.instruction.encode()).hexdigest()[:8]
    task_id = f"{name}__{family}-{task.variant}-{digest}".lower().replace("_", "-").replace(".", "-")
    folder = stage / task_id
    answer_file = task.expected.get("file")
    metadata = {"repo": tree.repo, "version": tree.version, "family": family, "variant": task.variant}
    metadata |= {"target": task.target, "answer_file": answer_file, "seed": seed}
    layout.write_command_task(
        folder,
        repo_dir=repo,
        instruction=task.instruction,
        expected=task.expected,
        commands=task.commands,
        metadata=metadata,
    )
    checks = {}
    for check, solve in (("untouched", False), ("oracle", True)):
        with copies.repo_copy(str(folder / layout.REPO_DIR), prefix="tw-check-", dir=str(work)) as copy:
            checks[check] = layout.verify(folder, Path(copy), solve=solve)
    if checks != {"untouched": 0.0, "oracle": 1.0}:
        shutil.rmtree(stage)
        return None
    dest = out / task_id
    shutil.rmtree(dest, ignore_errors=True)  # a task of an earlier, interrupted run
    shutil.copytree(folder, dest, symlinks=True)
    shutil.rmtree(stage)
    return {"task_id": task_id, "repo": tree.repo, "version": tree.version, "family": family, "variant": task.variant}


def suite(
    trees: list[CodeTree], *, seed: int, n: int, per_repo: int, workers: int, out: Path, base: str | None
) -> dict[str, Any]:
    """`n` command tasks from `trees` (in the run's seeded order) written to `out`, each tree's work in
    a copy space under `base`: the suite's own manifest fields."""
    positions = {tree.repo: i for i, tree in enumerate(trees)}

    def job(tree: CodeTree) -> tuple[list[dict], Counter]:
        with copies.copy_space("tw-tasks-", dir=base, content_bytes=materialized_bytes(tree)) as work:
            return try_repo(tree, seed=seed, position=positions[tree.repo], per_repo=per_repo, work=Path(work), out=out)

    def remove(made: list[dict]) -> None:
        for extra in made:
            shutil.rmtree(out / extra["task_id"])

    tasks, dropped, tried = gather(trees, job, remove, n=n, workers=workers, desc="command tasks")
    return {
        "level": "command",
        "tasks": [t | {"level": "command"} for t in tasks],
        "families": dict(Counter(t["family"] for t in tasks)),
        "repos": sorted({t["repo"] for t in tasks}),
        "repos_tried": tried,
        "dropped": dict(sorted(dropped.items())),
    }
