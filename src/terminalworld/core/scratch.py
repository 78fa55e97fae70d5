"""Private scratch folders and temporary files that a killed run cannot leave behind for good.

Each is named after the process that made it (`<prefix><pid>-<random>`); the next one made with the
same prefix in the same folder first removes those whose process no longer exists, touching only
what this uid owns (scratch lives in world-writable places such as /dev/shm). `remove_tree` removes
a tree a sandboxed command may have filled: from directory descriptors, never following a symlink,
with one descriptor open however deep it goes (`shutil.rmtree` recurses, and fails past about a
thousand levels).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import stat
import tempfile

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
            fd = os.open(os.path.basename(path), _PATH, dir_fd=parent)
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
                    elif (child := os.open(name, _PATH, dir_fd=fd)) is not None:
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
