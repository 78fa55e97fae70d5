"""The command level: tasks one or two shell commands solve, graded by the host. The reference
commands score 1 and an untouched repository 0, random valid commands almost never score, and no
file the sandbox can read holds the reference; a link, a pipe or a flood is never an answer."""

import json
import random
import shlex
import shutil
import tomllib
from pathlib import Path

import pytest

from terminalworld.agent import command_steps, process
from terminalworld.env.sandbox import Sandbox, SandboxConfig
from terminalworld.tasks import answercheck, commands, layout
from terminalworld.tasks.make import MakeTasksConfig, make_tasks

RANDOM_SOLVED_AT_MOST = 0.1  # of random-command trials: "almost none"


@pytest.fixture(scope="module")
def command_suite(tmp_path_factory) -> Path:
    """One command task from each of seven unseen trees: every family once, in turn."""
    out = tmp_path_factory.mktemp("commands")
    make_tasks(MakeTasksConfig(out=str(out), n=7, seed=0, workers=2, level="command"))
    return out


def _tasks(suite: Path) -> list[Path]:
    return layout.task_order(str(suite))


def _run(repo: Path, command: str) -> str:
    return Sandbox(str(repo), SandboxConfig(timeout_s=30)).run(command).output


def test_every_family_in_harbor_format_with_the_reference_on_the_host_alone(command_suite):
    manifest = json.loads((command_suite / "manifest.json").read_text())
    assert manifest["level"] == "command" and manifest["families"] == dict.fromkeys(commands.FAMILIES, 1)
    assert [t["family"] for t in manifest["tasks"]] == list(commands.FAMILIES)  # in turn, by the tree's place
    for task in _tasks(command_suite):
        meta = tomllib.loads((task / "task.toml").read_text())["metadata"]
        assert meta["level"] == "command" and meta["family"] in commands.FAMILIES
        for path in (
            "instruction.md",
            "environment/Dockerfile",
            "tests/test.sh",
            "tests/check.py",
            "solution/solve.sh",
        ):
            assert (task / path).is_file(), path
        assert (task / "tests" / "check.py").read_bytes() == layout.ANSWER_SCRIPT.read_bytes()
        spec = layout.command_spec(task)
        instruction = (task / "instruction.md").read_text()
        # The instruction says where the answer goes; the repository holds no answer file.
        if spec["kind"] == "answer":
            assert f"`/testbed/{spec['file']}`" in instruction
            assert not (task / layout.REPO_DIR / spec["file"]).exists()
            if len(spec["expected"]) >= 4:  # the reference commands compute it, never spell it out
                assert spec["expected"] not in (task / "solution" / "solve.sh").read_text()
        else:
            assert "Change nothing else in the repository." in instruction
        names = {p.name for p in (task / "environment").rglob("*")}
        assert layout.EXPECTED not in names and len(instruction) < 400


def test_the_reference_commands_score_one_and_an_untouched_repository_zero(command_suite, workdir):
    for task in _tasks(command_suite):
        for solve in (False, True):
            with layout.repo_copy(task, dir=str(workdir)) as copy:
                assert layout.verify(task, copy, solve=solve) == float(solve), task.name


def test_a_sandbox_reads_the_reference_blinded(command_suite, workdir):
    """What a command in the verifier's sandbox reads of the tests is the blinded reference: even
    a solution that copies every file of /tests into the answer learns nothing and scores 0."""
    for task in _tasks(command_suite)[:3]:
        spec = layout.command_spec(task)
        lone = workdir / f"lone-{task.name}"
        shutil.copytree(task, lone, symlinks=True)
        (lone / "solution" / "solve.sh").write_text(
            f"#!/bin/bash\ncd /testbed\ncat /tests/* > /testbed/seen.txt\ncat /tests/* > {spec.get('file', 'x')}\n"
        )
        with layout.repo_copy(lone, dir=str(workdir)) as copy:
            assert layout.verify(lone, copy, solve=True) == 0.0
            seen = (copy / "seen.txt").read_text()
        assert layout.BLIND_EXPECTED in seen and json.dumps(spec.get("expected", spec.get("files"))) not in seen


def _right_answer(task: Path, repo: Path) -> None:
    """Run the reference commands on `repo` (a copy of the task's repository)."""
    _run(repo, (task / "solution" / "solve.sh").read_text())


def test_no_link_pipe_flood_or_extra_change_passes_for_an_answer(command_suite, workdir):
    answers = [t for t in _tasks(command_suite) if layout.command_spec(t)["kind"] == "answer"]
    states = [t for t in _tasks(command_suite) if layout.command_spec(t)["kind"] == "state"]
    assert answers and states
    for task in answers:
        name = layout.command_spec(task)["file"]
        attacks = {
            # The right answer behind a link: the host reads no link (it could point at anything).
            "link": f"mv {name} real.txt && ln -s real.txt {name}",
            # A pipe where the answer goes: the host never blocks on it, and it is no answer.
            "pipe": f"rm {name} && mkfifo {name}",
            # The right answer followed by a flood past what the host reads.
            "flood": f"head -c {answercheck.MAX_BYTES + 10} /dev/zero | tr '\\0' 'x' >> {name}",
            # Every guess at once.
            "guesses": f"seq 0 2000 >> {name}",
        }
        for attack, command in attacks.items():
            with layout.repo_copy(task, dir=str(workdir)) as copy:
                _right_answer(task, copy)
                assert layout.command_verdict(layout.command_spec(task), str(copy))[0] == 1.0
                _run(copy, command)
                assert layout.command_verdict(layout.command_spec(task), str(copy))[0] == 0.0, (task.name, attack)
    for task in states:  # the asked change and one more: something else changed
        spec = layout.command_spec(task)
        other = sorted(spec["unchanged"])[0]
        with layout.repo_copy(task, dir=str(workdir)) as copy:
            _right_answer(task, copy)
            assert layout.command_verdict(spec, str(copy)) == (1.0, True)
            _run(copy, f"echo >> {shlex.quote(other)}")
            assert layout.command_verdict(spec, str(copy)) == (0.0, True)


def _random_commands(rng: random.Random, repo: Path) -> list[str]:
    """Valid shell commands on the task's own files, drawn at random: looking around, and writing
    what a command prints where answers and edits go."""
    files = sorted(str(p.relative_to(repo)) for p in repo.rglob("*.py") if ".git" not in p.parts)
    dirs = sorted({str(Path(f).parent) for f in files})
    f, d, n = rng.choice(files), rng.choice(dirs), rng.randint(1, 40)
    look = [
        "ls",
        f"ls {d}",
        f"cat {f}",
        f"head -n {n} {f}",
        f"grep -n def {f}",
        "git log --oneline | head",
        "git status",
        f"wc -l {f}",
    ]
    write = [
        f"wc -l < {f} > answer.txt",
        f"grep -c class {f} > answer.txt",
        f"sed -n '{n}p' {f} > answer.txt",
        f"head -n {n % 6 + 1} {f} > answer.txt",
        f"grep -rl import {d} > answer.txt",
        f"echo {n} > answer.txt",
        "git log -1 --format=%an > answer.txt",
        f"ls {d} > listing.txt",
        f"sed -i '{n}d' {f}",
        f"echo '# note' >> {f}",
        f"cp {f} {d}/copy.py",
    ]
    return [rng.choice(look), rng.choice(write), rng.choice(look + write)]


def test_random_valid_commands_solve_almost_none(command_suite, workdir):
    trials, solved = 0, 0
    for task in _tasks(command_suite):
        for attempt in range(3):
            rng = random.Random(f"{task.name}:{attempt}")
            with layout.repo_copy(task, dir=str(workdir)) as copy:
                for command in _random_commands(rng, copy):
                    _run(copy, command)
                solved += layout.command_verdict(layout.command_spec(task), str(copy))[0] == 1.0
                trials += 1
    assert trials == 21 and solved <= RANDOM_SOLVED_AT_MOST * trials


def test_the_steps_of_a_command_task_count_evidence_only(command_suite, workdir):
    """The reference commands reach every step but `file_shown` (they print nothing); a reader that
    only names the instruction's file reaches `valid_command` and nothing shown; reading the file
    shows it; nothing run reaches nothing."""
    by_family = {tomllib.loads((t / "task.toml").read_text())["metadata"]["family"]: t for t in _tasks(command_suite)}
    task = by_family["inspect"]
    info = command_steps.command_task(task)
    assert info is not None and info.target and info.target in info.instruction
    solve = (task / "solution" / "solve.sh").read_text().splitlines()[-1]
    with layout.repo_copy(task, dir=str(workdir)) as copy:
        out = _run(copy, solve)
        reward, written = layout.command_verdict(layout.command_spec(task), str(copy))
    steps = command_steps.trial_steps(pairs=[(solve, out)], task=info, written=written, solved=reward == 1.0)
    assert steps == {
        "valid_command": True,
        "family_tool": True,
        "file_shown": False,
        "answer_written": True,
        "solved": True,
        "valid_reply_share": None,
    }
    with layout.repo_copy(task, dir=str(workdir)) as copy:
        named = [(c, _run(copy, c)) for c in (f"ls -l {info.target}", f"echo {shlex.quote(info.instruction)}")]
        shown = [(f"cat {info.target}", _run(copy, f"cat {info.target}"))]
    steps = command_steps.trial_steps(pairs=named, task=info, written=False, solved=False, replies=(3, 2))
    assert (steps["valid_command"], steps["file_shown"], steps["valid_reply_share"]) == (True, False, 2 / 3)
    assert command_steps.trial_steps(pairs=shown, task=info, written=False, solved=False)["file_shown"]
    nothing = command_steps.trial_steps(pairs=[], task=info, written=False, solved=False)
    assert not any(nothing[k] for k in command_steps.COMMAND_STEPS)
    # The locate task's evidence is the defining file named in an output its command did not name.
    locate = command_steps.command_task(by_family["locate"])
    found = [("grep -rn 'def x' .", f"./{locate.answer}:12:def x():\n")]
    assert command_steps.trial_steps(pairs=found, task=locate, written=None, solved=None)["file_shown"]
    assert process.rates([{"scored": True, "process": steps}])["file_shown"] == {"rate": 0.0, "n": 1}


def test_normalisation_is_one_stated_rule():
    assert answercheck.normalise("  42  \n\n") == "  42" and answercheck.normalise("\n42\r\n") == "42"
    assert answercheck.normalise("./a.py\nb/c.py\n", paths=True) == "a.py\nb/c.py"
    assert answercheck.normalise("./a.py") == "./a.py"  # only a path answer drops `./`
