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
device files are not copied, and the name they took in DIR is removed. No file DIR holds is changed
in place: a file whose content or mode changed is written as a new one, since DIR's may be hard-linked
from outside DIR (a hard-linked checkout, a package cache), and one the command left alone is not
touched. Permission bits only (never setuid, setgid or sticky): those DIR had where the command kept
them, else the copy's within the caller's umask (`chmod 777` comes back as 0777 & ~umask), with the
owner's read bit on files and full access on folders, so DIR stays usable by its owner; a root
caller gives what it writes the owner of the entry it replaces (or of its folder). Entries the copy
no longer has are removed from DIR.

Before anything is written, a result is refused (`check`) when it would write more than DIR holds
plus the disk cap (hard links count once per name, since each is written as a file of its own), goes
deeper than `MAX_DEPTH` folders, or differs from DIR in any entry git runs or reads as configuration
(`env.gitpaths`: `.git/config`, hooks, ..., and what the operator's own git configuration names in
DIR, such as a `core.hooksPath` folder or an included file; type, permission bits, content or link
text): the operator's git would run what the command wrote there. Unchanged files are compared, not rewritten,
so the work is bounded by what DIR held and what the copy's cap let the command add.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import secrets
import shutil
import stat
from dataclasses import dataclass

from terminalworld.env import copies, gitpaths, walk
from terminalworld.env.sandbox import CommandResult, Sandbox, SandboxConfig
from terminalworld.errors import InputError

_KEPT = {"disk": "it reached the disk limit", "time": "it timed out"}  # limits after which the folder stays as it was

MAX_DEPTH = 200  # folders below the top: two descriptors each while a sync runs
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_TOP = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Survey:
    """What a sync needs to know of a tree before it writes anything."""

    bytes: int  # as a sync writes it: `walk.ENTRY_BYTES` per name, each regular file's blocks once per name
    depth: int  # folders below the top
    git: dict[tuple[str, ...], tuple]  # each entry git runs or reads as configuration: what it is


def survey(tree: str, *, copy: bool, named: gitpaths.Named = gitpaths.NOTHING) -> Survey:
    """`tree` as `Survey` holds it, only while no command runs in it. `copy`: the tree is the
    sandbox's, whose files an unprivileged caller may make readable for the read; DIR's files are
    only read as they are (one of them may be hard-linked from outside DIR). `named`: what the
    operator's git configuration names in DIR (`gitpaths.configured`)."""
    unlock = os.geteuid() != 0
    total = depth = 0
    heads, found = set(), []
    for fd, name, st, parts in walk.walk(tree, unlock=unlock):
        total += walk.ENTRY_BYTES + (st.st_blocks * 512 if stat.S_ISREG(st.st_mode) else 0)
        depth = max(depth, len(parts) + stat.S_ISDIR(st.st_mode))
        path = (*parts, name)
        if name == "HEAD":
            heads.add(tuple(parts))
        if name == ".git" or gitpaths.anchors(path) or named.covers(path):  # git folders are known at the end
            found.append((path, _signature(fd, name, st, unlock, copy)))
    return Survey(total, depth, {path: what for path, what in found if gitpaths.controlled(path, heads, named)})


def _signature(fd: int, name: str, st: os.stat_result, unlock: bool, copy: bool) -> tuple:
    """What entry `name` of folder `fd` (lstat `st`) is, equal for two entries only when a sync
    leaves the one as the other; what cannot be read is unequal to anything."""
    perm = stat.S_IMODE(st.st_mode) & 0o777
    if stat.S_ISDIR(st.st_mode):
        return ("folder", perm)
    if stat.S_ISLNK(st.st_mode):
        with contextlib.suppress(OSError):
            return ("link", walk.granted(fd, unlock, 0o100, functools.partial(os.readlink, name, dir_fd=fd)))
        return ("link", object())
    if stat.S_ISREG(st.st_mode):
        return ("file", perm, _digest(fd, name, unlock, copy) or object())
    return ("other",)


def _digest(fd: int, name: str, unlock: bool, copy: bool) -> bytes | None:
    """The SHA-256 of regular file `name` in folder `fd`, or None when it cannot be read."""

    def opened() -> int:
        pfd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        try:
            if not stat.S_ISREG(os.fstat(pfd).st_mode):
                raise FileNotFoundError(name)
            reopen = functools.partial(os.open, f"/proc/self/fd/{pfd}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            return walk.granted(pfd, unlock and copy, 0o400, reopen)
        finally:
            os.close(pfd)

    try:
        f = walk.granted(fd, unlock, 0o100, opened)
    except OSError:
        return None
    try:
        digest = hashlib.sha256()
        while chunk := os.read(f, _CHUNK):
            digest.update(chunk)
        return digest.digest()
    finally:
        os.close(f)


def check(copy: str, dest: str, disk_bytes: int) -> None:
    """Raise `InputError` before anything is written when `copy` cannot be synced into `dest`: it
    writes more than `dest` holds plus `disk_bytes` (as `Survey.bytes` counts them), goes deeper than
    `MAX_DEPTH` folders, or differs from `dest` in an entry git runs or reads as configuration (the
    operator's own configuration asked first, while `dest` is still as the operator left it)."""
    named = gitpaths.configured(dest)
    ours, theirs = survey(dest, copy=False, named=named), survey(copy, copy=True, named=named)
    limit = ours.bytes + disk_bytes
    if theirs.bytes > limit:
        raise InputError(
            f"the result would take {theirs.bytes >> 20} MiB, more than the disk cap allows ({limit >> 20} MiB, "
            "hard links counted once per name)"
        )
    if theirs.depth > MAX_DEPTH:
        raise InputError(f"the result goes {theirs.depth} folders deep, more than {MAX_DEPTH}")
    if changed := sorted(p for p in ours.git.keys() | theirs.git.keys() if ours.git.get(p) != theirs.git.get(p)):
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        raise InputError(f"the result changes {'/'.join(changed[0])!a}{more}, which git runs or reads as configuration")


def _umask() -> int:
    """The caller's umask, read without setting it (another thread may be creating files)."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def _kept(st: os.stat_result, old: os.stat_result | None) -> bool:
    """Whether the copy's entry (lstat `st`) has the type and permission bits of DIR's (`old`)."""
    return (
        old is not None
        and stat.S_IFMT(old.st_mode) == stat.S_IFMT(st.st_mode)
        and (old.st_mode ^ st.st_mode) & 0o777 == 0
    )


def _mode(st: os.stat_result, old: os.stat_result | None, umask: int, owner: int) -> int:
    """The permission bits an entry the copy holds as `st` is written with over DIR's `old`: as DIR
    had them when the command kept them, else the copy's within `umask` plus `owner`; never setuid,
    setgid or sticky."""
    perm = stat.S_IMODE(st.st_mode) & 0o777
    return perm if _kept(st, old) else perm & ~umask | owner


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
        self.root_caller, self.changed, self.umask = root_caller, 0, _umask()

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
        mode = _mode(st, old, self.umask, 0o400)
        try:
            # Only a file whose mode the command kept is compared: any change makes a new inode, as
            # DIR's may be hard-linked from outside DIR, where a chmod would reach too.
            if _kept(st, old) and (cur := walk.open_regular(dfd, name)) is not None:
                try:
                    if _same_content(src, cur):
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
        # A folder whose bits the command kept keeps DIR's (set-group-ID and sticky included).
        mode = stat.S_IMODE(old.st_mode) if _kept(st, old) else _mode(st, None, self.umask, 0o700)
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
                if stat.S_IMODE(os.fstat(child_d).st_mode) != mode:
                    os.fchmod(child_d, mode)
            finally:
                os.close(child_d)
        finally:
            os.close(child_s)


def sync_back(copy: str, dest: str, *, disk_bytes: int) -> int:
    """Make folder `dest` (the caller's) hold what folder `copy` (a sandbox's, no command running in
    it) holds, as the module docstring says; returns how many entries of `dest` changed. Raises
    `InputError` before writing anything when the copy cannot be synced (`check` with `disk_bytes`)."""
    check(copy, dest, disk_bytes)
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
    be copied, when the copy cannot be synced (`check`: too large, too deep, or git configuration
    changed; the folder is then as it was), or when the folder refuses a write."""
    folder = os.path.abspath(folder)
    try:
        with copies.repo_copy(folder, prefix="tw-exec-", disk_bytes=config.disk_bytes) as copy:
            result = Sandbox(copy, config).run(command)
            if kept := [why for kind, why in _KEPT.items() if kind in result.limits]:
                return result, f"{kept[0]}: nothing was written back, {folder} is as it was"
            try:
                sync_back(copy, folder, disk_bytes=config.disk_bytes)
            except InputError as e:  # refused before anything was written
                raise InputError(f"{e}: nothing was written back, {folder} is as it was") from None
            except OSError as e:  # the caller's own folder refused a change (a read-only folder of its own)
                raise InputError(f"writing back into {folder} failed ({e}); what was written before stays") from None
            return result, None
    except shutil.Error as e:  # copytree refuses a FIFO or socket in the folder, or the copy is full
        first = e.args[0][0] if isinstance(e.args[0], list) and e.args[0] else (None, None, e)
        raise InputError(f"{folder}: cannot be copied ({first[2]})") from None
