import json
import subprocess
import tomllib
from pathlib import Path

from terminalworld.env.codetrees import discover_code_trees, module_name
from terminalworld.tasks import layout
from terminalworld.tasks.make import MakeTasksConfig, make_tasks


def _files(task: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(task)): p.read_bytes()
        for p in sorted(task.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def test_tasks_are_valid_harbor_tasks_with_a_hidden_bug(generated_tasks):
    manifest = json.loads((generated_tasks / "manifest.json").read_text())
    assert len(manifest["tasks"]) == 3 and len(manifest["repos"]) == 3
    trees = {t.repo: t for t in discover_code_trees()}
    for entry in manifest["tasks"]:
        task = generated_tasks / entry["task_id"]
        config = tomllib.loads((task / "task.toml").read_text())
        assert config["metadata"]["repo"] == entry["repo"] and config["metadata"]["bug_kind"] == entry["kind"]
        repo = task / layout.REPO_DIR
        # One commit holding the bug: nothing in history or the working tree gives it away.
        assert len(_git(repo, "log", "--oneline").splitlines()) == 1
        assert _git(repo, "status", "--porcelain") == ""
        original = dict((rel, src) for src, rel in trees[entry["repo"]].files)[entry["path"]].read_text()
        bugged = (repo / entry["path"]).read_text()
        changed = [
            i for i, (a, b) in enumerate(zip(original.splitlines(), bugged.splitlines(), strict=False)) if a != b
        ]
        assert bugged != original and changed and changed[0] + 1 == entry["line"]
        instruction = (task / "instruction.md").read_text()
        assert entry["function"] in instruction and original.splitlines()[entry["line"] - 1].strip() not in instruction
        cases = json.loads((task / "tests" / "cases.json").read_text())
        kinds = [c["kind"] for c in cases]
        assert kinds.count("FAIL_TO_PASS") == entry["fail_to_pass"] >= 1
        assert kinds.count("PASS_TO_PASS") == entry["pass_to_pass"]
        assert (task / "tests" / "check.py").read_bytes() == layout.CHECK_SCRIPT.read_bytes()


def test_validation_verdicts_hold_in_the_sandbox(generated_tasks, workdir):
    entry = json.loads((generated_tasks / "manifest.json").read_text())["tasks"][0]
    task = generated_tasks / entry["task_id"]
    verdicts = {}
    for name, solve in (("bugged", False), ("oracle", True)):
        copy = workdir / name
        subprocess.run(["cp", "-a", str(task / layout.REPO_DIR), str(copy)], check=True)
        verdicts[name] = layout.verify(task, copy, solve=solve)
    assert verdicts == {"bugged": 0.0, "oracle": 1.0}


def test_same_seed_same_tasks_and_other_seed_other_tasks(generated_tasks, tmp_path):
    again = tmp_path / "again"
    manifest = make_tasks(MakeTasksConfig(out=str(again), n=3, seed=0, workers=1))
    first = json.loads((generated_tasks / "manifest.json").read_text())
    assert manifest["tasks"] == first["tasks"] and manifest["dropped"] == first["dropped"]
    for entry in manifest["tasks"]:
        assert _files(again / entry["task_id"]) == _files(generated_tasks / entry["task_id"])
    other = make_tasks(MakeTasksConfig(out=str(tmp_path / "other"), n=3, seed=1, workers=2))
    assert {t["task_id"] for t in other["tasks"]}.isdisjoint({t["task_id"] for t in first["tasks"]})


def test_repository_filters_hold(tmp_path):
    first = discover_code_trees()[0].repo
    manifest = make_tasks(MakeTasksConfig(out=str(tmp_path / "t"), n=2, seed=0, exclude_repos=[first], per_repo=2))
    assert first not in manifest["repos"] and len(manifest["tasks"]) == 2


def test_module_names():
    assert module_name("a/b/__init__.py") == "a.b"
    assert module_name("a/b.py") == "a.b"
    assert module_name("a-b/c.py") is None
