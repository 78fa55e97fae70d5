"""Ending the sandboxes of a caller that died, however it died: a reaper for those it runs, and a
sweep for those a dead caller left before.

A sandbox's pid 1 dies with its caller through parent-death signals (bwrap's --die-with-parent),
which live in its own kernel state and which pid 1 could be made to clear, were its memory
writable from inside (`env.sandbox` masks /proc/1/mem). So nothing here relies on it. Each caller
process starts one reaper at its first sandbox (`watch`): the running interpreter in a session of
its own (a kill of the caller's process group misses it), holding a pidfd of the caller and one end
of a socket pair whose other end only the caller holds. The caller hands it a pidfd of each
sandbox's pid 1 before anything runs inside; when the caller exits (its pidfd turns readable, or
the socket closes), the reaper SIGKILLs every pid 1 it holds, which ends each one's pid namespace,
and exits. It drops the pidfd of a sandbox that has ended. No sandbox can reach it: it is in no
sandbox's pid namespace, and the seccomp filter denies ptrace. Should it die while its caller
lives, the caller's next sandbox starts another, which watches the sandboxes started from then on.

A sandbox whose caller and reaper both died is ended by the next caller's `sweep`, once per process
and host uid: a sandbox's pid 1 is the init of a pid namespace below the sweeper's, runs as the
sandbox's host uid with `env.launch`'s command line, and its parent, while its caller lives, is the
outer bwrap, which dies with the caller.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time

from terminalworld.errors import SandboxUnavailable

_PROGRAM = r"""
import os, select, signal, socket
try:
    caller = os.pidfd_open(os.getppid())
except OSError:
    raise SystemExit
link = socket.socket(fileno=0)
poll = select.poll()
poll.register(link, select.POLLIN)
poll.register(caller, select.POLLIN)
watched = set()
while True:
    for fd, _ in poll.poll():
        if fd == link.fileno():
            try:
                data, fds, _, _ = socket.recv_fds(link, 1, 16)
            except OSError:
                data, fds = b"", []
            if data:
                watched.update(fds)
                for f in fds:
                    poll.register(f, select.POLLIN)
                continue
        elif fd != caller:  # a sandbox ended
            poll.unregister(fd)
            watched.discard(fd)
            os.close(fd)
            continue
        for f in watched:  # the caller is gone
            try:
                signal.pidfd_send_signal(f, signal.SIGKILL)
            except OSError:
                pass
        os._exit(0)
"""
_lock = threading.Lock()
_reaper: tuple[subprocess.Popen, socket.socket] | None = None
_forks_forget = False  # whether `_forget` runs in forked children


def _start() -> tuple[subprocess.Popen, socket.socket]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _PROGRAM],
            stdin=theirs,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            env={},
            start_new_session=True,
        )
    except OSError as e:
        ours.close()
        raise SandboxUnavailable(f"cannot start the process that ends sandboxes with their caller: {e}") from None
    finally:
        theirs.close()
    return proc, ours


def _forget() -> None:
    """In a forked child: the parent's reaper watches the parent; the child starts its own."""
    global _reaper, _lock
    _lock = threading.Lock()  # another thread may have held it at the fork
    if _reaper is not None:
        _reaper[1].close()
        _reaper = None


def watch(pidfd: int) -> None:
    """Have this process's reaper SIGKILL the process of `pidfd` (a sandbox's pid 1) if this process
    dies before it has ended; starts the reaper (or a new one, should it be gone) when needed."""
    global _reaper, _forks_forget
    with _lock:
        if not _forks_forget:
            os.register_at_fork(after_in_child=_forget)
            _forks_forget = True
        for attempt in range(2):
            if _reaper is not None and _reaper[0].poll() is not None:
                _reaper[1].close()
                _reaper = None
            if _reaper is None:
                _reaper = _start()
            try:
                socket.send_fds(_reaper[1], [b"w"], [pidfd], socket.MSG_NOSIGNAL)
                return
            except OSError:
                if attempt:
                    raise SandboxUnavailable("the process that ends sandboxes with their caller is gone") from None
                _reaper[0].kill()
                _reaper[0].wait()


def reaper_pid() -> int | None:
    """The pid of this process's reaper, if it started one."""
    return _reaper[0].pid if _reaper is not None else None


# What `env.launch` gives bwrap before the command: its name and the handshake's four options.
_LAUNCHED = re.compile(rb"bwrap\0--args\0\d+\0--seccomp\0\d+\0--info-fd\0\d+\0--userns-block-fd\0\d+\0")


def _read(path: str) -> bytes:
    with contextlib.suppress(OSError), open(path, "rb") as f:
        return f.read(1 << 16)
    return b""


def _left_behind(pid: str, uid: int) -> bool:
    """Whether `pid` is a sandbox's pid 1, run as host `uid`, whose outer bwrap (and so its caller) is gone."""
    status = _read(f"/proc/{pid}/status").decode(errors="replace")
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    ns_pids, uids = fields.get("NSpid", "").split(), fields.get("Uid", "").split()
    if len(ns_pids) < 2 or ns_pids[-1] != "1" or not uids or int(uids[0]) != uid:
        return False
    cmdline = _read(f"/proc/{pid}/cmdline")
    if not _LAUNCHED.match(cmdline):
        return False
    parent = fields.get("PPid", "").strip()
    return _read(f"/proc/{parent}/cmdline") != cmdline


@functools.cache
def sweep(uid: int, wait_s: float = 5.0) -> int:
    """SIGKILL every sandbox run as host `uid` whose caller died, and wait up to `wait_s` for each to
    end; returns how many there were. Once per process and uid."""
    ended = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if not _left_behind(pid, uid):
            continue
        try:
            fd = os.pidfd_open(int(pid))
        except OSError:
            continue
        # Checked again once the pidfd is open, so that the process killed is the one checked.
        if _left_behind(pid, uid):
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
                ended.append(fd)
                continue
        os.close(fd)
    deadline = time.monotonic() + wait_s
    for fd in ended:
        select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        os.close(fd)
    return len(ended)
