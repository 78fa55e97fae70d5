"""One cgroup memory group per sandboxed command: a memory limit the kernel enforces over the
whole command, and a way to see that everything in it is gone.

Used when the caller may create groups below its own (root) in the hierarchy that holds the memory
controller (`hierarchy`): the v1 memory hierarchy when one lists it, else the v2 (unified) one when
its `cgroup.controllers` has it. v1 writes memory.limit_in_bytes (and memory.memsw.limit_in_bytes
with memsw accounting); v2 writes memory.max and memory.swap.max = 0, and needs memory in the
parent's cgroup.subtree_control (v2 keeps processes out of a group whose children have controllers,
so the caller's group needs a delegated one, as systemd's Delegate= gives). Both put the pid in
cgroup.procs, read OOM kills (memory.oom_control, memory.events) and remove the group once empty,
after the pid namespace is gone. The v2 path has not run on a v2 host: the hosts this was built on
are v1 for memory, and its tests check only what it writes into a folder laid out like a v2 group. The limit counts every page the command's processes charge, memfd and shared memory
included (the sandbox's /tmp and /dev/shm are tmpfs, charged to the writer), and swap too where
memsw accounting exists; the kernel's OOM killer acts inside the group. Only the memory controller:
moving a process into a v1 group waits for an RCU grace period per controller, the pid namespace
already ends every process (RLIMIT_NPROC counts per user namespace), and no freezer is needed to
kill a namespace. Groups are named `tw-<pid>-<n>` after the process that made them, so empty ones
left by a killed process are removed by the next one (`sweep`).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import re
import signal
import time
from dataclasses import dataclass

_ROOT = "/sys/fs/cgroup"
_NAME = re.compile(r"tw-(\d+)-\d+")
_counter = itertools.count()


@dataclass(frozen=True)
class Hierarchy:
    """Where per-command groups go: the caller's own memory group (`parent`) in cgroup `version` 1 or 2."""

    version: int
    parent: str


def locate(own_cgroups: str, mountinfo: str) -> Hierarchy | None:
    """The caller's memory group from its /proc/self/cgroup text and the mount table: the v1 memory
    hierarchy's when a line lists `memory`, else the v2 one's (line `0::path`) under the cgroup2
    mount. Existence and permissions are `hierarchy`'s to check."""
    v2 = None
    for line in own_cgroups.splitlines():
        number, names, path = line.split(":", 2)
        if "memory" in names.split(","):
            return Hierarchy(1, f"{_ROOT}/memory{path.rstrip('/')}")
        if number == "0" and names == "":
            v2 = path.rstrip("/")
    mounts = [line.split(" - ", 1) for line in mountinfo.splitlines() if " - cgroup2 " in line]
    if v2 is None or not mounts:
        return None
    return Hierarchy(2, f"{mounts[0][0].split()[4]}{v2}")


def _readable(path: str) -> str:
    with contextlib.suppress(OSError), open(path) as f:
        return f.read()
    return ""


@functools.cache
def hierarchy() -> Hierarchy | None:
    """Where this caller's per-command memory groups go; None when this host or caller cannot have
    them (no memory controller, not root, or, on v2, memory not delegated to the caller's children)."""
    if os.geteuid() != 0:
        return None
    found = locate(_readable("/proc/self/cgroup"), _readable("/proc/self/mountinfo"))
    if found is None or not os.access(found.parent, os.W_OK):
        return None
    if found.version == 1:
        return found if os.path.isfile(f"{found.parent}/tasks") else None
    if "memory" not in _readable(f"{found.parent}/cgroup.controllers").split():
        return None
    if "memory" not in _readable(f"{found.parent}/cgroup.subtree_control").split():
        try:
            _write(f"{found.parent}/cgroup.subtree_control", "+memory")
        except OSError:  # EBUSY: processes in the caller's own group (no delegated one)
            return None
    return found


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _pids(folder: str) -> list[int]:
    with contextlib.suppress(FileNotFoundError), open(f"{folder}/cgroup.procs") as f:
        return [int(x) for x in f.read().split()]
    return []


class Group:
    """A fresh memory group with `memory_bytes` over all of it, in `where` (default `hierarchy()`)."""

    def __init__(self, memory_bytes: int, where: Hierarchy | None = None):
        found = where or hierarchy()
        assert found is not None, "no usable cgroup memory hierarchy here"
        self.version = found.version
        sweep(found)
        self.dir = f"{found.parent}/tw-{os.getpid()}-{next(_counter)}"
        os.mkdir(self.dir, 0o755)
        if self.version == 1:
            _write(f"{self.dir}/memory.limit_in_bytes", str(memory_bytes))
            if os.path.exists(f"{self.dir}/memory.memsw.limit_in_bytes"):
                _write(f"{self.dir}/memory.memsw.limit_in_bytes", str(memory_bytes))
        else:
            _write(f"{self.dir}/memory.max", str(memory_bytes))
            with contextlib.suppress(FileNotFoundError, PermissionError):  # absent without swap accounting
                _write(f"{self.dir}/memory.swap.max", "0")

    def add(self, pid: int) -> None:
        """Put `pid` (not yet forked anything) in the group; its children follow."""
        _write(f"{self.dir}/cgroup.procs", str(pid))

    def oom_kills(self) -> int:
        """How many processes the kernel killed for the memory limit."""
        events = "memory.oom_control" if self.version == 1 else "memory.events"
        m = re.search(r"^oom_kill (\d+)", _readable(f"{self.dir}/{events}"), re.M)
        return int(m.group(1)) if m else 0

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGKILL whatever is left in the group, wait until it is empty and remove it. Raises
        `TimeoutError` if it stays busy."""
        deadline, pause = time.monotonic() + timeout_s, 0.0005
        while pids := _pids(self.dir):
            if time.monotonic() > deadline:
                raise TimeoutError(f"cgroup {self.dir} still has processes after SIGKILL")
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        with contextlib.suppress(FileNotFoundError):
            os.rmdir(self.dir)


@functools.cache
def sweep(where: Hierarchy) -> None:
    """Remove the empty groups of processes that no longer exist (killed before their cleanup);
    once per process and hierarchy, before its first group. A group still in use is left alone: a
    sandbox left in it is `env.reaper.sweep`'s to end (at this process's first sandbox, before its
    first group), and a group seen from another pid namespace may not be what it seems."""
    with contextlib.suppress(OSError):
        for name in os.listdir(where.parent):
            m = _NAME.fullmatch(name)
            if m and int(m.group(1)) != os.getpid() and not os.path.exists(f"/proc/{m.group(1)}"):
                with contextlib.suppress(OSError):
                    os.rmdir(f"{where.parent}/{name}")
