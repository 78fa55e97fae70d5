"""Nothing of a sandbox outlives its caller, whatever the caller dies of and whatever the command did
to the sandbox's pid 1 (`env.reaper`).

The attack: pid 1 (bwrap, dumpable) waits in wait4; a command reads where that call returns from
/proc/1/syscall, writes code there through /proc/1/mem that clears pid 1's parent-death signal and
then pauses for good, and makes the wait return with an orphan's exit. A SIGKILLed caller then left
pid 1 and every process of the sandbox running. The sandbox now hides pid 1's memory (read-only
mounts); with that mask taken away in the caller, the reaper alone ends the sandbox, and with the
reaper killed too, the next caller's sweep does.
"""

import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from . import as_user
from .as_user import unprivileged
from .test_sandbox_hostile import ROOT_ONLY, processes_of

X86_64 = pytest.mark.skipif(platform.machine() != "x86_64", reason="the attack's code is x86_64")
CLI_UID = 54341  # the unprivileged caller of the end-to-end test (unused by any other test)
REAPER_UIDS = {"root": 61201, "unprivileged": 54342}  # the sandbox's host uid (root: lent to it)
SWEEP_UIDS = {"root": 61202, "unprivileged": 54343}

ATTACK = r"""
import os, sys
pc = int(open("/proc/1/syscall").read().split()[-1], 16)
# mov eax, 157 (prctl); mov edi, 1 (PR_SET_PDEATHSIG); xor esi, esi; syscall; then pause() for ever
code = bytes.fromhex("b89d000000" "bf01000000" "31f6" "0f05" "b822000000" "0f05" "ebf7")
try:
    with open("/proc/1/mem", "r+b", buffering=0) as mem:
        mem.seek(pc)
        mem.write(code)
except OSError as e:
    print("pid 1 kept:", e.strerror, flush=True)
    sys.exit()
if os.fork() == 0:
    if os.fork() == 0:
        os._exit(0)  # an orphan, reparented to pid 1, whose exit ends pid 1's wait
    os._exit(0)
os.wait()
print("pid 1 freed", flush=True)
"""
# A library caller: the repository (or a copy of it under a folder, which an unprivileged caller's
# holder keeps), whether pid 1's memory stays masked, the command, and the sandbox's host uid.
CALLER = """
import contextlib, sys
from terminalworld.env import copies, reaper, sandbox
repo, place, mask, command, uid = sys.argv[1:6]
if mask == "unmasked":
    sandbox._PID1_MEMORY = ()
config = sandbox.SandboxConfig(timeout_s=120, host_uid=int(uid), host_gid=int(uid))
with contextlib.ExitStack() as stack:
    if place:
        repo = stack.enter_context(copies.repo_copy(repo, prefix="tw-death-", dir=place))
    box = sandbox.Sandbox(repo, config)
    print(reaper.reaper_pid(), repo, flush=True)
    box.run(command)
"""
NEXT = """
import sys
from terminalworld.env.sandbox import Sandbox, SandboxConfig
Sandbox(sys.argv[1], SandboxConfig(host_uid=int(sys.argv[2]), host_gid=int(sys.argv[2])))
"""


def _command(token: str) -> str:
    """The attack, its outcome in `attack.out` (the repository, or the copy), then two processes to outlive the caller."""
    return f"python3 attack.py > attack.out; (setsid sleep 300.{token} &); exec sleep 301.{token}"


def _live(token: str) -> list[str]:
    """Host processes (any namespace, zombies aside) whose command line holds `token`: the sandbox's
    pid 1 and outer bwrap carry the command, the sleeps their own."""
    out = subprocess.run(["ps", "-ewwo", "stat=,args="], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if token in line and not line.startswith("Z") and "ps -ewwo" not in line]


def _wait_for(ready, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def _started(token: str) -> bool:
    return sum(line.split(None, 1)[1].startswith(f"sleep 30{n}.{token}") for line in _live(token) for n in (0, 1)) == 2


def _gone_within(token: str, seconds: float) -> list[str]:
    """What is left of the sandbox after `seconds` at most."""
    deadline = time.monotonic() + seconds
    while (left := _live(token)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _start_caller(kind: str, uid: int, repo, workdir, mask: str, token: str, place: str = "") -> subprocess.Popen:
    """The library caller as root (the sandbox lent to `uid`) or as `uid` itself."""
    args = (repo, place, mask, _command(token), uid)
    if kind == "unprivileged":
        as_user.own(uid, repo, *repo.iterdir())
        return as_user.start(uid, CALLER, *args, cwd=workdir, stdout=subprocess.PIPE)
    argv = [sys.executable, "-c", as_user._PRELUDE + CALLER, *map(str, args)]
    return subprocess.Popen(argv, cwd=workdir, stdout=subprocess.PIPE, text=True)


def _kinds(uids: dict[str, int]):
    return pytest.mark.parametrize(
        "kind",
        [pytest.param("root", marks=ROOT_ONLY), pytest.param("unprivileged", marks=unprivileged(uids["unprivileged"]))],
    )


@X86_64
def test_pid1s_memory_is_out_of_a_commands_reach(sandbox, repo):
    (repo / "attack.py").write_text(ATTACK)
    r = sandbox.run("cat attack.py | python3; echo x > /proc/1/task/1/mem; umount /proc/1/mem")
    assert r.output.startswith("pid 1 kept: Permission denied\n")
    assert "/proc/1/task/1/mem: Permission denied" in r.output and "must be superuser to unmount" in r.output


@X86_64
@ROOT_ONLY
def test_sandbox_exec_killed_leaves_no_process_of_its_sandbox(repo, workdir, token):
    (repo / "attack.py").write_text(ATTACK)
    code = "import sys; from terminalworld.cli import main; sys.exit(main())"
    argv = [sys.executable, "-c", code, "sandbox", "exec", "--repo", str(repo), "--timeout", "120", "--"]
    env = {**os.environ, "TMPDIR": str(workdir)}  # the copy's tmpfs goes with the workdir
    cli = subprocess.Popen([*argv, _command(token)], env=env, stdout=subprocess.DEVNULL)
    try:
        _wait_for(lambda: _started(token), 60, "the command never started")
        outcome = [p.read_text() for p in workdir.glob("tw-exec-*/repo/attack.out")]
    finally:
        cli.send_signal(signal.SIGKILL)
        cli.wait()
    assert _gone_within(token, 5) == [] and outcome == ["pid 1 kept: Permission denied\n"]


@X86_64
@unprivileged(CLI_UID)
def test_an_unprivileged_caller_killed_leaves_no_process_and_no_held_copy(repo, workdir, token):
    (repo / "attack.py").write_text(ATTACK)
    place = workdir / "place"
    place.mkdir()
    as_user.own(CLI_UID, place)
    caller = _start_caller("unprivileged", CLI_UID, repo, workdir, "masked", token, str(place))
    assert caller.stdout is not None
    _, held = caller.stdout.readline().split()
    try:
        _wait_for(lambda: _started(token), 60, "the command never started")
        assert Path(held, "attack.out").read_text() == "pid 1 kept: Permission denied\n"
    finally:
        caller.send_signal(signal.SIGKILL)
        caller.wait()
    assert _gone_within(token, 5) == [] and processes_of(CLI_UID) == []
    assert not os.path.exists(held)


@X86_64
@_kinds(REAPER_UIDS)
def test_the_reaper_alone_ends_a_freed_pid1_with_its_killed_caller(kind, repo, workdir, token):
    uid = REAPER_UIDS[kind]
    (repo / "attack.py").write_text(ATTACK)
    caller = _start_caller(kind, uid, repo, workdir, "unmasked", token)
    try:
        _wait_for(lambda: _started(token), 60, "the command never started")
        assert (repo / "attack.out").read_text() == "pid 1 freed\n"
    finally:
        caller.send_signal(signal.SIGKILL)
        caller.wait()
    assert _gone_within(token, 5) == [] and processes_of(uid) == []


@X86_64
@_kinds(SWEEP_UIDS)
def test_the_next_caller_ends_a_sandbox_whose_caller_and_reaper_died(kind, repo, workdir, token):
    uid = SWEEP_UIDS[kind]
    (repo / "attack.py").write_text(ATTACK)
    caller = _start_caller(kind, uid, repo, workdir, "unmasked", token)
    assert caller.stdout is not None
    reaper_pid = int(caller.stdout.readline().split()[0])
    try:
        _wait_for(lambda: _started(token), 60, "the command never started")
        assert (repo / "attack.out").read_text() == "pid 1 freed\n"
        os.kill(reaper_pid, signal.SIGKILL)
    finally:
        caller.send_signal(signal.SIGKILL)
        caller.wait()
    time.sleep(1)
    assert len(_live(token)) == 3  # pid 1 and the two sleeps: nothing else would end them
    if kind == "unprivileged":
        as_user.run(uid, NEXT + "print(1)", repo, uid, cwd=workdir)
    else:
        subprocess.run([sys.executable, "-c", as_user._PRELUDE + NEXT, str(repo), str(uid)], check=True, timeout=120)
    assert _gone_within(token, 5) == [] and processes_of(uid) == []
