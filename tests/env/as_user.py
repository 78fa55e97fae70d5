"""Running a Python caller as another host uid, the way every test of an unprivileged caller does.

A root host starts the system's python3 as `uid` (its own group, no supplementary groups) with a bare
environment (bwrap's choice and a PATH), and the caller imports the sandbox modules (standard library
only) straight from the source tree: the project's interpreter may sit where another uid cannot reach
it (under /root). Each test uses a uid of its own: under pytest-xdist the tests run at once, and "no
process of that uid is left" or a per-uid process limit must not see a sibling test's caller.
"""

import functools
import json
import os
import subprocess
from pathlib import Path

import pytest

from terminalworld.env.sandbox import _blocked_on, bwrap_path

SRC = Path(__file__).resolve().parents[2] / "src"
PYTHON = "/usr/bin/python3"
# Put ahead of every caller's code, so that `terminalworld` is the source tree's.
_PRELUDE = f"import sys\nsys.path.insert(0, {str(SRC)!r})\n"


@functools.cache
def _system_python_ok() -> bool:
    """The caller's own interpreter, not pytest's, must be 3.11 or later (the sandbox modules' syntax)."""
    if not os.access(PYTHON, os.X_OK):
        return False
    probe = subprocess.run([PYTHON, "-c", "import sys; sys.exit(sys.version_info[:2] < (3, 11))"], timeout=30)
    return probe.returncode == 0


def why_not(uid: int) -> str | None:
    """Why this host cannot run a caller as `uid`, or None when it can."""
    if os.geteuid() != 0:
        return "needs root to start the unprivileged caller"
    if not _system_python_ok():
        return f"needs {PYTHON} 3.11 or later"
    if _blocked_on(str(SRC / "terminalworld"), uid, uid) or _blocked_on(bwrap_path(), uid, uid):
        return f"uid {uid} cannot reach the source tree or bwrap"
    return None


def unprivileged(uid: int):
    """Skip unless this host can run the caller as `uid`."""
    reason = why_not(uid)
    return pytest.mark.skipif(reason is not None, reason=str(reason))


def own(uid: int, *paths: Path) -> None:
    """Make `uid` (and its group) the owner of each of `paths`, no link followed."""
    for path in paths:
        os.chown(path, uid, uid, follow_symlinks=False)


def start(uid: int, code: str, *args: object, cwd: Path, env: dict[str, str] | None = None, **popen):
    """`code` started as `uid` in `cwd`, with `args` (as text) from sys.argv[1]; `env` adds variables.
    `popen` goes to `subprocess.Popen` (text mode)."""
    return subprocess.Popen(_argv(code, args), **_as(uid, cwd, env), text=True, **popen)


def run(uid: int, code: str, *args: object, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120):
    """What `code`, run as `uid` in `cwd` with `args` as `start` gives them, printed as JSON. A caller
    that fails fails the test with its stderr."""
    proc = subprocess.run(_argv(code, args), **_as(uid, cwd, env), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _argv(code: str, args: tuple) -> list[str]:
    return [PYTHON, "-c", _PRELUDE + code, *map(str, args)]


def _as(uid: int, cwd: Path, env: dict[str, str] | None) -> dict:
    variables = {"TERMINALWORLD_BWRAP": bwrap_path(), "PATH": "/usr/bin:/bin", **(env or {})}
    return {"user": uid, "group": uid, "extra_groups": [], "env": variables, "cwd": str(cwd)}
