"""The same boundary when the caller is not root: the whole sandbox runs from an unprivileged uid,
started by `as_user` (the system's python3, importing the sandbox module from the source tree)."""

import json
import os
import socket
import time

import pytest

from . import as_user
from .as_user import unprivileged
from .conftest import host_processes_with

# One uid per test, unused by any other test (test_sandbox_hostile and test_sandbox_copies use 61xxx).
SAME_BOUNDARY_UID, HOSTILE_UID, COPIES_UID = 54321, 54322, 54323

CALLER = """
import json, sys
from terminalworld.env.sandbox import Sandbox, SandboxConfig
sandbox = Sandbox(sys.argv[1], SandboxConfig(timeout_s=5, memory_bytes=256 << 20))
commands = json.loads(sys.argv[2])
print(json.dumps({k: [r.output, r.returncode, list(r.limits)] for k, r in ((k, sandbox.run(c)) for k, c in commands.items())}))
"""


@unprivileged(SAME_BOUNDARY_UID)
def test_an_unprivileged_caller_gets_the_same_boundary(repo, workdir, token):
    uid = SAME_BOUNDARY_UID
    as_user.own(uid, repo, repo / "a.txt")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    commands = {
        "caps": "grep -E '^Cap(Prm|Eff|Bnd)' /proc/self/status | cut -f2 | sort -u; id -u; touch made",
        "escape": f"touch /usr/tw{token}; mount -o remount,rw /usr; echo x > {workdir}/escape; "
        "cat /etc/shadow; ls /root; env | grep -c SECRET",
        "network": f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED",
        "fork": f"b{token}(){{ b{token}|b{token}& }};b{token}; sleep 1",
        "memory": "python3 -c 'x = bytearray(1 << 30)'",
        "daemon": f"(sleep 1.{token}; echo late > late) & echo started",
    }
    out = as_user.run(uid, CALLER, repo, json.dumps(commands), cwd=workdir, env={"TW_TEST_SECRET": f"secret-{token}"})
    assert out["caps"][0] == "0000000000000000\n0\n"
    escape = out["escape"][0]
    assert "Read-only file system" in escape and "permission denied" in escape and "No such file" in escape
    assert "Permission denied" in escape and escape.endswith("0\n") and f"secret-{token}" not in json.dumps(out)
    assert "Connection refused" in out["network"][0] and "CONNECTED" not in out["network"][0]
    assert "processes" in out["fork"][2] and "memory" in out["memory"][2]
    assert out["daemon"][0] == "started\n"
    time.sleep(1.5)
    assert not (repo / "late").exists() and host_processes_with(f"sleep 1.{token}") == []
    assert os.lstat(repo / "made").st_uid == uid
    assert not (workdir / "escape").exists() and not os.path.exists(f"/usr/tw{token}")
    with pytest.raises(socket.timeout):
        listener.accept()
    listener.close()


HOSTILE_CALLER = """
import json, sys
from terminalworld.env.sandbox import Sandbox, SandboxConfig
config = SandboxConfig(**json.loads(sys.argv[3]))
commands = json.loads(sys.argv[2])
out = {k: [r.output, r.returncode, list(r.limits)] for k, r in ((k, Sandbox(sys.argv[1], config).run(c)) for k, c in commands.items())}
print(json.dumps(out))
"""


@unprivileged(HOSTILE_UID)
def test_an_unprivileged_caller_holds_against_the_hostile_attacks(repo, workdir):
    from .test_sandbox_hostile import INJECT, processes_of

    uid = HOSTILE_UID
    (repo / "inject.py").write_text(INJECT)
    deep = "import os\nfor _ in range(2100):\n    os.mkdir('ab'); os.chdir('ab')\nopen('fill', 'wb').write(b'x' * (40 << 20))\n"
    (repo / "deep.py").write_text(deep)
    (repo / "links.py").write_text(
        "import os\nopen('f', 'w').close()\nfor i in range(4000):\n    os.link('f', f'l{i}')\n"
    )
    as_user.own(uid, repo, *repo.iterdir())
    commands = {
        "survive": "python3 inject.py; (setsid sh -c 'sleep 4; echo late > late' &); cat /proc/1/cmdline; sleep 100",
        "key": 'python3 -c "import ctypes, os; l = ctypes.CDLL(None, use_errno=True); '
        "print(l.syscall(248, b'user', b'k', b'v', 1, -4), os.strerror(ctypes.get_errno()))\"",
        "deep": "python3 deep.py; echo exit $?",
        "links": "python3 links.py; echo exit $?",
    }
    config = {"timeout_s": 2, "disk_bytes": 10 << 20}
    out = as_user.run(uid, HOSTILE_CALLER, repo, json.dumps(commands), json.dumps(config), cwd=workdir)
    assert processes_of(uid) == []
    time.sleep(4)
    assert not (repo / "late").exists() and processes_of(uid) == []
    assert out["survive"][1] == 124 and "ptrace: Operation not permitted" in out["survive"][0]
    assert str(repo) not in out["survive"][0]
    assert out["key"][0] == "-1 Operation not permitted\n"
    assert "disk" in out["deep"][2] and "disk" in out["links"][2]


COPY_CALLER = """
import json, os, sys
from terminalworld.env import copies
from terminalworld.env.sandbox import Sandbox, SandboxConfig, disk_limit_kind
config = SandboxConfig(timeout_s=20, disk_bytes=10 << 20, memory_bytes=256 << 20)
out = {"kind": disk_limit_kind()}
with copies.repo_copy(sys.argv[1], prefix="tw-unpriv-", dir=sys.argv[2], disk_bytes=config.disk_bytes) as repo:
    out["mount"] = copies.mount_of(repo)
    sandbox = Sandbox(repo, config)
    out["sandbox"] = sandbox.disk_limit_kind
    for name, command in json.loads(sys.argv[3]).items():
        r = Sandbox(repo, config).run(command)
        out[name] = [r.output, r.returncode, list(r.limits)]
print(json.dumps(out))
"""


@unprivileged(COPIES_UID)
def test_an_unprivileged_callers_copies_get_the_kernels_cap(repo, workdir):
    uid = COPIES_UID
    place = workdir / "copies"
    place.mkdir()
    as_user.own(uid, place)
    deep = "import os\nfor _ in range(2100):\n    os.mkdir('ab'); os.chdir('ab')\nopen('f', 'wb').write(b'x' * (40 << 20))\n"
    commands = {
        "flood": "dd if=/dev/zero of=big bs=1M count=200 2>&1 | tail -1; rm big",
        "deep": f'python3 -c "{deep}"; echo exit $?',
        "ids": "id -u; tr '\\0' ' ' </proc/1/cmdline; echo; tr '\\0' ' ' </proc/1/environ; grep testbed /proc/self/mountinfo; grep -E 'CapEff|CapBnd' /proc/self/status; unshare -U true",
    }
    out = as_user.run(uid, COPY_CALLER, repo, place, json.dumps(commands), cwd=workdir)
    # A tmpfs of its own, held in a user and mount namespace of the caller's (`env.holder`): the kernel's cap.
    assert out["kind"] == "tmpfs" and out["sandbox"] == "tmpfs"
    assert out["mount"].startswith("/proc/") and out["mount"].endswith(str(place) + "/" + out["mount"].split("/")[-1])
    assert "(10 MB, 10 MiB) copied" in out["flood"][0] and out["flood"][2] == []  # refused at the cap, then removed
    assert "No space left on device" in out["deep"][0] and "disk" in out["deep"][2]
    # Started inside the holder's namespaces, the sandbox still shows no host path or variable.
    assert out["ids"][0].startswith("0\nbwrap --args ") and str(place) not in out["ids"][0]
    assert str(as_user.SRC) not in out["ids"][0] and "PATH" not in out["ids"][0].split("\n")[2]
    assert "CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\n" in out["ids"][0]  # nothing of the holder's
    assert "unshare failed: Operation not permitted" in out["ids"][0]
    assert os.listdir(place) == [] and host_processes_with("tw-unpriv-") == []
