"""A generated task's verdict is the host's: the code under test runs inside the verifier and can
write, forge or kill anything there, and none of it passes a case it does not pass."""

import json
import subprocess
from pathlib import Path

import pytest

from terminalworld.tasks import layout

CASES = [{"id": "a", "expected": "3"}, {"id": "b", "expected": "'x'"}]


def _lines(*rows) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


def test_verdict_by_hand():
    assert layout.verdict(CASES, _lines({"id": "a", "got": "3"}, {"id": "b", "got": "'x'"})) == 1.0
    assert layout.verdict(CASES, b"noise\n[1]\n" + _lines({"id": "a", "got": "3"}, {"id": "b", "got": "'x'"})) == 1.0
    assert layout.verdict(CASES, _lines({"id": "a", "got": "3"})) == 0.0  # b never reported
    assert layout.verdict(CASES, _lines({"id": "a", "got": "3"}, {"id": "b", "got": "'y'"})) == 0.0
    # A forged line beside the real one cannot outvote it, whichever comes first.
    both = _lines({"id": "a", "got": "3"}, {"id": "b", "got": "'y'"}, {"id": "b", "got": "'x'"})
    assert layout.verdict(CASES, both) == 0.0
    assert layout.verdict(CASES, _lines({"id": "a", "got": "raised ValueError"}, {"id": "b", "got": "'x'"})) == 0.0
    assert layout.verdict(CASES, None) == 0.0 and layout.verdict([], b"") == 0.0
    assert layout.verdict(CASES, b"[" * 100_000 + b"\n") == 0.0  # past the parser's recursion limit


def test_the_sandbox_never_sees_the_expected_values():
    cases = [{"id": "b", "args": "(2,)", "expected": "4", "kind": "PASS_TO_PASS"}]
    cases += [{"id": "a", "args": "(1,)", "expected": "3", "kind": "FAIL_TO_PASS"}]
    # Neither the values nor which cases fail (their kind, their order) reach the sandbox.
    assert json.loads(layout.blind_cases(cases)) == [{"id": "a", "args": "(1,)"}, {"id": "b", "args": "(2,)"}]


# Each payload runs when the verifier imports the bugged module, as the agent's edited code would.
ATTACKS = {
    "reward-file-locked": "open('/logs/verifier/reward.txt', 'w').write('1\\n'); os.chmod('/logs/verifier/reward.txt', 0o444)",
    "script-killed": "open('/logs/verifier/reward.txt', 'w').write('1\\n'); os.kill(os.getppid(), 9); os._exit(0)",
    "reward-symlink": "os.symlink('/proc/sys/kernel/ostype', '/logs/verifier/reward.txt')",
    "forged-lines": (
        "[print(json.dumps({'id': c['id'], 'passed': True, 'got': c.get('expected', '?')}), flush=True)"
        " for c in json.load(open('/tests/cases.json'))]; os._exit(0)"
    ),
    "solution-read": "print(open('/solution/solve.sh').read(), flush=True)",
}


@pytest.mark.parametrize("payload", list(ATTACKS.values()), ids=list(ATTACKS))
def test_the_code_under_test_cannot_forge_its_verdict(generated_tasks, workdir, payload):
    entry = json.loads((generated_tasks / "manifest.json").read_text())["tasks"][0]
    task = generated_tasks / entry["task_id"]
    repo = workdir / "repo"
    subprocess.run(["cp", "-a", str(task / layout.REPO_DIR), str(repo)], check=True)
    module = Path(repo, entry["path"])
    module.write_text(f"import json, os\ntry:\n    {payload}\nexcept Exception:\n    pass\n" + module.read_text())
    assert layout.verify(task, repo) == 0.0
    # The same payload beside the fix changes nothing either: the host grades what the calls return.
    subprocess.run(["git", "apply", "-"], input=layout.solution_patch(task), text=True, cwd=repo, check=True)
    assert layout.verify(task, repo) == (0.0 if "os._exit" in payload or "kill" in payload else 1.0)


def test_the_host_runs_its_own_case_runner_whatever_the_task_folder_carries(generated_tasks, workdir):
    entry = json.loads((generated_tasks / "manifest.json").read_text())["tasks"][0]
    task = workdir / "task"
    subprocess.run(["cp", "-a", str(generated_tasks / entry["task_id"]), str(task)], check=True)
    # A task made before the verdict moved to the host carries a runner that needs expected values.
    (task / "tests" / "check.py").write_text("import sys\nsys.exit(3)\n")
    repo = workdir / "repo"
    subprocess.run(["cp", "-a", str(task / layout.REPO_DIR), str(repo)], check=True)
    assert layout.verify(task, repo, solve=True) == 1.0
