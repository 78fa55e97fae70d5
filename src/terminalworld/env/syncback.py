"""Writing what a sandboxed command left in a copy back into the folder the copy was made from.

`sandbox exec --repo DIR` runs its command over a capped copy of DIR (`run_written_back`, with
`env.copies`: the copy's own tmpfs, mounted on the host by a root caller and held in namespaces of
its own by any other, so the kernel holds the disk cap however many processes write), and only
when the command ended within its disk and time limits makes DIR hold what the copy holds
(`sync_back`); otherwise DIR is left exactly as it was.

Everything in the copy is treated as hostile. Both trees are walked from directory descriptors,
never following a symlink and never building a path string. Regular files are written to a fresh
name in their folder (`O_CREAT | O_EXCL | O_NOFOLLOW`) and renamed over the old entry, so each file
changes atomically and nothing is written through a link the command planted, or one DIR already
had; holes are copied as holes, so a sparse file costs DIR no more blocks than it cost the copy's
cap. Symlinks are copied as symlinks (their text, never what they point to); FIFOs, sockets and
device files are not copied, and the name they took in DIR is removed. Permission bits only (no
setuid, setgid or sticky), with the owner's read bit on files and full access on folders, so DIR
stays usable by its owner; a root caller gives what it writes the owner of the entry it replaces
(or of its folder). Entries the copy no longer has are removed from DIR. A copy that would write
more than DIR held plus the disk cap (hard links count once per name, since each is written as a
file of its own) or that goes deeper than `MAX_DEPTH` folders is refused before anything is
written. Unchanged files are compared, not rewritten, so the work is bounded by what DIR held and
what the copy's cap let the command add.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import shutil
import stat

from terminalworld.env import copies, walk
from terminalworld.env.sandbox import CommandResult, Sandbox, SandboxConfig
from terminalworld.errors import InputError

_KEPT = {"disk": "it reached the disk limit", "time": "it timed out"}  # limits after which the folder stays as it was

MAX_DEPTH = 200  # folders below the top: two descriptors each while a sync runs
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_TOP = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_CHUNK = 1 << 20


def footprint(tree: str) -> tuple[int, int]:
    """(bytes, depth) of `tree` as a sync writes it: `walk.ENTRY_BYTES` per name plus every regular
    file's allocated blocks once per name (hard links are written as separate files), and how many
    folders deep it goes. Only while no command runs in it."""
    total = depth = 0
    for _, _, st, parts in walk.walk(tree, unlock=os.geteuid() != 0):
        total += walk.ENTRY_BYTES + (st.st_blocks * 512 if stat.S_ISREG(st.st_mode) else 0)
        depth = max(depth, len(parts) + stat.S_ISDIR(st.st_mode))
    return total, depth


def check(copy: str, limit: int) -> None:
    """Raise `InputError` before anything is written when `copy` cannot be synced: it writes more
    than `limit` bytes (as `footprint` counts them) or goes deeper than `MAX_DEPTH` folders."""
    total, depth = footprint(copy)
    if total > limit:
        raise InputError(
            f"the result would take {total >> 20} MiB, more than the disk cap allows ({limit >> 20} MiB, "
            "hard links counted once per name)"
        )
    if depth > MAX_DEPTH:
        raise InputError(f"the result goes {depth} folders deep, more than {MAX_DEPTH}")


def _open_dir(name: str, fd: int) -> int:
    """A read descriptor of folder `name` in folder `fd`, giving the caller's own folder the owner's
    full access first when a command took it (an unprivileged caller owns the copy)."""
    try:
        return os.open(name, _DIR, dir_fd=fd)
    except PermissionError:
        pfd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
        try:
            os.chmod(f"/proc/self/fd/{pfd}", stat.S_IMODE(os.fstat(pfd).st_mode) | 0o700)
        finally:
            os.close(pfd)
        return os.open(name, _DIR, dir_fd=fd)


def _listing(fd: int) -> dict[str, os.stat_result]:
    found = {}
    for name in os.listdir(fd):
        with contextlib.suppress(FileNotFoundError):
            found[name] = os.stat(name, dir_fd=fd, follow_symlinks=False)
    return found


def _remove(fd: int, name: str, st: os.stat_result) -> None:
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=fd)  # descriptor-based in Python >= 3.11; DIR is no longer written
    else:
        os.unlink(name, dir_fd=fd)


def _read_file(fd: int, name: str) -> int | None:
    try:
        f = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
    except PermissionError:  # a command's chmod 0 on the caller's own file
        with contextlib.suppress(OSError):
            pfd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            try:
                if stat.S_ISREG(os.fstat(pfd).st_mode):
                    os.chmod(f"/proc/self/fd/{pfd}", stat.S_IMODE(os.fstat(pfd).st_mode) | 0o400)
            finally:
                os.close(pfd)
        f = walk.open_regular(fd, name)
        if f is None:
            return None
    if stat.S_ISREG(os.fstat(f).st_mode):
        return f
    os.close(f)
    return None


def _same_content(a: int, b: int) -> bool:
    if os.fstat(a).st_size != os.fstat(b).st_size:
        return False
    offset = 0
    while chunk := os.pread(a, _CHUNK, offset):
        if os.pread(b, len(chunk), offset) != chunk:
            return False
        offset += len(chunk)
    return True


class _Sync:
    def __init__(self, root_caller: bool):
        self.root_caller, self.changed = root_caller, 0

    def _chown(self, dfd: int, old: os.stat_result | None, chown) -> None:
        """A root caller gives what it writes the owner of the entry it replaces, else the folder's."""
        if self.root_caller:
            st = old or os.fstat(dfd)
            chown(st.st_uid, st.st_gid)

    def _temp(self) -> str:
        return f".tw-sync-{os.getpid()}-{secrets.token_hex(6)}"

    def _put(self, dfd: int, name: str, tmp: str, old: os.stat_result | None) -> None:
        """Rename `tmp` over `name` (a folder in the way is removed first)."""
        if old is not None and stat.S_ISDIR(old.st_mode):
            _remove(dfd, name, old)
        os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        self.changed += 1

    def file(self, sfd: int, dfd: int, name: str, st: os.stat_result, old: os.stat_result | None) -> None:
        src = _read_file(sfd, name)
        if src is None:  # gone or no longer regular since the listing: what the copy holds now wins
            if old is not None:
                _remove(dfd, name, old)
            return
        mode = stat.S_IMODE(st.st_mode) & 0o777 | 0o400
        try:
            if old is not None and stat.S_ISREG(old.st_mode):
                cur = walk.open_regular(dfd, name)
                if cur is not None:
                    try:
                        if _same_content(src, cur):
                            if stat.S_IMODE(old.st_mode) != mode:
                                os.chmod(f"/proc/self/fd/{cur}", mode)
                            return
                    finally:
                        os.close(cur)
            tmp = self._temp()
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            out = os.open(tmp, flags, 0o600, dir_fd=dfd)
            try:
                walk.copy_data(src, out)
                self._chown(dfd, old, functools.partial(os.fchown, out))
                os.fchmod(out, mode)
                os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
            except BaseException:
                os.unlink(tmp, dir_fd=dfd)
                raise
            finally:
                os.close(out)
            self._put(dfd, name, tmp, old)
        finally:
            os.close(src)

    def link(self, sfd: int, dfd: int, name: str, old: os.stat_result | None) -> None:
        target = os.readlink(name, dir_fd=sfd)
        if old is not None and stat.S_ISLNK(old.st_mode) and os.readlink(name, dir_fd=dfd) == target:
            return
        tmp = self._temp()
        os.symlink(target, tmp, dir_fd=dfd)
        self._chown(dfd, old, lambda uid, gid: os.chown(tmp, uid, gid, dir_fd=dfd, follow_symlinks=False))
        self._put(dfd, name, tmp, old)

    def folder(self, sfd: int, dfd: int) -> None:
        """Make folder `dfd` hold what folder `sfd` holds, depth first, one level per call."""
        theirs, ours = _listing(sfd), _listing(dfd)
        for name, old in list(ours.items()):
            new = theirs.get(name)
            if new is None or not (stat.S_ISREG(new.st_mode) or stat.S_ISLNK(new.st_mode) or stat.S_ISDIR(new.st_mode)):
                _remove(dfd, name, old)  # gone from the copy, or now a FIFO, socket or device there
                self.changed += 1
                ours.pop(name)
        for name, st in theirs.items():
            old = ours.get(name)
            if stat.S_ISREG(st.st_mode):
                self.file(sfd, dfd, name, st, old)
            elif stat.S_ISLNK(st.st_mode):
                self.link(sfd, dfd, name, old)
            elif stat.S_ISDIR(st.st_mode):
                self.subfolder(sfd, dfd, name, st, old)

    def subfolder(self, sfd: int, dfd: int, name: str, st: os.stat_result, old: os.stat_result | None) -> None:
        if old is not None and not stat.S_ISDIR(old.st_mode):
            os.unlink(name, dir_fd=dfd)
            old = None
        if old is None:
            os.mkdir(name, 0o700, dir_fd=dfd)
            self.changed += 1
        child_s = _open_dir(name, sfd)
        try:
            child_d = _open_dir(name, dfd)
            try:
                if old is None:  # before its entries, which take a new folder's owner
                    self._chown(dfd, None, functools.partial(os.fchown, child_d))
                self.folder(child_s, child_d)
                mode = stat.S_IMODE(st.st_mode) & 0o777 | 0o700
                if stat.S_IMODE(os.fstat(child_d).st_mode) != mode:
                    os.fchmod(child_d, mode)
            finally:
                os.close(child_d)
        finally:
            os.close(child_s)


def sync_back(copy: str, dest: str, *, limit: int) -> int:
    """Make folder `dest` (the caller's) hold what folder `copy` (a sandbox's, no command running in
    it) holds, as the module docstring says; returns how many entries of `dest` changed. Raises
    `InputError` before writing anything when the copy cannot be synced (`check` with `limit`)."""
    check(copy, limit)
    sync = _Sync(os.geteuid() == 0)
    parent = os.open(os.path.dirname(os.path.abspath(copy)), _TOP)
    try:
        sfd = _open_dir(os.path.basename(copy), parent)  # a command may have taken the top's bits too
    finally:
        os.close(parent)
    try:
        dfd = os.open(dest, _TOP)  # the caller's own path, which may be a symlink it chose
        try:
            sync.folder(sfd, dfd)
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)
    return sync.changed


def run_written_back(folder: str, config: SandboxConfig, command: str) -> tuple[CommandResult, str | None]:
    """Run `command` in a sandbox over a capped copy of `folder` (`env.copies`: its own tmpfs wherever
    one can be had, so the kernel holds the disk cap), then make `folder` hold what the copy holds,
    only when the command ended within its disk and time limits. Returns the result and, when
    `folder` was left exactly as it was, why (one line). Raises `InputError` when the folder cannot
    be copied, when the copy cannot be synced (`check`: the folder is then as it was), or when the
    folder refuses a write."""
    folder = os.path.abspath(folder)
    try:
        with copies.repo_copy(folder, prefix="tw-exec-", disk_bytes=config.disk_bytes) as copy:
            limit = footprint(folder)[0] + config.disk_bytes
            result = Sandbox(copy, config).run(command)
            if kept := [why for kind, why in _KEPT.items() if kind in result.limits]:
                return result, f"{kept[0]}: nothing was written back, {folder} is as it was"
            try:
                sync_back(copy, folder, limit=limit)
            except InputError as e:  # refused before anything was written
                raise InputError(f"{e}: nothing was written back, {folder} is as it was") from None
            except OSError as e:  # the caller's own folder refused a change (a read-only folder of its own)
                raise InputError(f"writing back into {folder} failed ({e}); what was written before stays") from None
            return result, None
    except shutil.Error as e:  # copytree refuses a FIFO or socket in the folder, or the copy is full
        first = e.args[0][0] if isinstance(e.args[0], list) and e.args[0] else (None, None, e)
        raise InputError(f"{folder}: cannot be copied ({first[2]})") from None
