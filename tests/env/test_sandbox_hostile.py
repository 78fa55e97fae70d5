"""The attacks of a review that assumed a command fights back: against its own processes (ptrace),
against host-side code that walks, hands back or reads what it wrote, and against limits only
user space counted. Each runs as its own host uid, so "no process of that uid is left" is exact,
and checks canaries outside the copy (owner, mode, contents) afterwards.
"""

import contextlib
import ctypes
import os
import platform
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from terminalworld.env.sandbox import Sandbox, SandboxConfig, memory_limit_kind
from terminalworld.errors import VerifierError
from terminalworld.tasks.layout import verify

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="lends the copy to another uid, which needs root")
X86_64 = pytest.mark.skipif(platform.machine() != "x86_64", reason="the injector speaks x86_64")

# Attach to the sandbox's pid 1 and make it run prctl(PR_SET_PDEATHSIG, 0) in place of its wait4,
# so that it no longer dies with the host's bwrap: the review's escape from the deadline.
INJECT = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
names = "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss fs_base gs_base ds es fs gs"
Regs = type("Regs", (ctypes.Structure,), {"_fields_": [(n, ctypes.c_ulonglong) for n in names.split()]})
if libc.ptrace(0x4206, 1, None, None) != 0 or libc.ptrace(0x4207, 1, None, None) != 0:
    print("ptrace:", os.strerror(ctypes.get_errno()))
else:
    os.waitpid(1, 0x40000000)
    saved, regs = Regs(), Regs()
    libc.ptrace(12, 1, None, ctypes.byref(saved))
    ctypes.memmove(ctypes.byref(regs), ctypes.byref(saved), ctypes.sizeof(Regs))
    regs.rip, regs.rax, regs.rdi, regs.rsi, regs.orig_rax = saved.rip - 2, 157, 1, 0, 2**64 - 1
    libc.ptrace(13, 1, None, ctypes.byref(regs))
    libc.ptrace(9, 1, None, None)
    os.waitpid(1, 0x40000000)
    saved.rip, saved.rax, saved.orig_rax = saved.rip - 2, saved.orig_rax, 2**64 - 1
    libc.ptrace(13, 1, None, ctypes.byref(saved))
    libc.ptrace(17, 1, None, None)
    print("pid 1 freed")
"""


def processes_of(uid: int) -> list[str]:
    """Live processes of host `uid`. A sandbox's pid 1, once dead, may stay a zombie until the host's
    init reaps it (bwrap exits on its command's status before its pid 1 is reaped): dead, not left."""
    out = subprocess.run(["ps", "-u", str(uid), "-o", "stat=,pid=,args="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if not line.startswith("Z")]


@pytest.fixture
def canary(workdir):
    """A host file outside the copy, owned by another uid, with a mode and contents to compare."""
    path = workdir / "canary"
    path.write_text("host data\n")
    os.chmod(path, 0o640)
    if os.geteuid() == 0:
        os.chown(path, 4242, 4242)
    before = os.lstat(path)

    def unchanged() -> bool:
        now = os.lstat(path)
        same = (now.st_uid, now.st_gid, now.st_mode) == (before.st_uid, before.st_gid, before.st_mode)
        return same and path.read_text() == "host data\n"

    return unchanged


def make(repo: Path, uid: int, **config) -> Sandbox:
    return Sandbox(str(repo), SandboxConfig(**{"timeout_s": 5.0, "host_uid": uid, "host_gid": uid, **config}))


@X86_64
@ROOT_ONLY
def test_a_command_that_frees_pid1_does_not_outlive_its_deadline(repo, workdir, canary):
    uid = 61001
    (repo / "inject.py").write_text(INJECT)
    sandbox = make(repo, uid, timeout_s=2.0, disk_bytes=20 << 20)
    start = time.monotonic()
    r = sandbox.run(
        "python3 inject.py; (setsid sh -c 'sleep 4; head -c 60000000 /dev/zero > late' &); "
        "cat /proc/1/cmdline | tr '\\0' ' '; sleep 100"
    )
    assert r.returncode == 124 and r.timed_out and time.monotonic() - start < 10
    assert processes_of(uid) == []
    time.sleep(4)
    assert not (repo / "late").exists() and processes_of(uid) == [] and canary()
    assert "ptrace: Operation not permitted" in r.output and "pid 1 freed" not in r.output
    assert str(repo) not in r.output and str(workdir) not in r.output  # no host path in pid 1's command line


SWAP = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = sys.argv[1].encode(), sys.argv[2].encode()
print("swapping", flush=True)
while True:
    libc.renameat2(-100, a, -100, b, 2)  # AT_FDCWD, RENAME_EXCHANGE
"""


@contextlib.contextmanager
def swapping(a: Path, b: Path):
    """A survivor's move, from a process of its own (racing the host's walks at full speed, as a
    command's process would): swap a folder of the copy with a symlink out of it, over and over."""
    proc = subprocess.Popen([sys.executable, "-c", SWAP, str(a), str(b)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "swapping\n"
        yield
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def not_handed_to(root: Path, uid: int, gid: int) -> list[str]:
    """Entries of `root` (itself included; symlinks themselves, never followed) that are not owned by
    `uid`/`gid` or keep a setuid or setgid bit: what a hand-over or hand-back failed to do."""
    paths = [root]
    for folder, dirs, files in os.walk(root):
        paths += [Path(folder, name) for name in dirs + files]
    found = [(p, os.lstat(p)) for p in paths]
    return [
        f"{p} {st.st_uid}:{st.st_gid} {st.st_mode:o}"
        for p, st in found
        if (st.st_uid, st.st_gid) != (uid, gid) or (not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o6000)
    ]


def host_state(folder: Path) -> dict[str, tuple]:
    """Owner, group, mode and contents of `folder` and every entry in it (a canary folder outside a copy)."""
    state = {".": (os.lstat(folder).st_uid, os.lstat(folder).st_gid, os.lstat(folder).st_mode, None)}
    for p in folder.iterdir():
        st = os.lstat(p)
        state[p.name] = (st.st_uid, st.st_gid, st.st_mode, p.read_bytes() if stat.S_ISREG(st.st_mode) else None)
    return state


def setid(path: Path, owner: int) -> None:
    """Make `path` a setuid and setgid file of `owner` (the hand-over or hand-back then has no owner to
    change, which would clear the bits by itself: it must clear them)."""
    os.chown(path, owner, owner)
    os.chmod(path, 0o6755)


@ROOT_ONLY
def test_hand_over_and_back_never_touch_what_a_swapped_symlink_points_to(repo, workdir, canary):
    uid = 61002
    outside = workdir / "outside"  # host files a walk through the swapped symlink would reach
    outside.mkdir()
    (repo / "d").mkdir()
    for i in range(3000):
        (repo / "d" / f"f{i}").write_text("x")
        (outside / f"f{i}").write_text(f"host {i}\n")
        os.chown(outside / f"f{i}", 4242, 4243)
        os.chmod(outside / f"f{i}", 0o6755 if i % 2 else 0o640)  # a walk that ran outside would clear these bits
    os.chown(outside, 4242, 4243)
    os.chmod(outside, 0o750)
    os.symlink(outside, repo / "s")
    kept = [repo / f"k{k}" for k in range(4)]  # folders the swap never moves: handed over and back even while it races
    for k in kept:
        k.mkdir()
        (k / "plain").write_text("x")
        (k / "setid").write_text("#!/bin/sh\n")
        os.symlink(outside / "f1", k / "link")
    before = host_state(outside)
    sandbox = make(repo, uid)
    with swapping(repo / "d", repo / "s"):
        for _ in range(3):
            for k in kept:
                setid(k / "setid", uid)
            sandbox.claim_repo()
            assert [bad for k in kept for bad in not_handed_to(k, uid, uid)] == []
            for k in kept:
                setid(k / "setid", 0)
            sandbox.give_back(0, 0)
            assert [bad for k in kept for bad in not_handed_to(k, 0, 0)] == []
    # The sandbox hands back only once the command's processes are gone: with the swapper stopped,
    # one hand-back reaches the whole copy, wherever the swap left the folder and the symlink.
    moved = next(p for p in (repo / "d", repo / "s") if stat.S_ISDIR(os.lstat(p).st_mode))
    setid(moved / "f0", 0)
    setid(moved / "f1", uid)
    sandbox.give_back(0, 0)
    assert not_handed_to(repo, 0, 0) == [] and len(os.listdir(moved)) == 3000
    assert {os.readlink(k / "link") for k in kept} == {str(outside / "f1")}
    assert host_state(outside) == before and canary()


@ROOT_ONLY
@pytest.mark.parametrize("move", ["swapped", "removed"])
def test_a_folder_moved_mid_hand_back_is_skipped_and_the_rest_handed_back(repo, workdir, canary, monkeypatch, move):
    """The swap test's race made certain: a racing process rarely lands between the walk's listing of
    a folder and its step into it, so here the folder is swapped for the symlink out of the copy, or
    removed, exactly then (as the hand-back changes its owner). The hand-back must neither raise nor
    stop half way (issue 22, D4), nor follow the symlink."""
    uid = 61006 if move == "swapped" else 61007
    outside = workdir / "outside"
    outside.mkdir()
    (repo / "d").mkdir()
    for i in range(20):
        (repo / "d" / f"f{i}").write_text("x")
        (outside / f"f{i}").write_text(f"host {i}\n")
        os.chown(outside / f"f{i}", 4242, 4243)
        os.chmod(outside / f"f{i}", 0o6755)
    os.symlink(outside, repo / "s")
    kept = [repo / f"k{k}" for k in range(4)]
    for k in kept:
        k.mkdir()
        (k / "setid").write_text("#!/bin/sh\n")
        os.symlink(outside / "f1", k / "link")
    before = host_state(outside)
    sandbox = make(repo, uid)
    for k in kept:
        setid(k / "setid", 0)
    chown, moved = os.chown, []

    def racing_chown(path, *args, **kwargs):
        if path == "d" and not moved:
            moved.append(path)
            if move == "swapped":
                libc = ctypes.CDLL(None, use_errno=True)
                assert libc.renameat2(-100, bytes(repo / "d"), -100, bytes(repo / "s"), 2) == 0  # RENAME_EXCHANGE
            else:
                shutil.rmtree(repo / "d")
        return chown(path, *args, **kwargs)

    monkeypatch.setattr(os, "chown", racing_chown)
    sandbox.give_back(0, 0)
    monkeypatch.undo()
    assert moved and not_handed_to(repo / "a.txt", 0, 0) == [] and os.lstat(repo).st_uid == 0
    assert [bad for k in kept for bad in not_handed_to(k, 0, 0)] == []
    assert host_state(outside) == before and canary()
    sandbox.give_back(0, 0)  # once nothing races, the rest follows
    assert not_handed_to(repo, 0, 0) == [] and host_state(outside) == before


@ROOT_ONLY
def test_paths_beyond_path_max_count_against_the_disk_cap_and_are_handed_back(repo, workdir, canary):
    uid = 61003
    owner = os.lstat(repo)
    deep = (
        "import os, shutil\nfor _ in range(2100):\n    os.mkdir('ab'); os.chdir('ab')\n"
        "shutil.copy('/bin/bash', 'sh'); os.chmod('sh', 0o6777)\n"
        "with open('fill', 'wb') as f:\n    f.write(b'x' * (40 << 20))\nprint('written')\n"
    )
    (repo / "deep.py").write_text(deep)
    r = make(repo, uid, disk_bytes=10 << 20).run("python3 deep.py")
    # A plain folder is the walk's (the kernel's cap on a copy's own tmpfs is test_sandbox_copies'):
    # the walk polls, so a write faster than a poll ends first, and the growth is still counted; a
    # single write past what is left of the cap is refused by RLIMIT_FSIZE (Python's exit 1, EFBIG).
    assert "disk" in r.limits and r.returncode in (0, 1, 137)
    assert r.returncode != 1 or "File too large" in r.output or "disk" in r.output
    make(repo, uid).give_back(owner.st_uid, owner.st_gid)
    found = subprocess.run(
        ["find", str(repo), "-perm", "/6000", "-o", "!", "-uid", str(owner.st_uid)], capture_output=True
    )
    assert found.stdout == b"" and processes_of(uid) == [] and canary()


@ROOT_ONLY
def test_hard_links_each_count_as_an_entry(repo):
    script = "import os\nopen('f', 'w').close()\nfor i in range(4000):\n    os.link('f', f'l{i}')\nprint('linked')\n"
    (repo / "links.py").write_text(script)
    r = make(repo, 61004, disk_bytes=8 << 20).run("python3 links.py")
    assert "disk" in r.limits


@ROOT_ONLY
def test_memfd_memory_is_charged_to_the_command(repo):
    script = (
        "import os\nchunk, fds = b'x' * (1 << 20), [os.memfd_create(f'm{i}') for i in range(8)]\n"
        "for fd in fds:\n    for _ in range(60):\n        os.write(fd, chunk)\nprint('held 480 MiB')\n"
    )
    (repo / "memfd.py").write_text(script)
    kind = memory_limit_kind()
    if kind == "rlimit":
        pytest.skip("no usable memory controller (memory_limit_kind() is 'rlimit'): RLIMIT_AS does not count memfds")
    sandbox = make(repo, 61005, memory_bytes=256 << 20)
    assert kind in ("cgroup-v1", "cgroup-v2") and sandbox.memory_limit_kind == kind
    r = sandbox.run("python3 memfd.py")
    assert "held 480 MiB" not in r.output and "memory" in r.limits
    assert processes_of(61005) == []


def test_no_kernel_key_is_added_or_shared(make_sandbox):
    add = (
        'python3 -c "import ctypes, os; l = ctypes.CDLL(None, use_errno=True); '
        "s = l.syscall(248, b'user', b'tw-leak', b'secret', 6, -4); print(s, os.strerror(ctypes.get_errno()))\""
    )
    r = make_sandbox().run(add)
    assert r.output == "-1 Operation not permitted\n"
    assert "tw-leak" not in make_sandbox().run("cat /proc/keys 2>&1; keyctl show 2>&1").output


def _task(workdir: Path, plant: str) -> Path:
    """A task whose tests run code of the repository (as a real verifier does), which plants `plant`."""
    task = workdir / "task"
    (task / "tests").mkdir(parents=True, exist_ok=True)
    (task / "solution").mkdir(exist_ok=True)
    (task / "tests" / "test.sh").write_text("cd /testbed && bash plant.sh\n")
    return task


@pytest.fixture
def secret(workdir):
    path = workdir / "secret"
    path.write_text("1\n")
    os.chmod(path, 0o600)
    return path


@pytest.mark.parametrize(
    "plant",
    [
        "ln -sf {secret} /logs/verifier/reward.txt",
        "ln -sf /proc/sys/kernel/ostype /logs/verifier/reward.txt",
        "echo 2 > /logs/verifier/reward.txt",
        "echo nan > /logs/verifier/reward.txt",
        "head -c 1000000 /dev/zero | tr '\\0' '1' > /logs/verifier/reward.txt",
        "mkfifo /logs/verifier/reward.txt",
    ],
    ids=["symlink-to-host-file", "symlink-to-procfs", "out-of-range", "not-a-number", "huge", "fifo"],
)
def test_a_forged_reward_is_an_infrastructure_error(repo, workdir, secret, plant):
    (repo / "plant.sh").write_text(plant.format(secret=secret) + "\n")
    task = _task(workdir, plant)
    with pytest.raises(VerifierError) as err:
        verify(task, repo, config=SandboxConfig(timeout_s=10))
    assert "1\n" not in str(err.value).replace("1\\n", "") and secret.read_text() == "1\n"


def test_an_honest_reward_is_read(repo, workdir):
    (repo / "plant.sh").write_text("echo 0.5 > /logs/verifier/reward.txt\n")
    assert verify(_task(workdir, ""), repo) == 0.5
    (repo / "plant.sh").write_text("true\n")
    assert verify(_task(workdir, ""), repo) == 0.0  # no reward written: the tests did not pass


def test_exec_on_a_terminal_shows_control_characters_escaped(repo, capsys, monkeypatch):
    from terminalworld.cli import main

    command = r"printf '\033]0;pwned\007\033[2J\033]52;c;ZXZpbA==\007ok\n'"
    assert main(["sandbox", "exec", "--repo", str(repo), "--", command]) == 0
    raw = capsys.readouterr().out
    assert raw.startswith("\x1b]0;pwned")  # piped: the exact bytes, as an agent sees them
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert main(["sandbox", "exec", "--repo", str(repo), "--", command]) == 0
    shown = capsys.readouterr().out
    assert (
        "\x1b" not in shown
        and "\x07" not in shown
        and shown == "\\x1b]0;pwned\\x07\\x1b[2J\\x1b]52;c;ZXZpbA==\\x07ok\n"
    )


def test_copies_and_temporary_files_of_a_killed_run_are_removed_by_the_next(workdir):
    from terminalworld.core import scratch
    from terminalworld.core.records import atomic_output

    dead = subprocess.Popen(["true"])
    dead.wait()
    (workdir / f"tw-rec-{dead.pid}-abcd1234" / "repo").mkdir(parents=True)
    (workdir / f".rows.jsonl.{dead.pid}.abcd1234.tmp").write_text("partial")
    (workdir / f"tw-rec-{os.getppid()}-live1234").mkdir()  # a live process's copy stays
    (workdir / f".rows.jsonl.{dead.pid}.notes").write_text("not a temporary file")
    made = scratch.make_dir("tw-rec-", str(workdir))
    with atomic_output(str(workdir / "rows.jsonl")) as f:
        f.write(b"{}\n")
    names = sorted(p.name for p in workdir.iterdir())
    kept = [os.path.basename(made), f"tw-rec-{os.getppid()}-live1234", "rows.jsonl", f".rows.jsonl.{dead.pid}.notes"]
    assert names == sorted(kept)
    assert stat.S_ISDIR(os.lstat(made).st_mode)
