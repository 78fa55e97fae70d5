"""Repository copies whose disk cap is the kernel's (each its own capped tmpfs on a root host), and
their cleanup: at the end of their block, at SIGTERM, and by the next run after a SIGKILL."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from terminalworld.env import copies
from terminalworld.env.sandbox import Sandbox, SandboxConfig, disk_limit_kind

from .test_sandbox_hostile import processes_of

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
DEEP = "import os\nfor _ in range(3000):\n    os.mkdir('ab'); os.chdir('ab')\n"  # far past PATH_MAX


def copy_mounts() -> list[str]:
    """The copies' tmpfs mounts in this process's mount table (mount points)."""
    with open("/proc/self/mountinfo") as f:
        return [mount[1] for line in f if (mount := copies.copy_mount(line)) is not None]


@pytest.fixture
def source(workdir):
    src = workdir / "source"
    src.mkdir()
    (src / "a.txt").write_text("hello\n")
    (src / "link").symlink_to("a.txt")
    return src


@pytest.fixture
def canary(workdir):
    path = workdir / "canary"
    path.write_text("host data\n")
    before = os.lstat(path)
    return lambda: os.lstat(path)[:7] == before[:7] and path.read_text() == "host data\n"


@ROOT_ONLY
def test_a_flood_and_a_tree_past_path_max_stop_at_the_kernels_cap(source, workdir, canary):
    uid = 61101
    config = SandboxConfig(timeout_s=20, disk_bytes=10 << 20, host_uid=uid, host_gid=uid)
    assert disk_limit_kind() == "tmpfs"
    with copies.repo_copy(str(source), prefix="tw-cap-", dir=str(workdir), disk_bytes=config.disk_bytes) as repo:
        assert copies.mount_of(repo) == os.path.dirname(repo) and os.readlink(f"{repo}/link") == "a.txt"
        sandbox = Sandbox(repo, config)
        assert sandbox.disk_limit_kind == "tmpfs"
        flood = sandbox.run("dd if=/dev/zero of=big bs=1M count=40; echo exit $?; ls -l big")
        assert "No space left on device" in flood.output and "exit 1" in flood.output
        assert "disk" in flood.limits and flood.returncode == 0  # the command's own status: nothing killed it
        assert 9 << 20 <= os.path.getsize(f"{repo}/big") <= 10 << 20
        sandbox.run("rm big")
        deep = sandbox.run(f'python3 -c "{DEEP}"; echo exit $?')
        assert "OSError: [Errno 28] No space left on device" in deep.output and "disk" in deep.limits
        links = sandbox.run("rm -rf ab; touch f; for i in $(seq 3000); do ln f l$i || break; done 2>&1 | tail -1")
        assert "No space left on device" in links.output and "disk" in links.limits
        assert "disk" not in sandbox.run("rm -f l*; echo ok").limits  # room again, no note
        mountinfo = sandbox.run("cat /proc/self/mountinfo").output
        assert str(workdir) not in mountinfo  # the copy's own filesystem: no host path to show
        assert processes_of(uid) == [] and canary()
    # Only this copy's mount is checked: other processes on the host make and remove copies meanwhile.
    assert not os.path.exists(os.path.dirname(repo)) and os.path.dirname(repo) not in copy_mounts()


@ROOT_ONLY
def test_host_writes_get_room_in_a_copy_a_command_filled(source, workdir):
    with copies.repo_copy(str(source), prefix="tw-room-", dir=str(workdir), disk_bytes=1 << 20) as repo:
        Sandbox(repo, SandboxConfig(disk_bytes=1 << 20)).run("head -c 5000000 /dev/zero > big")
        with pytest.raises(OSError, match="No space left"):
            Path(repo, "host").write_bytes(b"x" * (1 << 20))
        copies.make_room(repo, 2 << 20)
        Path(repo, "host").write_bytes(b"x" * (1 << 20))


def test_an_unmountable_place_gets_a_plain_folder_the_walk_measures(source, workdir, monkeypatch):
    monkeypatch.setattr(copies, "disk_limit_kind", lambda: "walk")
    with copies.repo_copy(str(source), prefix="tw-walk-", dir=str(workdir), disk_bytes=1 << 20) as repo:
        assert copies.mount_of(repo) is None
        sandbox = Sandbox(repo, SandboxConfig(timeout_s=20, disk_bytes=1 << 20))
        assert sandbox.disk_limit_kind == "walk"
        r = sandbox.run("head -c 50000000 /dev/zero > big; sleep 10")
        assert "disk" in r.limits and r.returncode == 137
    assert not os.path.exists(os.path.dirname(repo))


MAKER = """
import os, signal, sys
from terminalworld.env import copies
from terminalworld.env.sandbox import Sandbox, SandboxConfig
with copies.repo_copy(sys.argv[1], prefix="tw-killed-", dir=sys.argv[2]) as repo:
    sandbox = Sandbox(repo, SandboxConfig(timeout_s=60, host_uid=int(sys.argv[4]), host_gid=int(sys.argv[4])))
    print(repo, flush=True)
    if sys.argv[3] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    sandbox.run("sleep 50 & touch started; sleep 55")
"""


def _maker(source: Path, workdir: Path, how: str, uid: int) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", MAKER, str(source), str(workdir), how, str(uid)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


@ROOT_ONLY
def test_sigterm_removes_the_copy_its_mount_and_its_sandbox(source, workdir):
    uid = 61102
    proc, repo = _maker(source, workdir, "term", uid)
    deadline = time.monotonic() + 30
    while not os.path.exists(f"{repo}/started") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.path.dirname(repo) in copy_mounts() and processes_of(uid) != []
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM  # the signal still ends it, after the cleanup
    assert not os.path.exists(os.path.dirname(repo)) and os.path.dirname(repo) not in copy_mounts()
    assert processes_of(uid) == []


@ROOT_ONLY
def test_the_next_run_unmounts_and_removes_what_a_killed_one_left(source, workdir):
    proc, repo = _maker(source, workdir, "kill", 61103)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    left = os.path.dirname(repo)
    assert left in copy_mounts() and os.path.exists(f"{repo}/a.txt")
    os.symlink(left, workdir / f"tw-killed-{proc.pid}-linkxxxx")  # swept as a link, never followed
    with copies.copy_space("tw-killed-", dir=str(workdir), content_bytes=0) as fresh:
        assert sorted(os.listdir(workdir)) == sorted(["source", os.path.basename(fresh)])
    assert left not in copy_mounts() and not os.path.exists(left)


@ROOT_ONLY
def test_a_command_that_fills_the_copy_cannot_make_verification_fail(workdir):
    from terminalworld.tasks import layout

    task = workdir / "task"
    (task / layout.REPO_DIR).mkdir(parents=True)
    (task / layout.REPO_DIR / "a.txt").write_text("fixed\n")
    (task / "tests").mkdir()
    (task / "tests" / "test.sh").write_text("grep -q fixed /testbed/a.txt && echo 1 > /logs/verifier/reward.txt\n")
    (task / "solution").mkdir()
    (task / "solution" / "solve.sh").write_text("true\n")
    config = SandboxConfig(disk_bytes=2 << 20)
    with layout.repo_copy(task, dir=str(workdir)) as repo:
        filled = Sandbox(str(repo), config).run("head -c 9000000 /dev/zero > fill; touch e{1..2000}")
        assert "disk" in filled.limits
        assert layout.verify(task, repo, config=config) == 1.0
