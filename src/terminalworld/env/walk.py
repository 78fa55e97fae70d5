"""Walks of a tree a sandboxed command could have written, which host-side code treats as hostile.

Every walk works from directory file descriptors: each folder is opened with O_PATH | O_NOFOLLOW |
O_DIRECTORY relative to its parent's descriptor, so a symlink is never followed, a name that stops
being a folder is skipped, and no path string (which PATH_MAX bounds) is built. One descriptor is
open at a time, however deep the tree: the walk climbs back through `..` and checks that it lands on
the folder it came from, so a tree changed under it (possible only while a command runs, i.e. during
the disk poll) raises `TreeChanged` instead of leading anywhere else. Entries that vanish are skipped.
A walk with `unlock` (a non-root host, which owns every folder its commands made) gives itself, for
the one call, the read or search bit a command took from a folder, so no mode hides a folder's
content or stops the climb; without it, a folder it may not read is measured empty and a climb
refused raises `TreeChanged` (never `PermissionError`).
Files are read only with no-follow, non-blocking opens, then checked to be regular (a FIFO cannot
block, a device is never opened as one).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import shutil
import stat
from collections.abc import Iterator

_PATH = os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
_READ_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_READ_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_SETID = stat.S_ISUID | stat.S_ISGID
ENTRY_BYTES = 4096  # what each name charges to a disk cap, so floods of empty files or hard links meet it too


class TreeChanged(OSError):
    """The tree moved under a walk (a folder's `..` is no longer the folder the walk came from)."""


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _proc(fd: int) -> str:
    return f"/proc/self/fd/{fd}"  # the inode `fd` holds, even an O_PATH one: no name is looked up again


def granted(fd: int, unlock: bool, bits: int, call):
    """`call()`, and when the folder (or file) `fd` holds refuses it and `unlock`: again with `bits` added to
    the owner's mode for the call (a non-root host owns what its commands made, whatever mode a
    command left, chmod 0 or a write-only 0300 included), the mode put back afterwards."""
    try:
        return call()
    except PermissionError:
        if not unlock:
            raise
    mode = stat.S_IMODE(os.fstat(fd).st_mode)
    os.chmod(_proc(fd), mode | bits)
    try:
        return call()
    finally:
        os.chmod(_proc(fd), mode)


def _listing(fd: int, unlock: bool) -> list[tuple[str, os.stat_result]]:
    """The entries of the folder `fd` holds (an O_PATH descriptor) with their lstat. `unlock` opens a
    folder the caller may not read or search for the listing (see `granted`)."""

    def entries() -> list[tuple[str, os.stat_result]]:
        rfd = os.open(".", _READ_DIR, dir_fd=fd)
        try:
            names = os.listdir(rfd)
        finally:
            os.close(rfd)
        found = []
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                found.append((name, os.stat(name, dir_fd=fd, follow_symlinks=False)))
        return found

    try:
        return granted(fd, unlock, 0o500, entries)
    except (FileNotFoundError, PermissionError):
        return []


def walk(root: str, relpath: str = "", *, unlock: bool = False) -> Iterator[tuple[int, str, os.stat_result, list[str]]]:
    """(folder descriptor, name, lstat, the folder's names below the start) of every entry under
    `root/relpath` (`root` a host-chosen folder, `relpath` reached without following symlinks),
    parents before children; descriptor and list hold until the next item. Raises `TreeChanged`, and
    OSError when `relpath` is not a folder."""
    fd = _descend(root, _parts(relpath))
    stack, parts = [(os.fstat(fd), _listing(fd, unlock))], []
    try:
        while stack:
            pending = stack[-1][1]
            if not pending:
                stack.pop()
                if stack:
                    parts.pop()
                    try:
                        up = granted(fd, unlock, 0o100, functools.partial(os.open, "..", _PATH, dir_fd=fd))
                    except PermissionError:  # a command took the search bit away: a poll measures again
                        raise TreeChanged(errno.EACCES, "a folder of the tree cannot be searched", root) from None
                    os.close(fd)
                    fd = up
                    if not _same(os.fstat(fd), stack[-1][0]):
                        raise TreeChanged(errno.ESTALE, "the tree changed during the walk", root)
                continue
            name, st = pending.pop()
            yield fd, name, st, parts
            if not stat.S_ISDIR(st.st_mode):
                continue
            try:
                child = granted(fd, unlock, 0o100, functools.partial(os.open, name, _PATH, dir_fd=fd))
            except OSError:
                continue  # vanished, or no longer a folder (ENOTDIR, ELOOP for a symlink)
            if not _same(os.fstat(child), st):
                os.close(child)
                continue
            os.close(fd)
            fd = child
            parts.append(name)
            stack.append((st, _listing(fd, unlock)))
    finally:
        os.close(fd)


def tree_bytes(root: str, *, unlock: bool = False) -> int:
    """What the tree under `root` occupies: `ENTRY_BYTES` per name plus each inode's allocated
    blocks once (hard links share blocks but not names)."""
    names, blocks = 0, {}
    for _, _, st, _ in walk(root, unlock=unlock):
        names += 1
        blocks[st.st_dev, st.st_ino] = st.st_blocks * 512
    return names * ENTRY_BYTES + sum(blocks.values())


def _clear_setid(fd: int, name: str, st: os.stat_result) -> None:
    """Drop the setuid and setgid bits of regular file `name` (in folder `fd`), the inode listed."""
    with contextlib.suppress(FileNotFoundError):
        pfd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        try:
            now = os.fstat(pfd)
            if _same(now, st) and stat.S_ISREG(now.st_mode):
                os.chmod(_proc(pfd), stat.S_IMODE(now.st_mode) & ~_SETID)
        finally:
            os.close(pfd)


def give_tree(root: str, uid: int, gid: int) -> None:
    """Make `uid`/`gid` own `root` and everything under it (symlinks themselves, never a target)
    and clear every setuid and setgid bit of a regular file. Only while nothing runs in the tree."""
    top = os.lstat(root)
    if (top.st_uid, top.st_gid) != (uid, gid):
        os.chown(root, uid, gid, follow_symlinks=False)
    for fd, name, st, _ in walk(root):
        if (st.st_uid, st.st_gid) != (uid, gid):
            with contextlib.suppress(FileNotFoundError):
                os.chown(name, uid, gid, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISREG(st.st_mode) and st.st_mode & _SETID:
            _clear_setid(fd, name, st)


def open_regular(fd: int, name: str) -> int | None:
    """A read descriptor for `name` in folder `fd` if it is a regular file (not a symlink, FIFO,
    device or socket), else None."""
    try:
        f = os.open(name, _READ_FILE, dir_fd=fd)
    except OSError:
        return None
    if stat.S_ISREG(os.fstat(f).st_mode):
        return f
    os.close(f)
    return None


def _parts(relpath: str) -> list[str]:
    parts = [p for p in relpath.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"{relpath}: a path below the tree has no .. component")
    return parts


def _descend(root: str, folders: list[str], *, create: bool = False) -> int:
    """An O_PATH descriptor of `root/folders...`, each component a real folder (made when missing
    and `create`; a non-folder in the way is replaced). Raises OSError when one is not a folder.
    `root` itself is the host's choice and may be reached through a symlink."""
    fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in folders:
            if create:
                with contextlib.suppress(OSError):
                    st = os.stat(part, dir_fd=fd, follow_symlinks=False)
                    if not stat.S_ISDIR(st.st_mode):
                        os.unlink(part, dir_fd=fd)
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            nxt = os.open(part, _PATH, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def lstat(root: str, relpath: str) -> os.stat_result | None:
    """The lstat of `root/relpath`, reached without following symlinks; None when missing."""
    *folders, name = _parts(relpath)
    try:
        fd = _descend(root, folders)
    except OSError:
        return None
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    finally:
        os.close(fd)


def open_file(root: str, relpath: str) -> int | None:
    """A read descriptor for `root/relpath` when every folder on the way is a real one and the
    entry a regular file; else None."""
    *folders, name = _parts(relpath)
    try:
        fd = _descend(root, folders)
    except OSError:
        return None
    try:
        return open_regular(fd, name)
    finally:
        os.close(fd)


def read_regular(root: str, relpath: str, *, max_bytes: int) -> bytes | None:
    """The contents of `root/relpath` when it is a regular file (see `open_file`) of at most
    `max_bytes`; None when it is missing, anything else, or larger."""
    if (f := open_file(root, relpath)) is None:
        return None
    with os.fdopen(f, "rb") as fh:
        data = fh.read(max_bytes + 1)
    return data if len(data) <= max_bytes else None


def copy_in(source: str, root: str, relpath: str) -> None:
    """Copy host file or folder `source` (trusted) to `root/relpath` in a tree a command could have
    written: no symlink on the way is followed, and an entry in the way that is not a folder (or, for
    a file, the file's own name, whatever it is) is replaced rather than written through."""
    parts = _parts(relpath)
    if os.path.isdir(source):
        for here, _, files in os.walk(source):
            rel = os.path.relpath(here, source)
            below = parts + ([] if rel == "." else rel.split("/"))
            os.close(_descend(root, below, create=True))
            for name in files:
                copy_in(os.path.join(here, name), root, "/".join([*below, name]))
        return
    fd = _descend(root, parts[:-1], create=True)
    try:
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            os.unlink(parts[-1], dir_fd=fd)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        out = os.open(parts[-1], flags, stat.S_IMODE(os.stat(source).st_mode) & 0o777, dir_fd=fd)
    finally:
        os.close(fd)
    with open(source, "rb") as fin, os.fdopen(out, "wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)


def copy_data(src: int, dst: int) -> None:
    """Copy regular file `src` into the empty file `dst` (descriptors), region by region, leaving holes
    as holes: a sparse file costs the copy no more blocks than the original."""
    size, offset = os.fstat(src).st_size, 0
    while offset < size:
        try:
            start = os.lseek(src, offset, os.SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:  # only a hole is left
                break
            raise
        end = os.lseek(src, start, os.SEEK_HOLE)
        while start < end:
            try:  # in the kernel where the filesystems allow it
                done = os.copy_file_range(src, dst, end - start, start, start)
            except OSError as e:
                if e.errno not in (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                    raise
                chunk = os.pread(src, min(1 << 20, end - start), start)
                done = os.pwrite(dst, chunk, start) if chunk else 0
            if not done:
                break
            start += done
        offset = end
    os.ftruncate(dst, size)


def copy_out(root: str, relpath: str, dest: str) -> None:
    """Copy the folders and regular files under `root/relpath` to `dest` (created, merged into), the
    files' permission bits without setuid/setgid; symlinks, FIFOs, devices and sockets are left out,
    so nothing copied can point or block anywhere on the host."""
    os.makedirs(dest, exist_ok=True)
    for fd, name, st, parts in walk(root, relpath):
        target = os.path.join(dest, *parts, name)
        if stat.S_ISDIR(st.st_mode):
            os.makedirs(target, exist_ok=True)
        elif stat.S_ISREG(st.st_mode) and (src := open_regular(fd, name)) is not None:
            with os.fdopen(src, "rb") as fin, open(target, "wb") as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
            os.chmod(target, stat.S_IMODE(st.st_mode) & 0o777)
