"""No task is made whose fix a sandboxed command can read in the host's system folders, which every
sandbox binds read-only: copying the original from there no longer earns a reward.

The attack is real on hosts whose system Python carries the code trees' packages (Debian's python3-toml,
python3-setuptools, ...), and on every host for a code tree made from the sandbox's own standard
library, which is the case this file can always run."""

import ast
import dataclasses
import json
import os
import shlex
from pathlib import Path

import pytest

from terminalworld.env import visible
from terminalworld.env.codetrees import CodeTree, discover_code_trees
from terminalworld.env.sandbox import Sandbox, SandboxConfig, system_binds
from terminalworld.tasks import layout, make
from terminalworld.tasks.bugs import Bug, fixed_lines, inject
from terminalworld.tasks.make import MakeTasksConfig, make_tasks

DEBIAN = "/usr/lib/python3/dist-packages"


def _visible_copies(repo: Path, rel: str) -> list[str]:
    """Files the sandbox shows under its system folders whose path ends like the task's module."""
    folders = " ".join(shlex.quote(d) for d in system_binds())
    found = Sandbox(str(repo), SandboxConfig(timeout_s=120)).run(
        f"find {folders} -xdev -type f -path {shlex.quote('*/' + rel)} 2>/dev/null | head -20"
    )
    return [line for line in found.output.splitlines() if line.startswith("/")]


def _copy_attack_rewards(task: Path, entry: dict, workdir: Path) -> dict[str, float]:
    """The reward of each task repository in which a sandboxed command copied a same-named module
    from the system folders over the bugged one (the verdict is the host's, `layout.verify`)."""
    rewards = {}
    with layout.repo_copy(task, dir=str(workdir)) as probe:
        sources = _visible_copies(probe, entry["path"])
    for source in sources:
        with layout.repo_copy(task, dir=str(workdir)) as repo:
            Sandbox(str(repo), SandboxConfig(timeout_s=60)).run(
                f"cp {shlex.quote(source)} {shlex.quote(entry['path'])}"
            )
            rewards[source] = layout.verify(task, repo)
    return rewards


def test_the_fixed_lines_are_the_lines_the_bug_changed():
    source = "def f(a, b):\n    if a < b:\n        return a\n    return b\n"
    tree = ast.parse(source)
    bugs = {b.kind: b for b in inject(source, tree, tree.body[0])}
    assert fixed_lines(source, bugs["flip_comparison"]) == ["    if a < b:"]
    assert fixed_lines(source, bugs["dropped_branch"]) == ["    if a < b:", "        return a"]


def _stdlib_tree(workdir: Path) -> CodeTree:
    """A code tree of one module of the sandbox's own standard library, at the path the sandbox reads."""
    (workdir / "empty").mkdir()
    shown = Sandbox(str(workdir / "empty"), SandboxConfig(timeout_s=60)).run(
        'python3 -c "import colorsys; print(colorsys.__file__)"'
    )
    path = Path(shown.output.strip())
    assert shown.returncode == 0 and path.is_file(), shown.output
    return CodeTree("pypi/colorsys-copy", "0", ((path, "colorsys.py"),))


def test_a_tree_the_sandbox_can_read_gives_no_task(workdir, tmp_path, monkeypatch):
    tree = _stdlib_tree(workdir)
    monkeypatch.setattr(make, "discover_code_trees", lambda: [tree])
    cfg = MakeTasksConfig(out=str(tmp_path / "checked"), n=1, seed=0, workers=1, max_bugs=4)
    manifest = make_tasks(cfg)
    assert manifest["tasks"] == [] and manifest["dropped"]["fix_readable_in_sandbox"] > 0
    written = json.loads((tmp_path / "checked" / "manifest.json").read_text())
    assert written["dropped"]["fix_readable_in_sandbox"] == manifest["dropped"]["fix_readable_in_sandbox"]
    # Without the check the same tree gives a task, and copying the module the sandbox reads solves it.
    monkeypatch.setattr(visible, "fix_seen", lambda *a, **k: None)
    unchecked = make_tasks(dataclasses.replace(cfg, out=str(tmp_path / "unchecked")))
    assert len(unchecked["tasks"]) == 1
    entry = unchecked["tasks"][0]
    task = tmp_path / "unchecked" / entry["task_id"]
    with layout.repo_copy(task, dir=str(workdir)) as repo:
        Sandbox(str(repo), SandboxConfig(timeout_s=60)).run(f"cp {shlex.quote(str(tree.files[0][0]))} colorsys.py")
        assert layout.verify(task, repo) == 1.0


@pytest.mark.skipif(
    not (os.path.isdir(f"{DEBIAN}/toml") and os.path.isdir(f"{DEBIAN}/setuptools")),
    reason=f"this host's system Python has no toml and setuptools in {DEBIAN} to copy a fix from",
)
def test_the_embedded_trees_the_system_python_carries_give_no_copyable_task(workdir, tmp_path):
    trees = {t.repo: t for t in discover_code_trees()}
    repos = ["pypi/toml", "pypi/setuptools"]
    manifest = make_tasks(MakeTasksConfig(out=str(tmp_path / "t"), n=2, seed=0, workers=1, repos=repos))
    assert manifest["dropped"].get("fix_readable_in_sandbox", 0) > 0
    for entry in manifest["tasks"]:
        task = tmp_path / "t" / entry["task_id"]
        original = dict((rel, src) for src, rel in trees[entry["repo"]].files)[entry["path"]].read_text()
        bugged = (task / layout.REPO_DIR / entry["path"]).read_text()
        fixed = fixed_lines(original, Bug(entry["kind"], entry["function"], entry["line"], bugged))
        assert visible.fix_seen(entry["function"], fixed) is None
        assert 1.0 not in _copy_attack_rewards(task, entry, workdir).values()


def test_copying_a_module_from_the_system_folders_solves_no_generated_task(generated_tasks, workdir):
    for entry in json.loads((generated_tasks / "manifest.json").read_text())["tasks"]:
        assert 1.0 not in _copy_attack_rewards(generated_tasks / entry["task_id"], entry, workdir).values()
