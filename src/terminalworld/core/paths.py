"""Output paths checked against a command's inputs before any work starts.

A command's config names its inputs and outputs in one call (its `check_paths`);
`check_outputs` refuses, in one `InputError`, an output that cannot be written or that would
overwrite an input or be read back as one by a rerun. Local paths are compared resolved
(symlinks, `..`); remote ones (`gs://`) are left to the store.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import tempfile

from terminalworld.core.records import expand, inside
from terminalworld.errors import InputError


def _is_glob(path: str) -> bool:
    return any(c in path for c in "*?[")


def _real_pattern(pattern: str) -> list[str]:
    """A local glob as absolute path segments, its literal leading folders resolved (symlinks,
    `..`), so that it compares with resolved output paths."""
    parts = os.path.abspath(pattern).split(os.sep)[1:]
    first = next(i for i, p in enumerate(parts) if _is_glob(p))
    base = os.path.realpath(os.sep + os.sep.join(parts[:first]))
    return base.split(os.sep)[1:] + parts[first:] if base != os.sep else parts[first:]


def _glob_reaches(pattern: list[str], parts: list[str], below: bool) -> bool:
    """Whether the glob segments match the path `parts` (with `below`: some path under it)."""
    if not pattern:
        return not parts and not below
    if pattern[0] == "**":
        return (
            _glob_reaches(pattern[1:], parts, below)
            or (bool(parts) and _glob_reaches(pattern, parts[1:], below))
            or (below and not parts)
        )
    if not parts:
        return below
    return fnmatch.fnmatchcase(parts[0], pattern[0]) and _glob_reaches(pattern[1:], parts[1:], below)


def _check_writable(flag: str, path: str, folder: str) -> None:
    """Raise `InputError` unless `folder` (or its nearest existing ancestor, where it will be
    created) is a folder this process can create files in."""
    existing = folder
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise InputError(f"{flag} {path}: {existing} is a file, not a folder")
    try:
        # An unnamed temporary file: the honest test, which also holds for root on a read-only
        # mount, where os.access says yes.
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as e:
        raise InputError(f"{flag} {path}: cannot write in {existing} ({e.strerror})") from None


def check_outputs(outputs: list[tuple[str, str, str, tuple[str, ...]]], inputs: list[tuple[str, str | None]]) -> None:
    """Refuse, before any work starts, outputs that cannot be written or that touch an input.

    `outputs` are `(flag, path, "file" | "dir", companions)`, where companions are suffixes of the
    files written beside a file output (`.manifest.json`, `.partial`); `inputs` are
    `(flag, pattern)`, each pattern a file, a folder or a glob (None: not given). Paths are compared resolved (symlinks, `..`). Refused, each
    with one `InputError` naming the flags: a file output that is a folder or a folder output that
    is a file; a folder that cannot be written (the output's, or the nearest existing ancestor it
    will be made in); an output (or companion) that is an input file; an output inside an input
    folder, or a folder output holding an input file; and an output that an input glob matches
    (a folder output: any path under it), since a rerun would read it back as input. Remote
    (`gs://`) paths are left to the store."""
    files: list[tuple[str, str, str]] = []  # (flag, as given, resolved)
    folders: list[tuple[str, str, str]] = []
    globs: list[tuple[str, str, list[str]]] = []
    for flag, pattern in inputs:
        if pattern is None or "://" in pattern:
            continue
        if _is_glob(pattern):
            globs.append((flag, pattern, _real_pattern(pattern)))
        if os.path.isdir(pattern):
            folders.append((flag, pattern, os.path.realpath(pattern)))
            continue
        with contextlib.suppress(InputError):  # a pattern matching nothing is the command's to report
            files += [(flag, f, os.path.realpath(f)) for f in expand(pattern)]
    for flag, path, kind, companions in outputs:
        if "://" in path:
            continue
        real = os.path.realpath(path)
        if kind == "file" and os.path.isdir(real):
            raise InputError(f"{flag} {path}: is a folder; a file is expected")
        if kind == "dir" and os.path.exists(real) and not os.path.isdir(real):
            raise InputError(f"{flag} {path}: is a file; a folder is expected")
        _check_writable(flag, path, real if kind == "dir" else os.path.dirname(real))
        targets = [real, *(real + c for c in companions)] if kind == "file" else [real]
        for iflag, given, ireal in files:
            if ireal in targets:
                raise InputError(f"{flag} {path}: is the input {iflag} {given}; it would be overwritten")
            if kind == "dir" and inside(ireal, real):
                raise InputError(f"{flag} {path}: holds the input {iflag} {given}; an output folder holds no input")
        for iflag, given, ireal in folders:
            if inside(real, ireal) or inside(ireal, real):
                raise InputError(f"{flag} {path}: overlaps the input folder {iflag} {given}")
        for iflag, given, pattern in globs:
            parts = [t.split(os.sep)[1:] for t in targets]
            if any(_glob_reaches(pattern, p, below=kind == "dir") for p in parts):
                raise InputError(
                    f"{flag} {path}: lies in the reach of the input glob {iflag} {given!r}, "
                    "so a rerun would read it as input"
                )


def readable_file(flag: str, path: str) -> None:
    """Raise `InputError` naming `flag` unless `path` is an existing, readable local file (a remote
    URL is checked on use)."""
    if "://" in path:
        return
    problem = None if os.path.exists(path) else "no such file"
    problem = problem or (None if os.path.isfile(path) else "not a file")
    if problem is None:
        try:
            with open(path, "rb") as f:
                f.read(1)
        except OSError as e:
            problem = f"cannot be read ({e.strerror})"
    if problem:
        raise InputError(f"{flag} {path}: {problem}")


def named_files(pairs: list[str], flag: str, what: str) -> list[tuple[str, str]]:
    """`NAME=PATH` flag values as (name, path); raises `InputError` naming `flag` and `what` the path
    should be when a value is not of that form or its file does not exist."""
    out = []
    for pair in pairs:
        name, sep, path = pair.partition("=")
        if not sep or not name:
            raise InputError(f"{flag} {pair}: expected NAME=PATH to {what}")
        if not os.path.isfile(path):
            raise InputError(f"{flag} {pair}: {path} is not a file (expected NAME=PATH to {what})")
        out.append((name, path))
    return out
