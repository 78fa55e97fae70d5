import json
import subprocess
import tomllib
from pathlib import Path

import pytest

from terminalworld.agent import process
from terminalworld.corpus.recorder import record_solving
from terminalworld.corpus.solver import wrong_fix
from terminalworld.env.codetrees import discover_code_trees, module_name
from terminalworld.env.sandbox import SandboxConfig
from terminalworld.tasks import layout
from terminalworld.tasks.make import CHANGE_HINTS, FIX_LEVELS, LEVELS, MakeTasksConfig, make_tasks


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


def test_the_ladder_holds_the_same_bugs_with_more_help_at_each_level(task_ladder):
    suites = {level: json.loads((task_ladder / level / "manifest.json").read_text()) for level in FIX_LEVELS}
    top = json.loads((task_ladder / "manifest.json").read_text())
    assert top["levels"] == list(LEVELS) == ["command", *FIX_LEVELS] and len(top["tasks"]) == 3
    # The command level, at the bottom, is a suite of its own tasks from the same unseen trees.
    commands = json.loads((task_ladder / "command" / "manifest.json").read_text())
    assert commands["level"] == "command" and top["command_tasks"] == len(commands["tasks"]) == 3
    assert [p.name for p in layout.task_order(str(task_ladder / "command"))] == [
        t["task_id"] for t in commands["tasks"]
    ]
    for level, suite in suites.items():
        assert suite["level"] == level and [t | {"level": level} for t in top["tasks"]] == suite["tasks"]
        assert [p.name for p in layout.task_order(str(task_ladder / level))] == [t["task_id"] for t in top["tasks"]]
    for entry in top["tasks"]:
        tasks = {level: task_ladder / level / entry["task_id"] for level in FIX_LEVELS}
        files = {level: _files(t) for level, t in tasks.items()}
        for level in FIX_LEVELS:  # only the instruction and the level differ
            differ = {k for k in files[level] if files[level][k] != files["function"][k]}
            assert differ == (set() if level == "function" else {"instruction.md", "task.toml"})
            meta = tomllib.loads((tasks[level] / "task.toml").read_text())["metadata"]
            assert meta["level"] == level and meta["wrong_output"] == entry["wrong_output"]
        text = {level: (t / "instruction.md").read_text() for level, t in tasks.items()}
        buggy = (tasks["issue"] / layout.REPO_DIR / entry["path"]).read_text().splitlines()[entry["line"] - 1].strip()
        # issue: the call and its wrong output, no file, no reproduction command, no line.
        assert entry["wrong_output"] in text["issue"] and entry["function"] in text["issue"]
        assert entry["path"] not in text["issue"] and "Reproduce" not in text["issue"]
        assert entry["path"] in text["function"] and "Reproduce" in text["function"]
        assert buggy not in text["function"] and f"line {entry['line']}" not in text["function"]
        assert (
            text["pinpoint"].startswith(text["function"])
            and f"line {entry['line']} of `{entry['path']}`" in text["pinpoint"]
        )
        assert buggy in text["pinpoint"] and CHANGE_HINTS[entry["kind"]] in text["pinpoint"]


@pytest.mark.parametrize("level", FIX_LEVELS)
def test_known_answers_at_every_level(task_ladder, workdir, level):
    """At each level: the bugged repository (nop) scores 0, the oracle 1, and the scripted solver
    exactly the episodes it fixes right; its steps of a fix are the ones its commands reach."""
    share, seed = 0.5, 3
    for task in layout.task_order(str(task_ladder / level)):
        for solve in (False, True):  # the bugged repository (what nop leaves), then the oracle
            with layout.repo_copy(task, dir=str(workdir)) as copy:
                assert layout.verify(task, copy, solve=solve) == float(solve)
        wrong = wrong_fix(seed, task.name, share)
        episode = record_solving(task, seed, SandboxConfig(), wrong=wrong)
        assert episode.metadata["reward"] == float(not wrong) and episode.metadata["level"] == level
        messages = [m for t in episode.turns for m in ({"role": "assistant", "content": t.action}, _obs(t))]
        diff = _git_diff_after(task, episode)
        steps = process.trial_steps(
            pairs=process.commands_and_outputs(messages), bug=process.bug_location(task), diff=diff, solved=not wrong
        )
        # The solver greps for the definition (the file found where the level hides it), reads the
        # function, reproduces the call and edits the buggy line, right or wrong.
        assert steps == dict.fromkeys(process.STEPS, True) | {
            "file_found": True if level == "issue" else None,
            "line_shown": None if level == "pinpoint" else True,
            "solved": not wrong,
            "valid_reply_share": None,
        }
    picked = [wrong_fix(seed, t.name, share) for t in layout.task_order(str(task_ladder / level))]
    assert 0 < sum(picked) < len(picked)  # both outcomes present at this seed


def _obs(turn):
    return {"role": "user", "content": turn.observation}


def _git_diff_after(task: Path, episode) -> str:
    """The diff the episode's commands leave: its fix command replayed on a fresh copy."""
    from terminalworld.core.trajectories import extract_command

    fix = next(c for c in map(extract_command, (t.action for t in episode.turns)) if c.startswith("sed -i "))
    with layout.repo_copy(task) as repo:
        subprocess.run(["bash", "-c", fix], cwd=repo, check=True)
        return _git(repo, "diff", "--no-color")
