"""Reading record files and writing outputs, local or remote, through fsspec.

Inputs are globs over `.jsonl`, `.jsonl.gz`, `.jsonl.zst`, `.json` and `.parquet` files. Every
record carries where it came from (file, line) so that a malformed one is reported, not dropped.

The reader contract: a record that cannot be parsed (bytes that are not UTF-8, text that is not
JSON, JSON nested past the interpreter's recursion limit) is a `BadLine` with its file and line,
counted by the caller; a container that cannot be decoded (a gzip or zstd stream that is corrupt,
truncated or followed by trailing bytes, a parquet file without its footer, an unreadable file) is
an `InputError` naming the file and the line and byte offset reached, because nothing after that
point can be trusted or counted.

Outputs are replaced atomically: a reader never sees half a file, and the temporary files of a
killed write are swept by the next write of the same output (`atomic_output`).
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import io
import json
import os
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import fsspec
from fsspec.core import url_to_fs

from terminalworld.core import scratch
from terminalworld.errors import InputError


@dataclass(frozen=True)
class BadLine:
    """A record that could not be read: its file, its 1-based line, and why."""

    file: str
    line: int
    reason: str

    def to_json(self) -> dict[str, Any]:
        """`{file, line, reason}` as a JSON-ready dict."""
        return {"file": self.file, "line": self.line, "reason": self.reason}


@dataclass(frozen=True)
class Record:
    """One input record: its file, its 1-based position (line of a JSON Lines file, element of a
    JSON list, row of a parquet file) and its parsed value."""

    file: str
    line: int
    value: Any
    raw: bytes | None = None  # the source line of a JSON Lines record, for copying it unchanged

    def line_bytes(self) -> bytes:
        """The record as one JSON Lines line (its source bytes when it came from one)."""
        if self.raw is not None:
            return as_line(self.raw)
        return json.dumps(self.value, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def as_line(raw: bytes) -> bytes:
    """Raw bytes of one line, newline-terminated (a file's last line may lack its newline)."""
    return raw if raw.endswith(b"\n") else raw + b"\n"


def expand(pattern: str) -> list[str]:
    """Files matching a glob (or one path), sorted, with their protocol kept."""
    fs, path = url_to_fs(pattern)
    matches = sorted(fs.glob(path)) if any(c in path for c in "*?[") else ([path] if fs.exists(path) else [])
    files = [m for m in matches if fs.isfile(m)]
    if not files:
        raise InputError(f"no file matches {pattern!r}")
    return [fs.unstrip_protocol(f) if "://" in pattern else f for f in files]


def expand_all(patterns: list[str] | str) -> list[str]:
    """Files matching any of the patterns (a string is one pattern): in pattern order, sorted within
    each, every file once at its first match. Raises `InputError` when a pattern matches no file."""
    patterns = [patterns] if isinstance(patterns, str) else patterns
    seen: dict[str, None] = {}
    for p in patterns:
        seen.update(dict.fromkeys(expand(p)))
    return list(seen)


@dataclass(frozen=True)
class FilePart:
    """Part of one input file, for sharded jobs: the records whose 1-based line (element, row)
    lies in [first, stop) and whose line number is `stripe` modulo `stripes`. The whole file by
    default. Lines outside the part are skipped before decoding, so a part costs its file's
    decompression plus its own records' parsing."""

    path: str
    first: int = 1
    stop: int | None = None
    stripe: int = 0
    stripes: int = 1

    def holds(self, n: int) -> bool:
        """Whether the record at line `n` belongs to this part."""
        return self.first <= n and (self.stop is None or n < self.stop) and n % self.stripes == self.stripe


@functools.cache
def decode_errors() -> tuple[type[BaseException], ...]:
    """What a failing container raises while it is read: gzip and zstd streams (corrupt,
    truncated, trailing bytes), parquet, and the file system. Looked up on the first failure, so
    that reading JSON Lines never imports pyarrow."""
    errors: list[type[BaseException]] = [OSError, EOFError, zlib.error]
    with contextlib.suppress(ImportError):
        from backports.zstd import ZstdError

        errors.append(ZstdError)
    with contextlib.suppress(ImportError):
        from zstandard import ZstdError as ZstandardError

        errors.append(ZstandardError)
    with contextlib.suppress(ImportError):
        from pyarrow import ArrowException

        errors.append(ArrowException)
    return tuple(errors)


def undecodable(path: str, e: BaseException, where: str) -> InputError:
    """The `InputError` for a container that failed to decode at `where` (the line and byte
    offset reached)."""
    if isinstance(e, OSError) and e.strerror:
        reason = e.strerror
    else:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    kind = {"gzip": "gzip", "zstd": "zstd"}.get(_compression(path) or "", "")
    what = f"not a readable {kind} file" if kind else "cannot be read"
    return InputError(f"{path}: {what} ({reason}), {where}")


def _compression(path: str) -> str | None:
    if path.endswith(".gz"):
        return "gzip"
    if path.endswith(".zst"):
        return "zstd"
    return None


def iter_records(patterns: list[str] | str) -> Iterator[Record | BadLine]:
    """Every record of every matching file, in file order then line order.

    JSON Lines files give one record per line; a `.json` file gives each element of its top-level
    list (or itself when it is one object); parquet gives one record per row. Lines that are not
    UTF-8 or not JSON come back as `BadLine`s.
    """
    for path in expand_all(patterns):
        yield from iter_part(FilePart(path))


def iter_part(part: FilePart) -> Iterator[Record | BadLine]:
    """The records of one file part, in line order (see `iter_records` for the formats)."""
    if part.path.endswith(".parquet"):
        yield from (r for r in _iter_parquet(part.path) if part.holds(r.line))
    elif part.path.endswith(".json"):
        yield from (r for r in _iter_json(part.path) if part.holds(r.line))
    else:
        yield from _iter_jsonl(part)


def iter_lines(path: str) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, raw bytes) of every line of a (compressed) text file. Raises
    `InputError` naming the file, the last complete line and its byte offset (in the decompressed
    text) when the file cannot be read to its end."""
    n = offset = 0
    try:
        with fsspec.open(path, "rb", compression=_compression(path)) as f:
            for raw in f:
                n += 1
                yield n, raw
                offset += len(raw)
    except decode_errors() as e:
        raise undecodable(path, e, f"after line {n} (byte {offset} of its text)") from None


def is_record_line(raw: bytes) -> bool:
    """Whether a JSON Lines line is a record (a `Record` or a `BadLine`), not a blank line."""
    try:
        return bool(raw.decode("utf-8").strip())
    except UnicodeDecodeError:
        return True


def parse_json(text: str) -> tuple[Any, str | None, int]:
    """(value, None, 1) for JSON text, or (None, why it is not JSON, the 1-based line of `text`
    where it fails): a syntax error with its column, or nesting deeper than the interpreter's
    recursion limit (which must be a counted bad record, not a crash)."""
    try:
        return json.loads(text), None, 1
    except json.JSONDecodeError as e:
        return None, f"invalid JSON: {e.msg} at column {e.colno}", e.lineno
    except RecursionError:
        return None, "invalid JSON: nested too deeply to parse", 1


def _iter_jsonl(part: FilePart) -> Iterator[Record | BadLine]:
    path = part.path
    for n, raw in iter_lines(path):
        if part.stop is not None and n >= part.stop:
            return
        if not part.holds(n):
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            yield BadLine(path, n, f"undecodable bytes: {e.reason} at byte {e.start}")
            continue
        if not text.strip():
            continue
        value, problem, _ = parse_json(text)
        yield BadLine(path, n, problem) if problem else Record(path, n, value, raw)


def _iter_json(path: str) -> Iterator[Record | BadLine]:
    try:
        with fsspec.open(path, "rb", compression=_compression(path)) as f:
            raw = f.read()
    except decode_errors() as e:
        raise undecodable(path, e, "before its first record") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        yield BadLine(path, raw.count(b"\n", 0, e.start) + 1, f"undecodable bytes: {e.reason}")
        return
    value, problem, line = parse_json(text)
    if problem:
        yield BadLine(path, line, problem)
        return
    # A bare list of chat messages is one mini-swe-agent trajectory, not a list of records.
    if isinstance(value, list) and not (value and isinstance(value[0], dict) and "role" in value[0]):
        for i, v in enumerate(value, start=1):
            yield Record(path, i, v)
    else:
        yield Record(path, 1, value)


def _iter_parquet(path: str) -> Iterator[Record | BadLine]:
    import pyarrow.parquet as pq

    n = 0
    try:
        with fsspec.open(path, "rb") as f:
            for batch in pq.ParquetFile(f).iter_batches(batch_size=1024):
                rows = batch.to_pylist()
                for row in rows:
                    n += 1
                    yield Record(path, n, row)
    except decode_errors() as e:
        raise undecodable(path, e, f"after row {n}") from None


_UMASK = os.umask(0)
os.umask(_UMASK)


def inside(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or lies under it (both absolute, resolved)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _remove_empty_folders(folder: str, top: str | None) -> None:
    """Remove `folder` and its parents up to `top` (None: none) while they are empty: a failed
    write leaves nothing behind, not even the folders it made."""
    while top is not None and inside(folder, top):
        try:
            os.rmdir(folder)
        except OSError:
            return
        if folder == top:
            return
        folder = os.path.dirname(folder)


def is_local(fs: Any) -> bool:
    """Whether the fsspec filesystem `fs` is this machine's own (a rename there is atomic)."""
    protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return bool({"file", "local"} & set(protocols))


@contextlib.contextmanager
def atomic_output(path: str, mode: str = "wb") -> Iterator[io.IOBase]:
    """Open `path` for writing so that it appears only when complete.

    Locally: a temporary file `.{name}.{pid}.*.tmp` in the same folder, renamed over the target;
    the temporaries that killed writes left there are removed first (`scratch.make_file`). On object stores an upload is published only when the write
    closes, which is already atomic.
    """
    fs, fspath = url_to_fs(path)
    if not is_local(fs):
        with fs.open(fspath, mode) as f:
            yield f
        return
    folder = os.path.dirname(os.path.abspath(fspath))
    made = folder  # the topmost folder this write creates, removed again if the write fails
    while not os.path.exists(os.path.dirname(made)):
        made = os.path.dirname(made)
    made = made if not os.path.exists(made) else None
    os.makedirs(folder, exist_ok=True)
    fd, tmp = scratch.make_file(f".{os.path.basename(fspath)}.", folder, ".tmp")
    try:
        with os.fdopen(fd, mode) as f:
            yield f
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes owner-only files; outputs are ordinary files
        os.replace(tmp, fspath)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        _remove_empty_folders(folder, made)
        raise


@contextlib.contextmanager
def atomic_jsonl(path: str) -> Iterator[Any]:
    """Write JSON Lines atomically; `.gz` paths are gzip-compressed with a fixed mtime so that the
    same rows give the same bytes."""
    with atomic_output(path, "wb") as raw:
        if path.endswith(".gz"):
            with (
                gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz,
                io.TextIOWrapper(gz, encoding="utf-8", newline="\n") as text,
            ):
                yield text
        else:
            with io.TextIOWrapper(raw, encoding="utf-8", newline="\n") as text:
                yield text


def write_json(path: str, value: Any, *, allow_nan: bool = True) -> None:
    """Write `value` to `path` as indented JSON with sorted keys and a final newline, atomically;
    with `allow_nan=False` a NaN or infinity raises `ValueError` instead of being written as the
    non-JSON `NaN`."""
    with atomic_output(path, "wb") as f:
        f.write((json.dumps(value, indent=2, sort_keys=True, allow_nan=allow_nan) + "\n").encode())


def dumps_row(row: dict[str, Any]) -> str:
    """One JSON Lines row; compact and key-order preserving so outputs are byte-stable."""
    return json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n"


def exists(path: str) -> bool:
    """Whether `path` (local or any fsspec URL) exists."""
    fs, p = url_to_fs(path)
    return fs.exists(p)


def read_json(path: str) -> Any:
    """A JSON file, local or remote; raises `InputError` naming the file when it cannot be read or
    is not JSON."""
    try:
        with fsspec.open(path, "rb") as f:
            raw = f.read()
    except decode_errors() as e:
        raise undecodable(path, e, "before its first byte") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not a JSON file (undecodable bytes at byte {e.start})") from None
    value, problem, line = parse_json(text)
    if problem:
        raise InputError(f"{path}:{line}: {problem}")
    return value


MAX_BAD_LINES = 100


@dataclass
class Tally:
    """Counts of a pass over records, plus the first MAX_BAD_LINES bad lines with file and line."""

    counts: Counter = field(default_factory=Counter)
    bad_lines: list[dict[str, Any]] = field(default_factory=list)

    def bad(self, b: BadLine) -> None:
        """Count a malformed record, keeping its file, line and reason while there is room."""
        self.counts["malformed"] += 1
        if len(self.bad_lines) < MAX_BAD_LINES:
            self.bad_lines.append(b.to_json())

    def to_json(self) -> dict[str, Any]:
        """`{counts, bad_lines}`: the tally as a shard of a sharded pass returns it."""
        return {"counts": dict(self.counts), "bad_lines": self.bad_lines}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Tally:
        """The tally `to_json` gave (other keys of `value` are ignored)."""
        return cls(Counter(value["counts"]), list(value["bad_lines"]))

    @classmethod
    def merged(cls, parts: list[Tally], files: list[str]) -> Tally:
        """The tally of one pass over `files` from tallies of disjoint parts of them: counts summed,
        and the first MAX_BAD_LINES bad lines in reading order (file order, then line)."""
        order = {f: i for i, f in enumerate(files)}
        out = cls()
        for part in parts:
            out.counts.update(part.counts)
        bad = sorted((b for part in parts for b in part.bad_lines), key=lambda b: (order[b["file"]], b["line"]))
        out.bad_lines = bad[:MAX_BAD_LINES]
        return out


def tallied[T](items: Iterable[T | BadLine], tally: Tally) -> Iterator[T]:
    """The valid items of `items` (records, or what a reader made of them); every item is counted
    as scanned and each `BadLine` as malformed."""
    for item in items:
        tally.counts["scanned"] += 1
        if isinstance(item, BadLine):
            tally.bad(item)
        else:
            yield item
