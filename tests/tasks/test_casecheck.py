"""The case runner's time limits: CPU time for the call, so a verdict does not change with the
machine's load, a wall clock only for calls that wait, and the import outside the call."""

import json
import subprocess
import sys
import textwrap

from terminalworld.tasks import casecheck, layout

MODULES = {
    # 1.5 s of CPU at import, three times the per-call limit: the import is not the call.
    "heavy.py": "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.5:\n    pass\n"
    "def f(x):\n    return x + 1\n",
    # A second of the clock and almost no CPU: what a call looks like on a machine three times overloaded.
    "waits.py": "import time\ndef f(x):\n    time.sleep(1.0)\n    return x * 2\n",
    "spins.py": "def f(x):\n    while True:\n        x += 1\n",
}
CASES = [
    {"id": "import", "module": "heavy", "function": "f", "args": "(1,)", "expected": "2"},
    {"id": "wait", "module": "waits", "function": "f", "args": "(3,)", "expected": "6"},
    {"id": "spin", "module": "spins", "function": "f", "args": "(0,)", "expected": "0"},
    {"id": "after", "module": "heavy", "function": "f", "args": "(5,)", "expected": "6"},
]


def test_cpu_limit_for_the_call_and_none_for_the_import(tmp_path):
    for name, text in MODULES.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "cases.json").write_text(json.dumps(CASES))
    run = subprocess.run(
        [sys.executable, str(layout.CHECK_SCRIPT), "cases.json"], cwd=tmp_path, capture_output=True, text=True
    )
    got = {r["id"]: (r["passed"], r["got"]) for r in map(json.loads, run.stdout.splitlines())}
    assert got == {
        "import": (True, "2"),
        "wait": (True, "6"),
        "spin": (False, "raised timeout"),  # stopped after half a second of CPU, as before
        "after": (True, "6"),
    }
    assert run.returncode == 1


def test_a_call_that_waits_forever_meets_the_wall_clock(tmp_path, monkeypatch):
    (tmp_path / "stuck.py").write_text(
        textwrap.dedent("""
        import time
        def f():
            time.sleep(3600)
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(casecheck, "WALL_SECONDS", 0.3)
    assert casecheck.call("stuck", "f", ()) == ("error", "timeout")
    assert casecheck.call("stuck", "missing", ()) == ("error", "AttributeError")
