"""Starting one bwrap sandbox and ending all of it: nothing of a sandbox outlives `Launched.end`.

bwrap gets its options through a memfd (`--args`), so no host path appears in the command line its
pid 1 shows inside (/proc/1/cmdline), and the seccomp filter through another (`--seccomp`), which
bwrap loads into the sandbox's pid 1 and into the command. The start is a handshake: bwrap reports
the host pid of the sandbox's pid 1 (`--info-fd`) and waits (`--userns-block-fd`) while the host
takes a pidfd of it and, with cgroups, puts it in the command's group; only then does anything run
inside, so every process of the sandbox descends from that pid 1, in its pid namespace and group.

Ending SIGKILLs that pid 1 through its pidfd, which makes the kernel kill every process of the pid
namespace, whatever they did to themselves (a cleared parent-death signal, a new session); the pidfd
turns readable only once the kernel has reaped them all. With a cgroup, whatever is left in it is
then killed, and the group is removed once empty. A process leaves neither way: the pid
namespace has no way out, and the sandbox sees no cgroup filesystem. Should the caller die before
`end`, by any signal, `env.reaper` kills that pid 1 (it gets the pidfd before anything runs inside),
and the next caller sweeps sandboxes left by one whose reaper died too.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import stat
import subprocess
import threading
from dataclasses import dataclass, field

from terminalworld.core import scratch
from terminalworld.env import cgroup, holder, reaper, seccomp
from terminalworld.errors import SandboxUnavailable

_CHILD_PID = re.compile(rb'"child-pid":\s*(\d+)')


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name)  # close-on-exec; pass_fds hands it to bwrap alone
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


@dataclass
class Launched:
    """A running sandbox: the outer bwrap (`proc`, stdout and stderr on one pipe), a pidfd of the
    sandbox's pid 1 (None if bwrap failed before making it) and its cgroup, if any."""

    proc: subprocess.Popen
    init: int | None
    group: cgroup.Group | None
    token: int | None = None  # its entry in `scratch.at_termination`, which ends it at SIGTERM
    pid: int | None = None  # the host pid of the sandbox's pid 1, while `init` is open
    _pidfd: threading.Lock = field(default_factory=threading.Lock, repr=False)  # `kill` and `end` share it

    def kill(self) -> None:
        """SIGKILL the sandbox's pid 1, and so its whole pid namespace, from any thread; the thread that
        runs the command still reaps it in `end`."""
        with self._pidfd:
            if self.init is not None:
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(self.init, signal.SIGKILL)

    def unlinked_open_bytes(self, devices: set[int]) -> int:
        """The blocks of the regular files on `devices` that the sandbox's processes (those in its pid
        namespace) hold open after unlinking them: space a walk cannot see, freed when they close."""
        try:
            ns = os.readlink(f"/proc/{self.pid}/ns/pid") if self.pid is not None else None
        except OSError:
            ns = None
        held: dict[tuple[int, int], int] = {}
        for pid in filter(str.isdigit, os.listdir("/proc") if ns else []):
            try:
                if os.readlink(f"/proc/{pid}/ns/pid") != ns:
                    continue
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in fds:
                with contextlib.suppress(OSError):
                    st = os.stat(f"/proc/{pid}/fd/{fd}")
                    if st.st_nlink == 0 and stat.S_ISREG(st.st_mode) and st.st_dev in devices:
                        held[st.st_dev, st.st_ino] = st.st_blocks * 512
        return sum(held.values())

    def end(self) -> None:
        """Kill every process of the sandbox and return once all are gone (reaped, group empty)."""
        if self.token is not None:
            scratch.done(self.token)
        self.kill()
        try:  # the outer bwrap exits by itself once pid 1 is dead; it is killed only if it does not
            self.proc.wait(timeout=30 if self.init is not None else 0)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if self.init is not None:
            if not select.select([self.init], [], [], 30)[0]:
                raise RuntimeError("the sandbox's pid 1 did not exit 30 s after SIGKILL")
            with self._pidfd:  # never closed under a `kill` from another thread, which could hit a reused fd
                os.close(self.init)
                self.init = None
        if self.group is not None:
            self.group.stop()


def _map_root(pid: int, uid: int, gid: int) -> None:
    """Map uid and gid 0 of `pid`'s new user namespace to host `uid`/`gid` (what bwrap itself does
    without the handshake), with setgroups denied."""
    for name, value in (("uid_map", f"0 {uid} 1\n"), ("setgroups", "deny\n"), ("gid_map", f"0 {gid} 1\n")):
        with open(f"/proc/{pid}/{name}", "w") as f:
            f.write(value)


def _oom_first(pid: int) -> None:
    """Make `pid` (and what it forks) the OOM killer's first pick. Written by a caller with
    CAP_SYS_RESOURCE, the value is also the floor the kernel lets the process's descendants lower it
    to. Root without it (a container or VM may drop it) is like any other caller: its write is only
    the start value (the shell inside writes it too), which a command may lower to the caller's own
    floor (what the caller itself may set: 0, unless a process with the capability set it lower)."""
    with contextlib.suppress(OSError), open(f"/proc/{pid}/oom_score_adj", "w") as f:
        f.write("1000\n")


def launch(
    bwrap: str,
    options: list[str],
    argv: list[str],
    ident: tuple[int, int] | None,
    group: cgroup.Group | None,
    via: holder.Holder | None = None,
) -> Launched:
    """Start `argv` in a sandbox made by `bwrap` with `options`, as host `ident` (uid, gid; None: the
    caller). stdin is /dev/null; stdout and stderr share one pipe. `via`: the holder in whose
    namespaces bwrap starts (`env.holder`), which writes the sandbox's id maps."""
    ids = ident or (os.geteuid(), os.getegid())
    reaper.sweep(ids[0])  # sandboxes of callers that died, before this process's first
    # Popen switches identity in C between fork and exec: thread-safe, unlike preexec_fn, and one exec
    # cheaper than a setpriv wrapper. No environment: bwrap is pid 1 inside, its /proc/1/environ readable.
    spawn = {"cwd": "/", "env": {}} | ({} if ident is None else {"user": ids[0], "group": ids[1], "extra_groups": []})
    program = seccomp.program()
    if program is None:
        raise SandboxUnavailable("the sandbox's seccomp filter exists for x86_64 and aarch64 only")
    args = _memfd("bwrap-args", b"".join(a.encode() + b"\0" for a in options))
    filt = _memfd("bwrap-seccomp", program)
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    handshake = ["--args", str(args), "--seccomp", str(filt), "--info-fd", str(info_w)]
    handshake += ["--userns-block-fd", str(block_r)]
    pipes = {"stdin": subprocess.DEVNULL, "stdout": subprocess.PIPE, "stderr": subprocess.STDOUT}
    fds = (args, filt, info_w, block_r)
    words, program = ["bwrap"], bwrap  # argv[0] too names no host path
    if via is not None:  # bash's exec names bwrap "bwrap", with an empty environment
        enter = via.enter_argv()
        words, program = [*enter, "/bin/bash", "-c", 'exec -c -a bwrap "$0" "$@"', bwrap], enter[0]
    try:
        proc = subprocess.Popen(
            [*words, *handshake, *argv],
            executable=program,
            **pipes,
            pass_fds=fds,
            start_new_session=True,
            **spawn,
        )
    finally:
        for fd in fds:
            os.close(fd)
    launched = Launched(proc, None, group)
    launched.token = scratch.at_termination(launched.end)
    try:
        info = b""
        while chunk := os.read(info_r, 4096):
            info += chunk
        if m := _CHILD_PID.search(info):
            # bwrap waits on the block pipe, so its pid 1 is alive and has not forked yet.
            pid = int(m.group(1))
            launched.init = os.pidfd_open(pid)
            launched.pid = pid
            reaper.watch(launched.init)  # ended should this process die before `end`
            if via is not None:
                via.map_root(pid)
            else:
                _map_root(pid, *ids)
            _oom_first(pid)
            if group is not None:
                group.add(pid)
        with contextlib.suppress(BrokenPipeError):
            os.write(block_w, b"1")
    except BaseException:
        launched.end()
        raise
    finally:
        os.close(info_r)
        os.close(block_w)
    return launched
