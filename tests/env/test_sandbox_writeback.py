"""`sandbox exec --repo DIR` runs over a capped copy of DIR and writes the result back only when the
command ended within its caps (`env.syncback`), as root (the copy on its own tmpfs mounted on the
host) and unprivileged (the same tmpfs held in a user and mount namespace of the caller's own,
`env.holder`): the kernel holds the cap either way. Past the cap, or when the result cannot be
written back (hard links, depth), or after a timeout, DIR is left exactly as it was; within it,
nothing the command planted (symlinks, FIFOs, setuid bits, modes, sparse files, odd names) is
followed, kept or blown up. Eight writers bursting at once under a 20 MiB cap grow the copy by at
most the cap (measured inside by `du`, before and after), for both callers. A result that changed
what git runs or reads as configuration (`core.fsmonitor`, a hook) is refused whole, so the
operator's `git status` and `git checkout` in DIR run nothing the command wrote, while a commit made
inside comes back; a mode changed inside never reaches an inode hard-linked from outside DIR and
comes back within the caller's umask.
"""

import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

from terminalworld.cli import main
from terminalworld.env import syncback
from terminalworld.env.sandbox import SandboxConfig
from terminalworld.errors import InputError

from . import as_user
from .as_user import unprivileged

CAP = 20 << 20
OWNER_UID = 54326  # the folder's owner in the root test (unused by any other test)
WRITEBACK_UID = 54327  # the unprivileged caller
HOSTILE = (
    "echo changed > a.txt; rm b.txt; echo new > n.txt; rm out; echo x > out; "
    "rm dir_link; mkdir dir_link; echo x > dir_link/f; ln -s /etc/passwd pw; mkfifo ff; "
    "mkdir -p d/e; echo deep > d/e/f; chmod 0 d; truncate -s 16M sparse; "
    "printf z > \"$(printf 'odd\\nname\\033')\"; printf y > $'\\xff\\xfe'; "
    "cp /bin/true suid; chmod 4755 suid; echo r > ro.txt; chmod 0 ro.txt"
)
COMMANDS = {
    "hostile": HOSTILE,
    # Eight processes at once, each trying the whole cap: the copy's tmpfs refuses what is past it.
    "writers": "du -sB1 .; for i in 1 2 3 4 5 6 7 8; do head -c 20M /dev/zero > w$i & done; wait; du -sB1 .",
    "links": "head -c 4M /dev/urandom > big && for i in $(seq 40); do ln big l$i; done",  # 164 MiB as files
    "deep": f"for i in $(seq {syncback.MAX_DEPTH + 5}); do mkdir z && cd z || exit 1; done",
    "timeout": "echo partial > p; sleep 30",
}
CALLER = """
import json, sys
from terminalworld.env.sandbox import SandboxConfig
from terminalworld.env.syncback import run_written_back
from terminalworld.errors import InputError
try:
    r, kept = run_written_back(sys.argv[1], SandboxConfig(timeout_s=5, disk_bytes=int(sys.argv[3]), memory_bytes=512 << 20), sys.argv[2])
    print(json.dumps([r.output, r.returncode, list(r.limits), kept, None]))
except InputError as e:
    print(json.dumps([None, None, None, None, str(e)]))
"""


def _layout(repo: Path, outside: Path) -> None:
    (repo / "b.txt").write_text("keep\n")
    (outside / "victim").write_text("victim\n")
    (outside / "folder").mkdir()
    (repo / "out").symlink_to(outside / "victim")
    (repo / "dir_link").symlink_to(outside / "folder")


def _snapshot(repo: Path) -> dict:
    """Every entry of `repo` (no link followed): type, mode, owner, mtime and contents or link text."""
    seen = {}
    for here, dirs, files in os.walk(repo):
        for name in dirs + files:
            p = os.path.join(here, name)
            st = os.lstat(p)
            body = (
                os.readlink(p) if stat.S_ISLNK(st.st_mode) else Path(p).read_bytes() if stat.S_ISREG(st.st_mode) else ""
            )
            seen[os.path.relpath(p, repo)] = (st.st_mode, st.st_uid, st.st_mtime_ns, body)
    return seen


def _run_root(repo: Path, command: str):
    try:
        r, kept = syncback.run_written_back(str(repo), SandboxConfig(timeout_s=5, disk_bytes=CAP), command)
        return [r.output, r.returncode, list(r.limits), kept, None]
    except InputError as e:
        return [None, None, None, None, str(e)]


def _check(repo: Path, outside: Path, outcomes: dict, before: dict, owner: int) -> None:
    output, status, limits, kept, error = outcomes["hostile"]
    assert (status, kept, error) == (0, None, None), output
    assert (repo / "a.txt").read_text() == "changed\n" and not (repo / "b.txt").exists()
    assert (repo / "n.txt").read_text() == "new\n"
    # DIR's own links were replaced, never written through; the planted one is a link, not a copy.
    assert (repo / "out").read_text() == "x\n" and not (repo / "out").is_symlink()
    assert (outside / "victim").read_text() == "victim\n" and os.listdir(outside / "folder") == []
    assert (repo / "dir_link" / "f").read_text() == "x\n" and not (repo / "dir_link").is_symlink()
    assert os.readlink(repo / "pw") == "/etc/passwd"
    assert not os.path.lexists(repo / "ff")  # a FIFO is not written back
    assert stat.S_IMODE((repo / "d").stat().st_mode) == 0o700 and (repo / "d/e/f").read_text() == "deep\n"
    assert (repo / "sparse").stat().st_size == 16 << 20 and (repo / "sparse").stat().st_blocks * 512 < 1 << 20
    assert (repo / "odd\nname\x1b").read_text() == "z" and b"\xff\xfe" in os.listdir(bytes(repo))
    assert stat.S_IMODE((repo / "suid").stat().st_mode) == 0o755  # no setuid bit
    assert stat.S_IMODE((repo / "ro.txt").stat().st_mode) == 0o400
    assert not [n for n in os.listdir(repo) if n.startswith(".tw-sync-")]
    assert {str(p): os.lstat(p).st_uid for p in [repo, *repo.rglob("*")] if os.lstat(p).st_uid != owner} == {}
    after_hostile = _snapshot(repo)
    assert before != after_hostile
    # Past the cap, when the result cannot be written back, or after a timeout: DIR exactly as it was.
    output, status, limits, kept, error = outcomes["writers"]
    assert "disk" in limits and "nothing was written back" in kept
    # The kernel held the cap over eight writers at once: the copy grew by the cap, not 8x it.
    start, end = map(int, re.findall(r"^(\d+)\t\.$", output, re.MULTILINE))
    assert CAP - (1 << 20) < end - start <= CAP, (start, end)
    output, status, limits, kept, error = outcomes["links"]
    assert "more than the disk cap allows" in error and "nothing was written back" in error
    output, status, limits, kept, error = outcomes["deep"]
    assert f"more than {syncback.MAX_DEPTH}" in str(error) and "nothing was written back" in error, outcomes["deep"]
    output, status, limits, kept, error = outcomes["timeout"]
    assert status == 124 and "timed out" in kept and not (repo / "p").exists()
    assert _snapshot(repo) == after_hostile


@pytest.fixture
def outside(workdir):
    o = workdir / "outside"
    o.mkdir()
    return o


def test_a_root_caller_writes_back_only_within_the_cap(repo, outside):
    _layout(repo, outside)
    as_user.own(OWNER_UID, repo, *repo.iterdir())
    before = _snapshot(repo)
    outcomes = {name: _run_root(repo, command) for name, command in COMMANDS.items()}
    _check(repo, outside, outcomes, before, OWNER_UID)


@unprivileged(WRITEBACK_UID)
def test_an_unprivileged_caller_writes_back_only_within_the_cap(repo, outside, workdir):
    _layout(repo, outside)
    as_user.own(WRITEBACK_UID, repo, *repo.iterdir())
    before = _snapshot(repo)
    outcomes = {
        name: as_user.run(WRITEBACK_UID, CALLER, repo, command, CAP, cwd=workdir) for name, command in COMMANDS.items()
    }
    _check(repo, outside, outcomes, before, WRITEBACK_UID)


def test_exec_says_when_nothing_was_written_back(repo, capsys):
    before = _snapshot(repo)
    status = main(["sandbox", "exec", "--repo", str(repo), "--disk-mb", "20", "--", COMMANDS["writers"]])
    out, err = capsys.readouterr()
    assert status == 1 and "disk limit reached" in out
    assert err == f"sandbox exec: it reached the disk limit: nothing was written back, {repo} is as it was\n"
    assert _snapshot(repo) == before
    assert main(["sandbox", "exec", "--repo", str(repo), "--disk-mb", "20", "--", COMMANDS["links"]]) == 2
    assert "more than the disk cap allows" in capsys.readouterr().err and _snapshot(repo) == before
    os.mkfifo(repo / "fifo")  # copying it would block: refused in one line, before any command runs
    assert main(["sandbox", "exec", "--repo", str(repo), "--", "touch x"]) == 2
    assert "cannot be copied" in capsys.readouterr().err and not (repo / "x").exists()


# What the operator's git would run, planted inside; and a commit, which must still come back.
GIT_COMMANDS = {
    "fsmonitor": 'git config core.fsmonitor "touch PWNED; false"',
    "hook": "printf '#!/bin/sh\\ntouch PWNED\\n' > .git/hooks/post-checkout && chmod 755 .git/hooks/post-checkout",
    "commit": "echo two > a.txt && git add a.txt && git -c user.name=t -c user.email=t@example.com commit -qm two",
}
# Under umask 022: a chmod on a file hard-linked from outside DIR, and modes widened inside.
MODES = "chmod 666 linked && chmod 777 wide && echo n > new && chmod 777 new && mkdir dd && chmod 1777 dd"


def _host_git(repo: Path, *args: str, uid: int | None = None) -> str:
    """The operator's git in `repo` (as `uid`), with no system or global configuration of this host."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(repo.parent),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
    }
    who = {} if uid is None else {"user": uid, "group": uid, "extra_groups": []}
    proc = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, timeout=60, **who)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _git_repo(repo: Path, uid: int | None) -> bytes:
    """A repository of one commit in `repo` (owned by `uid`), and its `.git/config`."""
    _host_git(repo, "init", "-q")
    _host_git(repo, "add", "a.txt")
    _host_git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init")
    if uid is not None:
        as_user.own(uid, repo, *repo.rglob("*"))
    return (repo / ".git/config").read_bytes()


def _check_git(repo: Path, workdir: Path, config: bytes, refusals: dict, uid: int | None) -> None:
    """`refusals`: what refused each of `GIT_COMMANDS` (None when it was written back); `config`:
    `.git/config` before."""
    _host_git(repo, "status", uid=uid)
    _host_git(repo, "checkout", "-q", "-b", "other", uid=uid)
    assert not (repo / "PWNED").exists() and not (workdir / "PWNED").exists()
    assert (repo / ".git/config").read_bytes() == config
    assert not (repo / ".git/hooks/post-checkout").exists()
    assert "'.git/config'" in refusals["fsmonitor"] and "nothing was written back" in refusals["fsmonitor"]
    assert "'.git/hooks/post-checkout'" in refusals["hook"] and "nothing was written back" in refusals["hook"]
    assert refusals["commit"] is None and _host_git(repo, "log", "--format=%s", uid=uid) == "two\ninit\n"


def _layout_modes(repo: Path, outside: Path, uid: int | None) -> None:
    (outside / "linked").write_text("shared\n")
    os.chmod(outside / "linked", 0o600)
    os.link(outside / "linked", repo / "linked")
    (repo / "wide").write_text("w\n")
    os.chmod(repo / "wide", 0o644)
    if uid is not None:
        as_user.own(uid, repo, *repo.iterdir())


def _check_modes(repo: Path, outside: Path) -> None:
    def mode(p: Path) -> int:
        return stat.S_IMODE(os.lstat(p).st_mode)

    # The outside name's inode is untouched; DIR's name is a file of its own with the new mode.
    assert mode(outside / "linked") == 0o600 and (outside / "linked").read_text() == "shared\n"
    assert mode(repo / "linked") == 0o644 and (repo / "linked").read_text() == "shared\n"
    assert os.lstat(repo / "linked").st_ino != os.lstat(outside / "linked").st_ino
    assert (mode(repo / "wide"), mode(repo / "new"), mode(repo / "dd")) == (0o755, 0o755, 0o755)


@pytest.fixture
def umask022():
    old = os.umask(0o022)  # an unprivileged caller started from here inherits it
    yield
    os.umask(old)


def _exec(repo: Path, command: str, capsys) -> str | None:
    """`sandbox exec --repo repo -- command`: None when it wrote back, else what it printed on stderr."""
    status = main(["sandbox", "exec", "--repo", str(repo), "--", command])
    err = capsys.readouterr().err
    assert (status, err) == (0, "") or status == 2, err
    return None if status == 0 else err


def test_a_root_caller_never_writes_back_git_configuration(repo, workdir, capsys):
    config = _git_repo(repo, None)  # owned by root, which runs the operator's git in it
    refusals = {name: _exec(repo, command, capsys) for name, command in GIT_COMMANDS.items()}
    _check_git(repo, workdir, config, refusals, None)


@unprivileged(WRITEBACK_UID)
def test_an_unprivileged_caller_never_writes_back_git_configuration(repo, workdir):
    config = _git_repo(repo, WRITEBACK_UID)
    refusals = {}
    for name, command in GIT_COMMANDS.items():
        output, status, _, kept, error = as_user.run(WRITEBACK_UID, CALLER, repo, command, CAP, cwd=workdir)
        assert error is not None or (status, kept) == (0, None), output
        refusals[name] = error
    _check_git(repo, workdir, config, refusals, WRITEBACK_UID)


# The operator's own configuration names files of the worktree: a hooks folder and an included
# config. A command writing them is refused; one changing anything else comes back.
CONFIGURED = {
    "hook": "mkdir .husky && printf '#!/bin/sh\\ntouch PWNED\\n' > .husky/post-checkout && chmod 755 .husky/post-checkout",
    "include": "printf '[core]\\n\\tfsmonitor = \"touch PWNED; false\"\\n' > extra.gitconfig",
    "edit": "echo three > a.txt",
}


def _configured_repo(repo: Path, uid: int | None) -> dict[str, bytes]:
    """`_git_repo` with `core.hooksPath .husky` and `include.path` of `extra.gitconfig` in the worktree,
    set by the operator before the run; what the files git reads as configuration hold."""
    _git_repo(repo, None)
    (repo / "extra.gitconfig").write_text("[user]\n\tname = t\n")
    _host_git(repo, "config", "core.hooksPath", ".husky")
    _host_git(repo, "config", "include.path", os.path.join("..", "extra.gitconfig"))
    if uid is not None:
        as_user.own(uid, repo, *repo.rglob("*"))
    return {name: (repo / name).read_bytes() for name in (".git/config", "extra.gitconfig")}


def _check_configured(repo: Path, workdir: Path, before: dict, refusals: dict, uid: int | None) -> None:
    _host_git(repo, "status", uid=uid)
    _host_git(repo, "checkout", "-q", "-b", "x", uid=uid)
    assert not (repo / "PWNED").exists() and not (workdir / "PWNED").exists()
    assert {name: (repo / name).read_bytes() for name in before} == before
    assert not (repo / ".husky").exists()
    assert "'.husky'" in refusals["hook"] and "nothing was written back" in refusals["hook"]
    assert "'extra.gitconfig'" in refusals["include"] and "nothing was written back" in refusals["include"]
    assert refusals["edit"] is None and (repo / "a.txt").read_text() == "three\n"


def test_a_root_caller_never_writes_back_what_the_operators_configuration_names(repo, workdir, capsys):
    before = _configured_repo(repo, None)
    refusals = {name: _exec(repo, command, capsys) for name, command in CONFIGURED.items()}
    _check_configured(repo, workdir, before, refusals, None)


@unprivileged(WRITEBACK_UID)
def test_an_unprivileged_caller_never_writes_back_what_the_operators_configuration_names(repo, workdir):
    before = _configured_repo(repo, WRITEBACK_UID)
    refusals = {}
    for name, command in CONFIGURED.items():
        output, status, _, kept, error = as_user.run(WRITEBACK_UID, CALLER, repo, command, CAP, cwd=workdir)
        assert error is not None or (status, kept) == (0, None), output
        refusals[name] = error
    _check_configured(repo, workdir, before, refusals, WRITEBACK_UID)


def test_a_root_caller_writes_modes_back_as_new_files_within_its_umask(repo, outside, umask022, capsys):
    _layout_modes(repo, outside, None)
    assert _exec(repo, MODES, capsys) is None
    _check_modes(repo, outside)


@unprivileged(WRITEBACK_UID)
def test_an_unprivileged_caller_writes_modes_back_as_new_files_within_its_umask(repo, outside, workdir, umask022):
    _layout_modes(repo, outside, WRITEBACK_UID)
    output, status, _, kept, error = as_user.run(WRITEBACK_UID, CALLER, repo, MODES, CAP, cwd=workdir)
    assert (status, kept, error) == (0, None, None), output
    _check_modes(repo, outside)
