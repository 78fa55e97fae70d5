"""Where a session's repository comes from, and a shadow copy of it that commands change.

A grounding source gives the repository as the episode began, rebuilt byte for byte:

- `CodeTreeSource`: recorded exploration rows (`repo` = `pypi/NAME`), the installed distribution
  as the recorder materialises it (same files, one fixed commit, pinned file times);
- `TaskSource`: generated tasks and their solving episodes (`instance_id` = the task's name, or
  `solve-` + it), the task's `environment/repo`;
- `SnapshotSource`: production, one pinned snapshot per SWE-ZERO instance (its repository at its
  base commit) read through fsspec from the store `grounding.snapshots.build_store` writes.

`Sources` tries each in order. A `Shadow` is a private copy of the session's repository with a
sandbox over it; `replay` runs the session's commands in it, with file times pinned after each (as
the recorder does), so its state is what those commands left.

Everything under a shadow was writable by a sandboxed command, so the host reads it only through
`ShadowReader`: directory file descriptors, never following a link, regular files only, capped.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from terminalworld.env.codetrees import CodeTree, normalize_times
from terminalworld.env.sandbox import CommandResult, Sandbox, SandboxConfig
from terminalworld.errors import InputError


class Source(Protocol):
    """Gives the repository of a session as it was when the episode began."""

    def has(self, row: dict[str, Any]) -> bool:
        """Whether this source holds the repository of `row` (a held-out row or a task session)."""

    def materialize(self, row: dict[str, Any], dest: Path) -> None:
        """Write that repository into the new folder `dest`."""


@dataclass
class CodeTreeSource:
    """The recorder's code trees, by `repo` (`pypi/NAME`)."""

    trees: dict[str, CodeTree] | None = None

    def _trees(self) -> dict[str, CodeTree]:
        if self.trees is None:
            from terminalworld.env.codetrees import discover_code_trees

            self.trees = {t.repo: t for t in discover_code_trees()}
        return self.trees

    def has(self, row: dict[str, Any]) -> bool:
        """Whether `row`'s repo is one of the code trees."""
        return str(row.get("repo") or "").startswith("pypi/") and row["repo"] in self._trees()

    def materialize(self, row: dict[str, Any], dest: Path) -> None:
        """The tree as the recorder builds it: same files, one fixed commit."""
        from terminalworld.env.codetrees import materialize

        materialize(self._trees()[row["repo"]], dest)


@dataclass(frozen=True)
class TaskSource:
    """Generated tasks, by task name (`instance_id`, or `solve-NAME` for a recorded solving episode)."""

    tasks_dir: Path

    def _task(self, row: dict[str, Any]) -> Path:
        name = str(row["instance_id"]).removeprefix("solve-")
        return self.tasks_dir / name

    def has(self, row: dict[str, Any]) -> bool:
        """Whether a task of that name is in the folder."""
        from terminalworld.tasks.layout import REPO_DIR

        return (self._task(row) / REPO_DIR).is_dir()

    def materialize(self, row: dict[str, Any], dest: Path) -> None:
        """The task's `environment/repo` (its one commit included)."""
        from terminalworld.tasks.layout import REPO_DIR

        shutil.copytree(self._task(row) / REPO_DIR, dest, symlinks=True)


@dataclass
class Sources:
    """The first source holding a row's repository."""

    sources: Sequence[Source] = field(default_factory=lambda: [CodeTreeSource()])

    def find(self, row: dict[str, Any]) -> Source:
        """The source of `row`'s repository; an `InputError` naming the row when none has it."""
        for s in self.sources:
            if s.has(row):
                return s
        raise InputError(
            f"{row.get('instance_id')}: no grounding source holds repository {row.get('repo')!r} "
            "(code trees, --grounding-tasks, --grounding-store)"
        )


def sources(*, tasks: str | None = None, store: str | None = None) -> Sources:
    """The sources a run names: a snapshot store and a task folder when given, then the code trees."""
    from terminalworld.grounding.snapshots import SnapshotSource

    chain: list[Source] = []
    if store:
        chain.append(SnapshotSource(store))
    if tasks:
        chain.append(TaskSource(Path(tasks)))
    chain.append(CodeTreeSource())
    return Sources(chain)


class Shadow:
    """A private copy of a session's repository and a sandbox over it (file times pinned after each
    command, as the recorder does, unless the caller's episode keeps real times)."""

    def __init__(self, repo: Path, config: SandboxConfig, *, pin_times: bool = True):
        self.repo, self.pin_times = repo, pin_times
        self.sandbox = Sandbox(str(repo), config)
        self.reader = ShadowReader(repo)
        self.baseline = baseline_of(self.reader)  # the state the episode began with

    def run(self, command: str) -> CommandResult:
        """Run `command` in the sandbox, file times pinned afterwards."""
        result = self.sandbox.run(command)
        if self.pin_times:
            normalize_times(self.repo)
        return result

    def replay(self, commands: Sequence[str]) -> list[CommandResult]:
        """Run the session's commands in order."""
        return [self.run(c) for c in commands]


@contextlib.contextmanager
def shadow(row: dict[str, Any], *, source: Sources, config: SandboxConfig) -> Iterator[Shadow]:
    """A fresh shadow of `row`'s repository as the episode began (removed afterwards)."""
    from terminalworld.corpus.actions import workspace_root

    origin = source.find(row)
    with tempfile.TemporaryDirectory(prefix="tw-ground-", dir=workspace_root(), ignore_cleanup_errors=True) as tmp:
        os.chmod(tmp, 0o711)  # a root host runs the sandbox as an unprivileged uid, which must reach the repo
        repo = Path(tmp, "repo")
        origin.materialize(row, repo)
        normalize_times(repo)
        yield Shadow(repo, config)


MAX_FILE_BYTES = 1 << 20  # a file larger than this is shown by its first MiB
MAX_ENTRIES = 10_000  # entries of one folder the host lists (a command can make millions)
MAX_VISITED = 50_000  # entries a walk looks at, in all its folders
MAX_WALK = 5000  # files a walk gives
BASELINE_READ = 256 << 20  # bytes the start state's digests read; later files are compared by size
BASELINE_TEXT = 32 << 20  # bytes of the start state's text kept for diffs, all files together
DIFF_FILE_BYTES = 256 << 10  # a file's first bytes that a diff compares


class ShadowReader:
    """Reads a repository copy that sandboxed commands may have changed: paths are walked one
    component at a time through directory descriptors with `O_NOFOLLOW`, so a link never leads
    out of the copy; only regular files are read, at most `MAX_FILE_BYTES` each; a folder's
    listing and a walk are capped (`MAX_ENTRIES`, `MAX_VISITED`)."""

    def __init__(self, root: Path):
        self.root = root

    def _parts(self, rel: str) -> list[str] | None:
        parts = [p for p in rel.split("/") if p not in ("", ".")]
        return None if ".." in parts else parts

    @contextlib.contextmanager
    def _dir(self, parts: list[str]) -> Iterator[int | None]:
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
        fd = os.open(self.root, flags)
        try:
            for p in parts:
                try:
                    nxt = os.open(p, flags, dir_fd=fd)
                except OSError:
                    os.close(fd)
                    fd = -1
                    break
                os.close(fd)
                fd = nxt
            yield None if fd < 0 else fd
        finally:
            if fd >= 0:
                os.close(fd)

    def _stat(self, rel: str) -> os.stat_result | None:
        parts = self._parts(rel)
        if not parts:
            return None
        with self._dir(parts[:-1]) as fd:
            if fd is None:
                return None
            try:
                return os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
            except OSError:
                return None

    def kind(self, rel: str) -> str | None:
        """`file`, `dir`, `other` (a link, a device) or None (missing)."""
        parts = self._parts(rel)
        if parts is None:
            return None
        if not parts:
            return "dir"
        st = self._stat(rel)
        if st is None:
            return None
        return "file" if stat.S_ISREG(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode) else "other"

    def size(self, rel: str) -> int | None:
        """The size of the regular file at `rel` (None when it is not one), without reading it."""
        st = self._stat(rel)
        return st.st_size if st is not None and stat.S_ISREG(st.st_mode) else None

    def read(self, rel: str, limit: int = MAX_FILE_BYTES) -> bytes | None:
        """The first `limit` bytes (at most `MAX_FILE_BYTES`) of the regular file at `rel` (None when
        it is not one)."""
        parts = self._parts(rel)
        if not parts:
            return None
        with self._dir(parts[:-1]) as fd:
            if fd is None:
                return None
            try:
                f = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
            except OSError:
                return None
            try:
                if not stat.S_ISREG(os.fstat(f).st_mode):
                    return None
                return os.read(f, max(0, min(limit, MAX_FILE_BYTES)))
            finally:
                os.close(f)

    def listdir(self, rel: str, limit: int = MAX_ENTRIES) -> list[tuple[str, str]]:
        """(name, kind) of at most `limit` entries of the folder at `rel` (the first the folder
        yields), sorted by name; empty when it is not one."""
        parts = self._parts(rel)
        if parts is None:
            return []
        with self._dir(parts) as fd:
            if fd is None:
                return []
            out = []
            with os.scandir(fd) as entries:
                for entry in entries:
                    if len(out) >= limit:
                        break
                    kind = "dir" if entry.is_dir(follow_symlinks=False) else "file"
                    if kind == "file" and not entry.is_file(follow_symlinks=False):
                        kind = "other"
                    out.append((entry.name, kind))
            return sorted(out)

    def walk(self, rel: str, *, skip: frozenset[str] = frozenset({".git"}), limit: int = MAX_WALK) -> list[str]:
        """Paths (relative to the root) of the regular files under `rel`, sorted, at most `limit`."""
        return self.files(rel, skip=skip, limit=limit)[0]

    def files(
        self, rel: str, *, skip: frozenset[str] = frozenset({".git"}), limit: int = MAX_WALK
    ) -> tuple[list[str], bool]:
        """`walk`'s paths, and whether it stopped before the end: at `limit` files, a folder's
        `MAX_ENTRIES` or `MAX_VISITED` entries in all."""
        out: list[str] = []
        stack, visited, cut = [rel.strip("/") or "."], 0, False
        while stack:
            if len(out) >= limit or visited >= MAX_VISITED:
                cut = True
                break
            folder = stack.pop()
            room = min(MAX_ENTRIES, MAX_VISITED - visited)
            listed = self.listdir(folder, room + 1)
            cut |= len(listed) > room
            visited += len(listed)
            for name, kind in listed[:room]:
                path = name if folder == "." else f"{folder}/{name}"
                if kind == "dir" and name not in skip:
                    stack.append(path)
                elif kind == "file":
                    out.append(path)
        return sorted(out)[:limit], cut or len(out) > limit


def _binary(data: bytes) -> bool:
    return b"\0" in data[:8192]


@dataclass
class Baseline:
    """The state an episode began with, for the changes a later state has, held in bounded memory:
    each file's size and the digest of its first `MAX_FILE_BYTES` (None past `BASELINE_READ`
    bytes read in all, where the size alone is compared), and for diffs the first
    `DIFF_FILE_BYTES` of each text file, while `BASELINE_TEXT` bytes in all last."""

    files: dict[str, tuple[int, bytes | None]] = field(default_factory=dict)
    text: dict[str, bytes] = field(default_factory=dict)

    def changed(self, rel: str, size: int, read: Callable[[], bytes | None]) -> bool | None:
        """Whether the file at `rel`, now of `size` bytes, differs from the start: by its size, else
        by the digest of what `read` gives (its first `MAX_FILE_BYTES`). None: not compared, when
        the start's digest or that read is missing."""
        start = self.files.get(rel)
        if start is None or start[0] != size:
            return True
        if start[1] is None:
            return None
        data = read()
        return None if data is None else hashlib.sha256(data).digest() != start[1]


def baseline_of(reader: ShadowReader) -> Baseline:
    """The start state of `reader`'s copy (`.git` left out), in bounded memory and reads."""
    out = Baseline()
    read = kept = 0
    for f in reader.walk("."):
        size = reader.size(f)
        if size is None:
            continue
        data = reader.read(f) if read < BASELINE_READ else None
        read += len(data or b"")
        out.files[f] = (size, None if data is None else hashlib.sha256(data).digest())
        if data is not None and not _binary(data) and kept + min(size, DIFF_FILE_BYTES) <= BASELINE_TEXT:
            out.text[f] = data[:DIFF_FILE_BYTES]
            kept += len(out.text[f])
    return out
