"""A committed snapshot: a report's small files and its upstream records laid out as a prefix, with
the rows its numbers come from (gzipped, within a budget) and every path named logically, so the
site builds from a fresh clone and a test can recompute each figure."""

from __future__ import annotations

import gzip
import json
import os
import posixpath
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fsspec.core import url_to_fs as _fs

from terminalworld.core.records import exists
from terminalworld.errors import InputError
from terminalworld.report.pages import (
    LOGICAL_PREFIX,
    RECORD,
    Artifact,
    is_local,
    prefix_of,
    read_artifact,
    upstream,
)

SNAPSHOT_MANIFEST = "snapshot.json"
SNAPSHOT_MAX_BYTES = 2 << 20  # a snapshot is committed: a report's own files are small JSON and plots
# The rows a page's numbers are computed from travel with the snapshot, gzip-compressed: the files of
# these upstream artifacts (held-out rows, per-checkpoint scores at every depth, agent trials,
# simulator rows, probe rows, ECHO's arms). Budget, stated on docs/evaluation.md: 24 MiB compressed
# per snapshot. `sim-ppl-eval/` is the scores' name in snapshots committed before the probe's
# artifacts were renamed.
ROW_ARTIFACTS = (
    "heldout/",
    "probe-eval/",
    "sim-ppl-eval/",
    "agent-eval/",
    "sim-eval/",
    "terminalworld/probes",
    "terminalworld/echo/",
)
ROW_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".txt", ".log", ".diff", ".patch")
SNAPSHOT_ROWS_BUDGET = 24 << 20
# Files the host writes about a Harbor job (not session text), whose machine paths are all renamed.
HOST_RECORDS = frozenset(
    {"config.json", "lock.json", "result.json", "job_spec.json", "harbor_result.json", "harbor.log"}
)
_MACHINE_PATH = re.compile(
    r"(?<![\w.~{}-])/(?:home|root|tmp|work|Users|mnt|private|var/folders|opt|srv)/[^\s`'\",)\]]*"
)


def map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    """`value` (any JSON) with `fn` applied to every string in it (not to keys)."""
    if isinstance(value, dict):
        return {k: map_strings(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [map_strings(v, fn) for v in value]
    return fn(value) if isinstance(value, str) else value


def logical(value: Any, roots: list[str]) -> Any:
    """`value` (a record, any JSON) with every local prefix in `roots` named `{MARIN_PREFIX}` and any
    other absolute machine path (a home, temporary or work folder, `_MACHINE_PATH`) by its last
    component under `{LOCAL}`: a committed snapshot names no folder of the machine that built it."""

    def local(m: re.Match[str]) -> str:
        return "{LOCAL}/" + posixpath.basename(m.group(0).rstrip("/"))

    return map_strings(value, lambda s: _MACHINE_PATH.sub(local, _rooted(s, roots)))


def _rooted(value: str, roots: list[str]) -> str:
    """`value` with every local prefix in `roots` named `{MARIN_PREFIX}`, and nothing else changed."""
    for root in sorted({r.rstrip("/") for r in roots if r and is_local(r)}, key=len, reverse=True):
        value = value.replace(root + "/", LOGICAL_PREFIX + "/")
        value = LOGICAL_PREFIX if value == root else value
    return value


def _row_files(folder: str) -> list[tuple[str, int]]:
    """(relative path, size) of the row files under an artifact folder, in path order."""
    fs, p = _fs(folder)
    if not fs.isdir(p):
        return []
    out = []
    for full, info in sorted(fs.find(p, detail=True).items()):
        rel = posixpath.relpath(full, p)
        hidden = any(part.startswith(".") for part in rel.split("/"))  # records, runner state, timings
        if not hidden and rel.endswith(ROW_SUFFIXES) and info.get("type") == "file":
            out.append((rel, int(info.get("size") or 0)))
    return out


def copy_rows(folder: str, here: Path, roots: list[str]) -> int:
    """Copy the row files of the artifact at `folder` into `here`, each gzip-compressed (mtime 0, so
    the same rows give the same bytes), with the prefix named logically; Harbor's own records of a
    job (`HOST_RECORDS`: configs, results, logs, which name the job folder, the task's path and
    tracebacks) get every machine path named logically too (`logical`), while rows of session text
    keep every other path as the session printed it; returns the bytes written."""
    fs, _ = _fs(folder)
    written = 0
    for rel, _size in _row_files(folder):
        with fs.open(posixpath.join(_fs(folder)[1], rel), "rb") as f:
            data = f.read()
        target = here / (rel if rel.endswith(".gz") else rel + ".gz")
        target.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith(".gz"):
            data = gzip.decompress(data)
        text = data.decode("utf-8", errors="surrogateescape")
        text = (
            logical(text, roots)
            if posixpath.basename(rel).removesuffix(".gz") in HOST_RECORDS
            else _rooted(text, roots)
        )
        data = gzip.compress(text.encode("utf-8", errors="surrogateescape"), mtime=0)
        target.write_bytes(data)
        written += len(data)
    return written


def snapshot(reports: list[Artifact], dest: str) -> list[Artifact]:
    """Copy each report's files and its upstream records into `dest`, laid out as a prefix, replacing
    an earlier snapshot; with them the rows its numbers come from (`ROW_ARTIFACTS`' files, gzipped,
    within `SNAPSHOT_ROWS_BUDGET`). Every record and the manifest name paths logically (`logical`).
    Returns the copies. Raises `InputError` for big report files, rows over the budget, or a
    non-snapshot `dest`."""
    if os.path.isdir(dest) and os.listdir(dest) and not os.path.exists(os.path.join(dest, SNAPSHOT_MANIFEST)):
        raise InputError(f"{dest}: refusing to replace a folder that is not a snapshot (no {SNAPSHOT_MANIFEST})")
    if any(os.path.abspath(r.path).startswith(os.path.abspath(dest) + os.sep) for r in reports):
        raise InputError(f"{dest}: a snapshot cannot be taken from itself")
    shutil.rmtree(dest, ignore_errors=True)
    copied, rows_bytes, row_sets = [], 0, []
    for report in reports:
        roots = [r for r in (report.root, prefix_of(report.record.get("output_path", ""), report.record)) if r]
        here = os.path.join(dest, report.record["name"], report.record["version"])
        os.makedirs(here)
        for name in report.files():
            fs, p = _fs(posixpath.join(report.path, name))
            if fs.isdir(p) or fs.size(p) > SNAPSHOT_MAX_BYTES:
                raise InputError(f"{report.path}/{name}: a snapshot holds small files only (2 MiB at most)")
            fs.get(p, os.path.join(here, name))
        Path(here, RECORD).write_text(json.dumps(logical(report.record, roots), indent=2) + "\n")
        for dep, path, rec in upstream(report):
            if not rec:
                continue
            folder = Path(dest, *dep.rpartition("@")[::2])
            folder.mkdir(parents=True, exist_ok=True)
            dep_roots = [*roots, prefix_of(rec.get("output_path", ""), rec) or ""]
            (folder / RECORD).write_text(json.dumps(logical(rec, dep_roots), indent=2) + "\n")
            # Rows are read where the record says they were built, else from the prefix read from.
            where = [w for w in (path, report.root and posixpath.join(report.root, *dep.rpartition("@")[::2])) if w]
            src = next((w for w in where if os.path.isdir(w) or (not is_local(w) and exists(w))), None)
            # A step two reports share (the held-out rows) travels, and counts, once.
            wanted = rec.get("name", "").startswith(ROW_ARTIFACTS) and dep not in row_sets
            if wanted and src and (n := copy_rows(src, folder, dep_roots)):
                rows_bytes += n
                row_sets.append(dep)
        copied.append(read_artifact(here))
    if rows_bytes > SNAPSHOT_ROWS_BUDGET:
        shutil.rmtree(dest, ignore_errors=True)
        raise InputError(f"{dest}: {rows_bytes:,} bytes of rows exceed the snapshot budget of {SNAPSHOT_ROWS_BUDGET:,}")
    manifest = {
        "from": [f"{LOGICAL_PREFIX}/{r.record['name']}/{r.record['version']}" for r in reports],
        "reports": [r.ident for r in reports],
        "rows": sorted(set(row_sets)),
        "rows_bytes": rows_bytes,
        "rows_budget_bytes": SNAPSHOT_ROWS_BUDGET,
    }
    Path(dest, SNAPSHOT_MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return copied
