"""The tmpfs an unprivileged caller holds in namespaces of its own (`env.holder`): a harness's bound
folders share its cap, host writes get room however full a command left it, and it goes with its
caller, SIGKILL included (the holder reads EOF), the next copy sweeping the empty folder left."""

import json
import os
import signal
import subprocess
import time

from . import as_user
from .as_user import unprivileged
from .test_sandbox_hostile import processes_of

BINDS_UID, KILLED_UID = 54328, 54329  # unused by any other test
BINDS = """
import json, os, sys
from terminalworld.env import copies
from terminalworld.env.sandbox import Sandbox, SandboxConfig
config = SandboxConfig(timeout_s=10, disk_bytes=8 << 20, memory_bytes=256 << 20)
out = {}
with copies.copy_space("tw-held-", dir=sys.argv[1], content_bytes=0, disk_bytes=config.disk_bytes) as space:
    for name in ("repo", "logs"):
        os.mkdir(os.path.join(space, name))
    sandbox = Sandbox(os.path.join(space, "repo"), config, binds={"/logs": os.path.join(space, "logs")})
    out["kind"] = sandbox.disk_limit_kind
    r = sandbox.run("head -c 6M /dev/zero > a; head -c 6M /dev/zero > /logs/b; ls -s --block-size=1M . /logs")
    out["both"] = [r.output, list(r.limits)]
    try:
        open(os.path.join(space, "repo", "host"), "wb").write(b"x" * (1 << 20))
        out["host_full"] = "written"
    except OSError as e:
        out["host_full"] = e.strerror
    copies.make_room(os.path.join(space, "repo"), 2 << 20)
    open(os.path.join(space, "repo", "host"), "wb").write(b"x" * (1 << 20))
    sandbox.claim_repo()
    out["after"] = sandbox.run("cat host | wc -c").output
print(json.dumps(out))
"""
KILLED = """
import os, sys, time
from terminalworld.env import copies
with copies.repo_copy(sys.argv[1], prefix="tw-killed-", dir=sys.argv[2]) as repo:
    open(os.path.join(repo, "made"), "w").write("x")
    print(repo, flush=True)
    time.sleep(60)
"""


@unprivileged(BINDS_UID)
def test_bound_folders_share_the_held_cap_and_the_host_gets_room(workdir):
    place = workdir / "place"
    place.mkdir()
    as_user.own(BINDS_UID, place)
    proc = as_user.start(BINDS_UID, BINDS, place, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    out = json.loads(stdout)
    assert out["kind"] == "tmpfs"
    # 6 MiB in the repository and 6 more in /logs under one 8 MiB cap: the second write stops short.
    assert "No space left on device" in out["both"][0] and "disk" in out["both"][1]
    assert out["host_full"] == "No space left on device" and out["after"] == str(1 << 20) + "\n"
    assert os.listdir(place) == []


@unprivileged(KILLED_UID)
def test_the_held_tmpfs_goes_with_a_killed_caller(repo, workdir):
    place = workdir / "place"
    place.mkdir()
    as_user.own(KILLED_UID, place, repo, repo / "a.txt")
    caller = as_user.start(KILLED_UID, KILLED, repo, place, cwd=workdir, stdout=subprocess.PIPE)
    assert caller.stdout is not None
    held = caller.stdout.readline().strip()
    assert held.startswith("/proc/") and sorted(os.listdir(held)) == ["a.txt", "made"]
    (folder,) = os.listdir(place)
    assert os.listdir(place / folder) == []  # the host's folder under the tmpfs stays empty
    os.kill(caller.pid, signal.SIGKILL)
    caller.wait()
    deadline = time.monotonic() + 10
    while processes_of(KILLED_UID) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_of(KILLED_UID) == [] and not os.path.exists(held)
    # The next copy with the prefix removes the folder the dead caller left.
    again = as_user.start(KILLED_UID, KILLED, repo, place, cwd=workdir, stdout=subprocess.PIPE)
    assert again.stdout is not None and again.stdout.readline().startswith("/proc/")
    assert folder not in os.listdir(place)
    again.kill()
    again.wait()
