"""Repository copies a sandbox may write, each on a filesystem that carries its disk cap.

Every copy a sandbox works in is made here (`copy_space`, `repo_copy`). Where the caller may mount
(root), the copy's private folder `<dir>/<prefix><pid>-<random>` is first made the mount point of
its own tmpfs, sized to what the host puts there plus the disk cap, with an inode cap of one inode
per `walk.ENTRY_BYTES` of cap on top of what is there, so that floods of empty files, folders (a tree
deeper than PATH_MAX) or hard links (tmpfs charges each link an inode) meet it too; the sandbox then
fits both caps to what the copy holds when it takes the copy over (`fit`). The kernel answers a
write past the cap with ENOSPC, however the command writes and however deep, while it runs and after;
nothing polls. The mount is nosuid and nodev, so a setuid file made inside means nothing on the
host even before the hand-back clears the bit. tmpfs lives in memory, like the /dev/shm the copies
lived in before; its pages are charged to the memory cgroup of the command that writes them.

Where mounting on the host is refused (an unprivileged caller), the same tmpfs, with the same caps,
is mounted in a user and mount namespace of the caller's own and held there by a small process
(`env.holder`): the copy is then reached at `/proc/{pid}/root/{folder}`, and the sandbox starts
inside those namespaces to bind it. Only where neither works (no user namespaces, no `nsenter`) is
the copy a plain folder, which the sandbox measures with descriptor-based walks while the command
runs and after (`env.walk`); `disk_limit_kind` says which a copy made here gets.

A copy is removed when its `with` block ends, at SIGTERM or SIGHUP through `core.scratch`'s
termination handler, and otherwise (SIGKILL) by the next copy made with the same prefix in the same
folder, which unmounts and removes what dead processes left (`core.scratch`).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator

from terminalworld.core import scratch
from terminalworld.env import holder, walk

DISK_BYTES = 1 << 30  # the default disk cap: how much a command may add to a copy
SOURCE = "terminalworld-copy"  # the mounts' source name, which tells them from any other tmpfs
_NOSUID, _NODEV, _REMOUNT = 2, 4, 32
_FREE_BYTES, _FREE_INODES = 16 * 4096, 16  # below these a copy is full: the kernel refused a write


def _mount(folder: str, size: int, inodes: int, *, remount: bool = False) -> None:
    options = f"size={size},nr_inodes={inodes}" + ("" if remount else ",mode=0711")
    flags = _NOSUID | _NODEV | (_REMOUNT if remount else 0)
    if scratch.libc().mount(SOURCE.encode(), folder.encode(), b"tmpfs", flags, options.encode()) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), folder)


@functools.cache
def _mountable() -> bool:
    """Whether this caller may mount a tmpfs on the host (root)."""
    folder = tempfile.mkdtemp(prefix="tw-mount-probe-")
    try:
        _mount(folder, 4096, 16)
    except OSError:
        return False
    else:
        scratch.remove_tree(folder)
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.rmdir(folder)


def disk_limit_kind() -> str:
    """The disk cap copies made here get: "tmpfs", each copy its own size- and inode-capped tmpfs,
    enforced by the kernel (mounted on the host by a root caller, else held in a user and mount
    namespace of the caller's own, `env.holder`); "walk", a plain folder measured by the sandbox
    (neither is possible, or root may not mount here)."""
    # A root caller's sandboxes run as another uid, which could not enter a namespace root holds.
    return "tmpfs" if _mountable() or (os.geteuid() != 0 and holder.usable()) else "walk"


@contextlib.contextmanager
def copy_space(
    prefix: str, *, dir: str | None = None, content_bytes: int, disk_bytes: int = DISK_BYTES
) -> Iterator[str]:
    """A private folder (mode 0711: a root host's sandbox uid must reach what is inside) for one
    repository copy and the folders bound beside it, removed with everything in it afterwards.
    `content_bytes`: at least what the host will put there (as `walk.tree_bytes` counts it)."""
    folder = scratch.make_dir(prefix, dir)
    held: list[holder.Holder] = []

    def remove() -> None:
        for h in held:
            h.stop()  # the tmpfs goes with its namespaces
        scratch.remove_tree(folder)

    token = scratch.at_termination(remove)
    try:
        room = content_bytes + disk_bytes
        if disk_limit_kind() == "tmpfs" and _mountable():
            _mount(folder, room, room // walk.ENTRY_BYTES + 64)
        elif disk_limit_kind() == "tmpfs":
            held.append(holder.Holder(folder, room, room // walk.ENTRY_BYTES + 64))
        os.chmod(folder, 0o711)
        yield held[0].root if held else folder
    finally:
        remove()
        scratch.done(token)


@contextlib.contextmanager
def repo_copy(source: str, *, prefix: str, dir: str | None = None, disk_bytes: int = DISK_BYTES) -> Iterator[str]:
    """A copy of folder `source` (symlinks as symlinks, sparse files sparse) at `<copy_space>/repo`."""
    with copy_space(prefix, dir=dir, content_bytes=walk.tree_bytes(source), disk_bytes=disk_bytes) as folder:
        repo = os.path.join(folder, "repo")
        shutil.copytree(source, repo, symlinks=True, copy_function=_copy_file)
        yield repo


def _copy_file(source: str, dest: str) -> None:
    """`shutil.copy2` that keeps holes (a capped copy is sized to the blocks the source holds); a FIFO,
    socket or device is refused as `copy2` refuses it, without blocking on it."""
    fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise shutil.SpecialFileError(f"`{source}` is not a regular file")
        with open(dest, "wb") as fout:
            walk.copy_data(fd, fout.fileno())
    finally:
        os.close(fd)
    shutil.copystat(source, dest)


def _unescape(path: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)


def mount_of(path: str) -> str | None:
    """The mount point of the copy's tmpfs that folder `path` (a host-chosen path) lives on, or None
    when it is on any other filesystem (a held tmpfs's as the host reaches it, `env.holder`)."""
    st = os.stat(path)
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    found = holder.held(path)
    with open(f"/proc/{found[0].proc.pid}/mountinfo" if found else "/proc/self/mountinfo") as f:
        for line in f:
            if (mount := copy_mount(line)) is not None and mount[0] == dev:
                return f"/proc/{found[0].proc.pid}/root{mount[1]}" if found else mount[1]
    return None


def copy_mount(line: str) -> tuple[str, str] | None:
    """The device (`major:minor`) and mount point of mountinfo `line` when it is a copy's tmpfs
    (source `SOURCE`), else None."""
    fields, _, fs = line.partition(" - ")
    if fs.split()[:2] != ["tmpfs", SOURCE]:
        return None
    parts = fields.split()
    return parts[2], _unescape(parts[4])


def fit(mount: str, disk_bytes: int) -> None:
    """Cap copy mount `mount` at what it holds now plus `disk_bytes`, and its inodes at those in use
    plus one per `walk.ENTRY_BYTES` of `disk_bytes`. Only while no command runs in it."""
    st = os.statvfs(mount)
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    size, inodes = used + disk_bytes, st.f_files - st.f_ffree + disk_bytes // walk.ENTRY_BYTES + 1
    if (found := holder.held(mount)) is not None:
        found[0].fit(size, inodes)
    else:
        _mount(mount, size, inodes, remount=True)


def make_room(path: str, nbytes: int) -> None:
    """Let the host add `nbytes` (as `walk.tree_bytes` counts them) to the copy folder `path` lives
    on, whatever a command left there; a sandbox fits the caps again when it takes the copy over. A
    no-op on any other filesystem."""
    if (mount := mount_of(path)) is not None:
        fit(mount, nbytes)


def full(mount: str) -> bool:
    """Whether copy mount `mount` is (nearly) out of space or inodes: a write was refused."""
    st = os.statvfs(mount)
    return st.f_bavail * st.f_frsize < _FREE_BYTES or st.f_favail < _FREE_INODES
