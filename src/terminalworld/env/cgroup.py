"""One cgroup v1 memory group per sandboxed command: a memory limit the kernel enforces over the
whole command, and a way to see that everything in it is gone.

Used when the host has the v1 memory controller and the caller may create groups below its own
(root here). The limit counts every page the command's processes charge, memfd and shared memory
included (the sandbox's /tmp and /dev/shm are tmpfs, charged to the writer), and swap too where
memsw accounting exists; the kernel's OOM killer acts inside the group. Only the memory controller:
moving a process into a v1 group waits for an RCU grace period per controller, the pid namespace
already ends every process (RLIMIT_NPROC counts per user namespace), and no freezer is needed to
kill a namespace. Groups are named `tw-<pid>-<n>` after the process that made them, so empty ones
left by a killed process are removed by the next one (`sweep`). cgroup v2 is not used yet.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import re
import signal
import time

_ROOT = "/sys/fs/cgroup"
_CONTROLLERS = ("memory",)
_NAME = re.compile(r"tw-(\d+)-\d+")
_counter = itertools.count()


@functools.cache
def parents() -> dict[str, str] | None:
    """The caller's own group in each controller, where per-command groups go; None when this host
    or caller cannot have them (no v1 hierarchy, or not allowed to create groups)."""
    if os.geteuid() != 0:
        return None
    own = {}
    with contextlib.suppress(OSError), open("/proc/self/cgroup") as f:
        for line in f:
            _, names, path = line.rstrip("\n").split(":", 2)
            own |= {name: path for name in names.split(",")}
    found = {c: f"{_ROOT}/{c}{own[c].rstrip('/')}" for c in _CONTROLLERS if c in own}
    usable = all(c in found and os.path.isfile(f"{found[c]}/tasks") for c in _CONTROLLERS)
    usable = usable and all(os.access(p, os.W_OK) for p in found.values())
    return found if usable else None


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _pids(folder: str) -> list[int]:
    with contextlib.suppress(FileNotFoundError), open(f"{folder}/cgroup.procs") as f:
        return [int(x) for x in f.read().split()]
    return []


class Group:
    """A fresh memory group with `memory_bytes` over all of it."""

    def __init__(self, memory_bytes: int):
        found = parents()
        assert found is not None, "no cgroup v1 hierarchy usable here"
        sweep()
        name = f"tw-{os.getpid()}-{next(_counter)}"
        self.dirs = {c: f"{p}/{name}" for c, p in found.items()}
        for d in self.dirs.values():
            os.mkdir(d, 0o755)
        mem = self.dirs["memory"]
        _write(f"{mem}/memory.limit_in_bytes", str(memory_bytes))
        if os.path.exists(f"{mem}/memory.memsw.limit_in_bytes"):
            _write(f"{mem}/memory.memsw.limit_in_bytes", str(memory_bytes))

    def add(self, pid: int) -> None:
        """Put `pid` (not yet forked anything) in the group; its children follow."""
        for d in self.dirs.values():
            _write(f"{d}/cgroup.procs", str(pid))

    def oom_kills(self) -> int:
        """How many processes the kernel killed for the memory limit."""
        with open(f"{self.dirs['memory']}/memory.oom_control") as f:
            m = re.search(r"^oom_kill (\d+)", f.read(), re.M)
        return int(m.group(1)) if m else 0

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGKILL whatever is left in the group, wait until it is empty and remove it. Raises
        `TimeoutError` if it stays busy."""
        _stop(self.dirs, timeout_s)


def _stop(dirs: dict[str, str], timeout_s: float) -> None:
    deadline, pause = time.monotonic() + timeout_s, 0.0005
    while pids := [p for d in dirs.values() for p in _pids(d)]:
        if time.monotonic() > deadline:
            raise TimeoutError(f"cgroup {dirs['memory']} still has processes after SIGKILL")
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
    for d in dirs.values():
        with contextlib.suppress(FileNotFoundError):
            os.rmdir(d)


@functools.cache
def sweep() -> None:
    """Remove the empty groups of processes that no longer exist (killed before their cleanup);
    once per process, before its first group. A group still in use is left alone: its sandbox died
    with its bwrap, and a group seen from another pid namespace may not be what it seems."""
    found = parents()
    if found is None:
        return
    stale: set[str] = set()
    for p in found.values():
        with contextlib.suppress(OSError):
            for name in os.listdir(p):
                m = _NAME.fullmatch(name)
                if m and int(m.group(1)) != os.getpid() and not os.path.exists(f"/proc/{m.group(1)}"):
                    stale.add(name)
    for name in stale:
        for p in found.values():
            with contextlib.suppress(OSError):
                os.rmdir(f"{p}/{name}")
