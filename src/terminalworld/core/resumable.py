"""Rows files that survive interruption: one row per `instance_id`, appended to `{out}.partial` as
each is made, then the whole file written atomically in the input's order with its summary row
last. A rerun reads what the partial (or a finished) file holds and makes only the rest. The
scorer, the simulator grade and the closed loop all write their rows this way.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from typing import Any

from terminalworld.core.records import atomic_jsonl, dumps_row
from terminalworld.errors import InputError


def done_rows(path: str, ids: list[str]) -> dict[str, dict[str, Any]]:
    """Rows finished by an earlier run: the partial file, and a final file's non-summary rows.
    Raises `InputError` when the file is not such a file (a line that is not a row, or rows of
    instances not among `ids`): it belongs to something else, so it is neither resumed nor
    overwritten."""
    done: dict[str, dict[str, Any]] = {}
    for p in (path, path + ".partial"):
        if not os.path.exists(p):
            continue
        with open(p, "rb") as f:
            lines = f.read().splitlines(keepends=True)
        for n, raw in enumerate(lines, start=1):
            try:
                row = json.loads(raw)
            except ValueError:  # not JSON, or not UTF-8
                if p != path and n == len(lines) and not raw.endswith(b"\n"):
                    continue  # the line an interrupted append cut: scored again
                row = None
            if not isinstance(row, dict) or not (row.get("_summary") or "instance_id" in row):
                raise InputError(f"{p}:{n}: not a row of this command's output, so it is not overwritten")
            if not row.get("_summary"):
                done[row["instance_id"]] = row
    stray = sorted(set(done) - set(ids))
    if stray:
        raise InputError(
            f"{path}: holds rows of {len(stray)} instances that are not among the inputs (first: {stray[0]}); "
            "it is another run's output, so it is neither resumed nor overwritten"
        )
    return done


def resumable(
    out: str, ids: list[str], *, source: str, accept: Callable[[dict[str, dict[str, Any]]], None] | None = None
) -> dict[str, dict[str, Any]]:
    """The rows an earlier run finished for `ids` (read from `source`) in `out`. Raises `InputError`
    when `ids` repeat (rows are resumed by id) or `out` is another run's output (`done_rows`), and
    lets `accept` refuse the finished rows (made under other settings) by raising."""
    if len(set(ids)) != len(ids):
        raise InputError(f"{source}: instance ids are not unique, so rows cannot be resumed by id")
    done = done_rows(out, ids)
    if accept is not None:
        accept(done)
    return done


def model_label(model_name: str | None, model_path: str) -> str:
    """The name a summary gives a model: the one asked for, else its folder's (or file's) name."""
    return model_name or os.path.basename(model_path.rstrip("/"))


def _cut_tail(path: str) -> bytes:
    """The bytes after the last newline of a file (what a killed append left of its line)."""
    with open(path, "rb") as f:
        data = f.read()
    return data[data.rfind(b"\n") + 1 :]


def resumable_rows(
    out: str,
    ids: list[str],
    produce: Callable[[dict[str, dict[str, Any]]], Iterator[dict[str, Any]]],
    summary: Callable[[list[dict[str, Any]]], dict[str, Any]],
    *,
    source: str,
    accept: Callable[[dict[str, dict[str, Any]]], None] | None = None,
) -> dict[str, Any]:
    """Rows keyed by `instance_id`, made resumable: `produce(done)` yields the rows not yet done, each
    appended to `out.partial` as it comes; then `out` is written atomically, the rows in `ids` order
    and the `summary` of them last. Returns the summary. Raises `InputError` as `resumable` does."""
    done = resumable(out, ids, source=source, accept=accept)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out + ".partial", "ab") as partial:  # a line a killed append cut is dropped first
        partial.truncate(partial.tell() - len(_cut_tail(out + ".partial")))
    with open(out + ".partial", "a", encoding="utf-8") as partial:
        for row in produce(done):
            partial.write(dumps_row(row))
            partial.flush()
            os.fsync(partial.fileno())
            done[row["instance_id"]] = row
    results = [done[i] for i in ids]
    result = summary(results)
    with atomic_jsonl(out) as f:
        for row in results:
            f.write(dumps_row(row))
        f.write(dumps_row(result))
    os.unlink(out + ".partial")
    return result
