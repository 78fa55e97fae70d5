"""Private scratch folders and temporary files that a killed run cannot leave behind for good.

Each is named after the process that made it (`<prefix><pid>-<random>`); the next one made with the
same prefix in the same folder first removes those whose process no longer exists, touching only
what this uid owns (scratch lives in world-writable places such as /dev/shm). `remove_tree` removes
a tree a sandboxed command may have filled: from directory descriptors, never following a symlink,
with one descriptor open however deep it goes (`shutil.rmtree` recurses, and fails past about a
thousand levels); a mount it meets (a copy's own tmpfs, `env.copies`) is unmounted first, without
following a symlink, so a killed run's mounts go with its folders.

Cleanup at termination: `at_termination` registers what must happen even when the process is ended
by SIGTERM or SIGHUP (remove a copy, end a sandbox). `install_cleanup` installs the handler that runs
it (newest first, then lets the signal end the process as it would have; a handler already set is
called afterwards; an ignored signal stays ignored) and the same at a normal exit. Importing this
module installs nothing: the process that runs sandboxes asks, explicitly (the command line does
at start) or by registering its first cleanup from the main thread. Only SIGKILL (and a crash) leaves
anything, for the next run's sweep.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import errno
import functools
import itertools
import os
import re
import signal
import stat
import tempfile
import threading
from collections.abc import Callable

_RANDOM = r"(\d+){}[a-z0-9_]{{8}}"  # the pid, a separator, then tempfile's eight random characters


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


@functools.cache
def _swept(pattern: re.Pattern, folder: str) -> None:
    """Remove, once per process, what dead processes left in `folder` (names `pattern` matches, the
    pid its first group)."""
    with contextlib.suppress(OSError):
        for name in os.listdir(folder):
            m = pattern.fullmatch(name)
            if not m or int(m.group(1)) == os.getpid() or _alive(int(m.group(1))):
                continue
            path = os.path.join(folder, name)
            with contextlib.suppress(OSError):
                st = os.lstat(path)
                if st.st_uid != os.geteuid():
                    continue
                remove_tree(path)


def make_dir(prefix: str, folder: str | None = None) -> str:
    """A new private folder `<folder>/<prefix><pid>-<random>` (default folder: the system's
    temporary one), after removing what killed runs left there under `prefix`."""
    folder = folder or tempfile.gettempdir()
    _swept(re.compile(re.escape(prefix) + _RANDOM.format("-")), os.path.abspath(folder))
    return tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=folder)


def make_file(prefix: str, folder: str, suffix: str = "") -> tuple[int, str]:
    """`tempfile.mkstemp` named `<prefix><pid>.<random><suffix>`, after removing what killed runs
    left there under `prefix`."""
    _swept(re.compile(re.escape(prefix) + _RANDOM.format(r"\.") + re.escape(suffix)), os.path.abspath(folder))
    return tempfile.mkstemp(dir=folder, prefix=f"{prefix}{os.getpid()}.", suffix=suffix)


_PATH = os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
_MNT_DETACH, _UMOUNT_NOFOLLOW = 2, 8


@functools.cache
def libc() -> ctypes.CDLL:
    """The C library, loaded on first use (not at import)."""
    return ctypes.CDLL(None, use_errno=True)


def unmount(fd: int, name: str) -> bool:
    """Detach the mount on folder `name` in folder `fd`, never following a symlink (the last
    component is not followed, `fd` is an inode already held). False when it cannot (not a mount,
    or not allowed)."""
    if libc().umount2(f"/proc/self/fd/{fd}/{name}".encode(), _MNT_DETACH | _UMOUNT_NOFOLLOW) == 0:
        return True
    if ctypes.get_errno() not in (errno.EINVAL, errno.EPERM, errno.ENOENT):
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), name)
    return False


def _folder(fd: int, name: str) -> int:
    """An O_PATH descriptor of folder `name` in folder `fd`, unmounted first if something is mounted
    there (a host mount: a sandboxed command cannot mount anything on the host)."""
    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    if stat.S_ISDIR(st.st_mode) and st.st_dev != os.fstat(fd).st_dev:
        unmount(fd, name)
    return os.open(name, _PATH, dir_fd=fd)


def _names(fd: int) -> list[str]:
    """The names in folder `fd` (an O_PATH descriptor), opened to its owner first if need be (a
    command may have made it unreadable or read-only; it is going anyway)."""
    st = os.fstat(fd)
    if st.st_uid == os.geteuid() and st.st_mode & 0o700 != 0o700:
        os.chmod(f"/proc/self/fd/{fd}", 0o700)
    rfd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
    try:
        return os.listdir(rfd)
    finally:
        os.close(rfd)


def remove_tree(path: str) -> None:
    """Remove `path` and everything under it, however deep; a symlink is removed, never followed.
    Entries that vanish meanwhile are fine; the tree must not be moved while this runs."""
    parent = os.open(os.path.dirname(os.path.abspath(path)), _PATH)
    try:
        try:
            fd = _folder(parent, os.path.basename(path))
        except FileNotFoundError:
            return
        except OSError:  # not a folder: a file or a symlink
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.basename(path), dir_fd=parent)
            return
        below: list[str] = []
        while True:
            child = None
            for name in _names(fd):
                try:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    if not stat.S_ISDIR(st.st_mode):
                        os.unlink(name, dir_fd=fd)
                    elif (child := _folder(fd, name)) is not None:
                        below.append(name)
                        break
                except FileNotFoundError:
                    continue
            if child is not None:
                os.close(fd)
                fd = child
                continue
            if not below:
                os.close(fd)
                with contextlib.suppress(FileNotFoundError):
                    os.rmdir(os.path.basename(path), dir_fd=parent)
                return
            up = os.open("..", _PATH, dir_fd=fd)
            os.close(fd)
            fd = up
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(below.pop(), dir_fd=fd)
    finally:
        os.close(parent)


_pending: dict[int, Callable[[], None]] = {}
_tokens = itertools.count()
_lock = threading.Lock()


def at_termination(fn: Callable[[], None]) -> int:
    """Run `fn` if the process ends (SIGTERM, SIGHUP, exit) before `done` is called with the token.
    Installs the cleanup (`install_cleanup`) when called from the main thread."""
    if threading.current_thread() is threading.main_thread():
        install_cleanup()
    with _lock:
        token = next(_tokens)
        _pending[token] = fn
    return token


def done(token: int) -> None:
    """Forget what `at_termination` registered under `token` (it has been done)."""
    with _lock:
        _pending.pop(token, None)


def _run_pending() -> None:
    while True:
        with _lock:
            if not _pending:
                return
            fn = _pending.pop(max(_pending))
        with contextlib.suppress(Exception):  # one failure must not keep the rest from running
            fn()


def _on_signal(signum: int, frame: object) -> None:
    _run_pending()
    previous = _previous.get(signum)
    if callable(previous):
        previous(signum, frame)
        return
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _forget_in_child() -> None:
    """A forked child owns none of its parent's copies or sandboxes (and a fresh lock)."""
    global _lock
    _lock = threading.Lock()
    _pending.clear()


_previous: dict[int, object] = {}
_installed: list[str] = []  # what `install_cleanup` has done in this process: "exit", "signals"


def install_cleanup() -> None:
    """Run what `at_termination` registered at exit and at SIGTERM/SIGHUP (the signal handlers only
    from the main thread, where Python allows them; a later call from there adds them). Once per
    process; a forked child starts with nothing registered."""
    with _lock:
        if "exit" not in _installed:
            os.register_at_fork(after_in_child=_forget_in_child)
            atexit.register(_run_pending)
            _installed.append("exit")
        if "signals" in _installed or threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if (was := signal.getsignal(sig)) is not signal.SIG_IGN:
                _previous[sig] = was
                signal.signal(sig, _on_signal)
        _installed.append("signals")
