"""The host's Python sources a sandboxed command can read, indexed by the functions they define.

Every sandbox binds the host's system folders read-only (`sandbox.system_binds`), and they hold
Python code beyond the sandbox's own interpreter: Debian's packages under
/usr/lib/python3/dist-packages, wheels under /usr/share/python-wheels, whole vendored trees beside
tools such as an SDK under /usr/lib. A task whose fix can be copied from there is solved without
debugging anything, so task making asks `fix_seen` before it keeps a bug.

The index is of what the sandbox shows, not of a list of packages: every `.py` file under the bound
folders (symlinks not followed, as they lead either inside, where the target is indexed itself, or
outside, which the sandbox does not show), every `.py.gz`, and the `.py` members of zip archives
(`.whl`, `.egg`, `.zip`, `.pyz`). Reading a few hundred MB of sources takes tens of seconds, so the
index is built once per process, with GNU grep doing the scan; its work is bounded by the caps
below, and what a cap left out is counted (`Sources.skipped`).
"""

from __future__ import annotations

import functools
import gzip
import os
import re
import stat
import subprocess
import threading
import zipfile
from dataclasses import dataclass

from terminalworld.env.sandbox import system_binds

MAX_SOURCES = 400_000  # sources indexed, files and archive members together
MAX_SOURCE_BYTES = 8 << 20  # a larger source is skipped
MAX_ARCHIVE_BYTES = 256 << 20  # what one archive's members may decompress to, together
MAX_DEFS_PER_SOURCE = 20_000
MAX_FUNCTION_LINES = 2_000  # of one function's text, when it is compared
_ARCHIVES = (".whl", ".egg", ".zip", ".pyz")
_BATCH = 1_000  # paths per grep call
_DEF_GREP = r"^[[:space:]]*(async[[:space:]]+)?def[[:space:]]+[A-Za-z_][A-Za-z0-9_]*"
_DEF = re.compile(rb"^[ \t]*(?:async[ \t]+)?def[ \t]+([A-Za-z_][A-Za-z0-9_]*)", re.M)
_BUILDING = threading.Lock()  # task makers ask from several threads: one build


@dataclass(frozen=True)
class Sources:
    """The indexed sources: each a (host path, archive member or None); `defs` maps a function name
    to the (source index, 1-based line) of each `def` of it; `skipped` counts what a cap left out."""

    sources: tuple[tuple[str, str | None], ...]
    defs: dict[str, tuple[tuple[int, int], ...]]
    skipped: int


def normalized(line: str) -> str:
    """A line of code with its indentation and inner runs of blanks made one space."""
    return " ".join(line.split())


def sources(roots: tuple[str, ...] | None = None) -> Sources:
    """The index of the Python sources under `roots` (default: the folders every sandbox binds from
    the host). Built once per process and set of roots: the system folders do not change under a
    run, and no sandbox can write them."""
    with _BUILDING:
        return _index(tuple(roots) if roots is not None else system_binds())


@functools.cache
def _index(roots: tuple[str, ...]) -> Sources:
    files: list[str] = []
    archives: list[str] = []
    skipped = 0
    for root in roots:
        for folder, dirs, names in os.walk(root):
            dirs.sort()
            for name in sorted(names):
                path = os.path.join(folder, name)
                kind = ".py" if name.endswith(".py") else ".gz" if name.endswith(".py.gz") else None
                kind = kind or (".zip" if name.endswith(_ARCHIVES) else None)
                if kind is None:
                    continue
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                if not stat.S_ISREG(st.st_mode):
                    continue
                if len(files) + len(archives) >= MAX_SOURCES or (kind != ".zip" and st.st_size > MAX_SOURCE_BYTES):
                    skipped += 1
                    continue
                (archives if kind == ".zip" else files).append(path)
    found: list[tuple[str, str | None]] = []
    defs: dict[str, list[tuple[int, int]]] = {}

    def add(source: tuple[str, str | None], names: list[tuple[str, int]]) -> None:
        found.append(source)
        for name, line in names[:MAX_DEFS_PER_SOURCE]:
            defs.setdefault(name, []).append((len(found) - 1, line))

    plain = [p for p in files if p.endswith(".py")]
    for path, names in _grep_defs(plain):
        add((path, None), names)
    for path in (p for p in files if p.endswith(".py.gz")):
        if (text := _read(path, None)) is not None:
            add((path, None), _defs(text))
    for path in archives:
        members, room = _members(path)
        skipped += room
        for member in members:
            if len(found) >= MAX_SOURCES:
                skipped += 1
            elif (text := _read(path, member)) is not None:
                add((path, member), _defs(text))
    return Sources(tuple(found), {k: tuple(v) for k, v in defs.items()}, skipped)


def _defs(text: bytes) -> list[tuple[str, int]]:
    """(name, line) of each `def` in `text`."""
    return [(m.group(1).decode(), text.count(b"\n", 0, m.start()) + 1) for m in _DEF.finditer(text)]


def _grep_defs(paths: list[str]) -> list[tuple[str, list[tuple[str, int]]]]:
    """(path, [(name, line), ...]) for each of `paths` that defines a function, found by GNU grep
    (an order of magnitude faster than Python's regular expressions over the same bytes)."""
    found: dict[str, list[tuple[str, int]]] = {}
    for start in range(0, len(paths), _BATCH):
        batch = paths[start : start + _BATCH]
        argv = ["grep", "-a", "-H", "-n", "-o", "-Z", "-E", "-m", str(MAX_DEFS_PER_SOURCE), "-e", _DEF_GREP, "--"]
        out = subprocess.run([*argv, *batch], capture_output=True, env={"LC_ALL": "C"}, check=False)
        if out.returncode > 1:
            raise OSError(f"grep failed over the sandbox's system folders: {out.stderr.decode(errors='replace')[:200]}")
        for row in out.stdout.splitlines():
            path, _, rest = row.partition(b"\0")
            line, _, match = rest.partition(b":")
            if line.isdigit() and match:
                found.setdefault(os.fsdecode(path), []).append((match.split()[-1].decode(), int(line)))
    return sorted(found.items())


def _members(path: str) -> tuple[list[str], int]:
    """The `.py` members of zip archive `path` within the caps, and how many the caps left out."""
    try:
        with zipfile.ZipFile(path) as archive:
            infos = [i for i in archive.infolist() if i.filename.endswith(".py") and not i.is_dir()]
    except (OSError, zipfile.BadZipFile, ValueError):
        return [], 0
    kept, total = [], 0
    for info in infos:
        if info.file_size > MAX_SOURCE_BYTES or total + info.file_size > MAX_ARCHIVE_BYTES:
            continue
        kept.append(info.filename)
        total += info.file_size
    return kept, len(infos) - len(kept)


@functools.lru_cache(maxsize=16)
def _read(path: str, member: str | None) -> bytes | None:
    """A source's bytes (at most `MAX_SOURCE_BYTES`), or None when it cannot be read."""
    try:
        if member is not None:
            with zipfile.ZipFile(path) as archive, archive.open(member) as f:
                data = f.read(MAX_SOURCE_BYTES + 1)
        elif path.endswith(".gz"):
            with gzip.open(path) as f:
                data = f.read(MAX_SOURCE_BYTES + 1)
        else:
            with open(path, "rb") as f:
                data = f.read(MAX_SOURCE_BYTES + 1)
    except (OSError, EOFError, zipfile.BadZipFile, ValueError):
        return None
    return data if len(data) <= MAX_SOURCE_BYTES else None


def function_lines(text: str, line: int) -> list[str]:
    """The normalised lines of the function whose `def` is on `line` (1-based) of `text`: the lines
    after it up to the first non-blank one indented no deeper than the `def`."""
    lines = text.splitlines()[line - 1 : line - 1 + MAX_FUNCTION_LINES]
    if not lines:
        return []
    indent = len(lines[0]) - len(lines[0].lstrip())
    body = [lines[0]]
    for row in lines[1:]:
        if row.strip() and len(row) - len(row.lstrip()) <= indent:
            break
        body.append(row)
    return [n for n in map(normalized, body) if n]


def fix_seen(function: str, fixed: list[str], roots: tuple[str, ...] | None = None) -> str | None:
    """Where a sandboxed command can read the fix of a bug in `function`, or None: the first source
    (`path` or `path!member`) with a function of that name that holds the first of the `fixed`
    lines and at least half of them, each compared normalised (`normalized`), wherever in the
    function. Comparing the fixed lines rather than the whole function also catches another version
    of the same package, whose function differs elsewhere but still holds the fix."""
    wanted = [n for n in map(normalized, fixed) if n and not n.startswith("#")]
    if not wanted:
        return None
    index = sources(roots)
    for source, line in index.defs.get(function, ()):
        path, member = index.sources[source]
        text = _read(path, member)
        if text is None:
            continue
        body = set(function_lines(text.decode(errors="replace"), line))
        if wanted[0] in body and 2 * sum(w in body for w in wanted) >= len(wanted):
            return path if member is None else f"{path}!{member}"
    return None
