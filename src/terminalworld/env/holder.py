"""A size-capped tmpfs for a caller that may not mount: held by a process in its own namespaces.

An unprivileged caller cannot mount on the host, but it may make a user namespace and, in it, a
mount namespace where it mounts a tmpfs with `size=` and `nr_inodes=`, which the kernel enforces
like any other. A `Holder` is a small child process (the running interpreter, single-threaded, as
`unshare(CLONE_NEWUSER)` requires) that makes those namespaces, mounts the tmpfs on a folder, and
then waits on a pipe: it remounts the tmpfs with new caps when asked (`fit`), and exits, taking the
tmpfs with it, when the pipe closes (`stop`, or its parent's death). The host reaches the tmpfs
through `/proc/{pid}/root/{folder}` (the holder is the caller's own process); a sandbox binds it by
starting bwrap inside the holder's user and mount namespaces (`Holder.enter_argv`, with `nsenter`), since a
bind mount's source must be in the binder's mount namespace; the holder also writes the id maps of
the sandbox's user namespace, a child of its own (`map_root`). A root caller mounts on the host and
needs none of this (`env.copies`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

from terminalworld.env import walk

_PROGRAM = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
uid, gid = os.getuid(), os.getgid()
if libc.unshare(0x10000000 | 0x00020000) != 0:  # CLONE_NEWUSER | CLONE_NEWNS
    sys.exit(f"unshare: {os.strerror(ctypes.get_errno())}")
for name, value in (("uid_map", f"0 {uid} 1"), ("setgroups", "deny"), ("gid_map", f"0 {gid} 1")):
    with open(f"/proc/self/{name}", "w") as f:
        f.write(value)
def mount(options, flags):
    if libc.mount(b"terminalworld-copy", sys.argv[1].encode(), b"tmpfs", flags, options.encode()) != 0:
        return os.strerror(ctypes.get_errno())
    return None
err = mount(f"size={sys.argv[2]},nr_inodes={sys.argv[3]},mode=0711", 2 | 4)  # nosuid, nodev
print(f"error {err}" if err else "ready", flush=True)
def map_root(pid):
    try:
        for name, value in (("uid_map", "0 0 1"), ("setgroups", "deny"), ("gid_map", "0 0 1")):
            with open(f"/proc/{pid}/{name}", "w") as f:
                f.write(value)
    except OSError as e:
        return e.strerror
    return None
for line in sys.stdin:
    word, *args = line.split()
    if word == "fit":
        err = mount(f"size={args[0]},nr_inodes={args[1]}", 2 | 4 | 32)  # a remount
    else:
        err = map_root(int(args[0]))
    print(f"error {err}" if err else "ok", flush=True)
"""
_HELD: dict[int, Holder] = {}  # by pid: the holders this process runs, found again from their paths
_LOCK = threading.Lock()
_PROC_ROOT = re.compile(r"/proc/(\d+)/root(/.*)")
_SBIN = "/usr/bin:/bin:/usr/sbin:/sbin"


class Holder:
    """A tmpfs of `size` bytes and `inodes` inodes on folder `folder` (an empty folder the caller
    owns), in the namespaces of a process of its own. Raises OSError when it cannot be made."""

    def __init__(self, folder: str, size: int, inodes: int):
        self.folder = os.path.abspath(folder)
        self._lock = threading.Lock()
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _PROGRAM, self.folder, str(size), str(inodes)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd="/",
            env={},
        )
        if (answer := self._answer()) != "ready":
            self.stop()
            raise OSError(f"cannot hold a tmpfs on {self.folder}: {answer}")
        with _LOCK:
            _HELD[self.proc.pid] = self

    def _answer(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip() or f"the holder exited ({self.proc.poll()})"

    @property
    def root(self) -> str:
        """The tmpfs as the host reaches it."""
        return f"/proc/{self.proc.pid}/root{self.folder}"

    def fit(self, size: int, inodes: int) -> None:
        """Cap the tmpfs at `size` bytes and `inodes` inodes (a remount, as `env.copies.fit` does)."""
        self._ask(f"fit {size} {inodes}", f"cannot cap the tmpfs on {self.folder}")

    def map_root(self, pid: int) -> None:
        """Map uid and gid 0 of process `pid`'s new user namespace, a child of the holder's, to the
        caller's ids (`env.launch` does it for a sandbox started on the host). Only a process in the
        parent namespace may write the maps, so the holder writes them."""
        self._ask(f"map {pid}", f"cannot map the ids of the sandbox {pid}")

    def enter_argv(self) -> list[str]:
        """The words before a program that run it in the holder's user and mount namespaces, with
        the caller's credentials (its uid is 0 there, as it is inside a sandbox)."""
        nsenter = shutil.which("nsenter", path=_SBIN)
        assert nsenter is not None  # `usable` checked it
        return [nsenter, "-t", str(self.proc.pid), "-U", "-m", "--preserve-credentials", "--"]

    def _ask(self, line: str, problem: str) -> None:
        assert self.proc.stdin is not None
        with self._lock:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
            if (answer := self._answer()) != "ok":
                raise OSError(f"{problem}: {answer}")

    def stop(self) -> None:
        """End the holder, and with it the tmpfs and everything on it."""
        with _LOCK:
            _HELD.pop(self.proc.pid, None)
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def held(path: str) -> tuple[Holder, str] | None:
    """The holder whose tmpfs host path `path` lies on, and the path as its namespaces see it."""
    m = _PROC_ROOT.fullmatch(os.path.abspath(path))
    with _LOCK:
        found = _HELD.get(int(m.group(1))) if m else None
    return (found, m.group(2)) if found is not None and m is not None else None


@functools.cache
def usable() -> bool:
    """Whether this caller can hold a capped tmpfs here (user namespaces, and `nsenter` to start a
    sandbox inside them): checked once per process, by holding one, writing to it from the host and
    finding the file from inside the holder's namespaces."""
    if shutil.which("nsenter", path=_SBIN) is None:
        return False
    folder = tempfile.mkdtemp(prefix="tw-hold-probe-")
    try:
        holder = Holder(folder, 16 * walk.ENTRY_BYTES, 16)
    except OSError:
        return False
    else:
        try:
            with open(os.path.join(holder.root, "probe"), "wb") as f:
                f.write(b"x")
            entered = subprocess.run([*holder.enter_argv(), "/usr/bin/test", "-f", f"{folder}/probe"], env={})
            return entered.returncode == 0 and not os.listdir(folder)
        except OSError:
            return False
        finally:
            holder.stop()
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(folder)
