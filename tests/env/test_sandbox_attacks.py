"""Hostile commands: each attack must fail inside the sandbox and leave the host unchanged.

The network tests only ever dial a listener the test itself opens on the host's 127.0.0.1.
"""

import hashlib
import os
import platform
import re
import shutil
import socket
import stat
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from .conftest import host_processes_with, host_snapshot, host_uid

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_remounting_system_folders_fails_and_writes_nothing(sandbox, token):
    before = host_snapshot()
    r = sandbox.run(
        f"mount -o remount,rw,bind /usr; touch /usr/tw{token}; mount -o remount,rw /; touch /tw{token}; "
        f"mount -o remount,rw /etc; echo x > /etc/tw{token}; echo x > /usr/bin/tw{token}; "
        f"unshare -Urm sh -c 'mount -o remount,rw /usr; touch /usr/tw{token}'; echo done"
    )
    assert r.output.count("permission denied") == 3 and r.output.count("Read-only file system") == 4
    assert "unshare failed" in r.output and r.output.endswith("done\n")
    assert host_snapshot() == before
    assert not any(os.path.exists(f"{d}/tw{token}") for d in ("/", "/usr", "/etc", "/usr/bin"))


def test_no_device_node_and_no_mount_of_the_host_disk(sandbox, repo):
    dev = os.stat("/").st_dev
    major, minor = os.major(dev), os.minor(dev)
    r = sandbox.run(
        f"mknod disk b {major} {minor}; mknod /tmp/disk b {major} {minor}; mkdir -p m; "
        "mount -t ext4 /dev/vda m; mount -t tmpfs none m; mount --bind / m; ls m; "
        "ls /dev | tr '\\n' ' '; find / -xdev -type b 2>/dev/null | head -3; echo done"
    )
    assert r.output.count("Operation not permitted") == 2 and r.output.count("permission denied") == 3
    assert "vda" not in r.output and "sda" not in r.output and r.output.endswith("done\n")
    assert not any(stat.S_ISBLK(os.lstat(p).st_mode) or stat.S_ISCHR(os.lstat(p).st_mode) for p in repo.rglob("*"))


def test_no_capability_and_no_other_identity(sandbox, repo):
    r = sandbox.run(
        "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status; id -u; wc -l < /proc/self/uid_map; stat -c %u /usr; "
        "grep NoNewPrivs /proc/self/status; chown 1000 a.txt; setpriv --reuid=1000 id -u; su -s /bin/sh -c id nobody"
    )
    caps = [line.split()[1] for line in r.output.splitlines() if line.startswith("Cap")]
    assert caps == ["0000000000000000"] * 5
    # uid 0 inside, the only uid mapped; host root is not mapped (its files show as the overflow uid).
    assert "\n0\n1\n65534\n" in r.output
    assert "NoNewPrivs:\t1" in r.output
    assert "chown: changing ownership of 'a.txt': Invalid argument" in r.output
    assert "setpriv: setresuid failed: Invalid argument" in r.output and "uid=" not in r.output
    assert os.lstat(repo / "a.txt").st_uid == host_uid()


def test_host_secrets_stay_out(sandbox, monkeypatch, token):
    monkeypatch.setenv("TW_TEST_SECRET", f"secret-{token}")
    r = sandbox.run(
        f"cat /etc/shadow /etc/gshadow; ls -a /root /home {REPO_ROOT} {Path.home()}; ls /etc/ssl/private; "
        "env; cat /proc/*/environ; cat /proc/*/cmdline | tr '\\0' ' '; grep -s secret- /proc/*/environ /tmp/*; echo done"
    )
    assert f"secret-{token}" not in r.output and r.output.endswith("done\n")
    for path in ("/root", "/home", str(REPO_ROOT)):
        assert f"ls: cannot access '{path}': No such file or directory" in r.output
    assert "cat: /etc/shadow: Permission denied" in r.output and "cat: /etc/gshadow: Permission denied" in r.output
    if os.access("/etc/shadow", os.R_OK):  # a root test run can check no line of it leaked
        assert not any(line and line in r.output for line in Path("/etc/shadow").read_text().splitlines())


def test_the_host_loopback_is_out_of_reach(sandbox, listener):
    port, sock = listener
    r = sandbox.run(
        f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED; exec 4<>/dev/tcp/localhost/{port} && echo CONNECTED; "
        "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '"
    )
    assert "CONNECTED" not in r.output and r.output.count(f"/{port}: Connection refused") == 2
    assert r.output.endswith("lo\n")  # the sandbox's own loopback is its only interface
    with pytest.raises(socket.timeout):
        sock.accept()


def test_a_memory_bomb_is_stopped_and_named(make_sandbox):
    # Should the host still run short of memory, the kernel kills sandboxed processes first.
    assert make_sandbox().run("cat /proc/self/oom_score_adj").output == "1000\n"
    # Piping 2 GiB into tail takes seconds on a loaded machine: the wall limit is not what is tested here.
    t0 = time.monotonic()
    r = make_sandbox(timeout_s=60.0).run("python3 -c 'x = bytearray(3 << 30)' || head -c 3G /dev/zero | tail")
    assert r.limits == ("memory",) and r.output.endswith("\n(memory limit reached: 2048 MiB per process)\n")
    r = make_sandbox(memory_bytes=256 << 20, timeout_s=60.0).run("head -c 1G /dev/zero | tail")
    assert "tail: memory exhausted" in r.output and r.limits == ("memory",) and "256 MiB per process" in r.output
    assert time.monotonic() - t0 < 120


def test_a_fork_flood_ends_cleanly(make_sandbox, token):
    t0 = time.monotonic()
    bomb = f"b{token}"
    r = make_sandbox(timeout_s=10).run(f"{bomb}(){{ {bomb}|{bomb}& }};{bomb}; sleep 2.{token}; echo survived")
    assert time.monotonic() - t0 < 10 and not r.timed_out
    assert "processes" in r.limits and "\n(process limit reached: at most 256 processes)\n" in r.output
    time.sleep(0.2)
    assert host_processes_with(bomb) == [] and subprocess.run(["true"]).returncode == 0


@pytest.mark.skipif(tuple(map(int, re.findall(r"\d+", platform.release())[:2])) < (5, 14), reason="Linux < 5.14")
def test_each_sandbox_has_its_own_process_budget(make_sandbox, token):
    # RLIMIT_NPROC counts per user namespace, and each sandbox has its own: concurrent sandboxes
    # sharing the host uid do not share the budget.
    boxes = [make_sandbox(max_processes=200, timeout_s=20) for _ in range(2)]
    crowd = f"for i in $(seq 150); do sleep 2.{token} & done; wait; echo ok"
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda box: box.run(crowd), boxes))
    assert [r.output for r in results] == ["ok\n", "ok\n"]


def test_filling_the_disk_is_stopped(make_sandbox, repo, token):
    cap = 20 << 20
    r = make_sandbox(disk_bytes=cap, disk_poll_s=0.02, timeout_s=20).run(
        "i=0; while :; do head -c 1M /dev/zero > f$i || break; i=$((i+1)); done"
    )
    size = sum(p.stat().st_size for p in repo.rglob("*"))
    assert not r.timed_out and r.returncode == 137 and r.limits == ("disk",)
    assert r.output.endswith("\n(disk limit reached: the repository may grow by at most 20 MiB)\n")
    assert cap < size < cap + (128 << 20)
    # Empty files count too, and memory-backed /tmp is capped on its own.
    for p in repo.glob("f*"):
        p.unlink()
    r = make_sandbox(disk_bytes=1 << 20).run("for i in $(seq 600); do : > e$i; done")
    assert r.limits == ("disk",)
    r = make_sandbox(tmp_bytes=8 << 20).run("head -c 20M /dev/zero > /tmp/x; head -c 20M /dev/zero > /dev/shm/x")
    assert r.output.count("No space left on device") == 2


def test_daemons_do_not_outlive_their_command(sandbox, repo, token):
    t0 = time.monotonic()
    r = sandbox.run(
        f"(sleep 2.{token}; echo late > late1) & disown; "
        f"setsid sh -c 'sleep 2.{token}; echo late > late2' & "
        f"nohup sh -c 'sleep 2.{token}; echo late > late3' >/dev/null 2>&1 & "
        f"( ( sleep 2.{token}; echo late > late4 ) & ); echo started"
    )
    assert r.output == "started\n" and time.monotonic() - t0 < 2
    assert host_processes_with(f"sleep 2.{token}") == []
    time.sleep(2.5)
    assert sorted(p.name for p in repo.iterdir()) == ["a.txt"]


def test_symlinks_do_not_lead_out(sandbox, repo, workdir, token):
    passwd = hashlib.sha256(Path("/etc/passwd").read_bytes()).hexdigest()
    r = sandbox.run(
        f"ln -s / root_link; ls root_link/root; cat root_link/root/.bashrc; "
        f"ln -s /etc etc_link; echo x > etc_link/tw{token}; ln -s ../../../../../etc/passwd p; echo x >> p; "
        f"ln -s {workdir} up; ls up; echo x > up/escape; echo x > {workdir}/escape2; "
        f"ln -s /tmp/tw{token} out; echo pwned > out; cat out; ln /etc/passwd hard; echo done"
    )
    assert f"etc_link/tw{token}: Read-only file system" in r.output and "p: Permission denied" in r.output
    assert "up/escape: No such file or directory" in r.output and f"{workdir}/escape2: No such file" in r.output
    assert r.output.count("No such file or directory") == 4 and "pwned\n" in r.output
    assert "Invalid cross-device link\ndone\n" in r.output
    assert not (workdir / "escape").exists() and not (workdir / "escape2").exists()
    assert not os.path.exists(f"/tmp/tw{token}") and not os.path.exists(f"/etc/tw{token}")
    assert hashlib.sha256(Path("/etc/passwd").read_bytes()).hexdigest() == passwd
    # The host side follows none of them either: reclaiming the tree leaves the targets alone.
    owners = {p: os.stat(p).st_uid for p in ("/", "/etc", "/etc/passwd", str(workdir))}
    sandbox.claim_repo()
    assert {p: os.stat(p).st_uid for p in owners} == owners
    shutil.rmtree(repo)
    assert Path("/etc/passwd").exists()
