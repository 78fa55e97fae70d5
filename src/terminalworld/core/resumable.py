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


def done_rows(path: str) -> dict[str, dict[str, Any]]:
    """Rows finished by an earlier run: the partial file, and a final file's non-summary rows."""
    done: dict[str, dict[str, Any]] = {}
    for p in (path, path + ".partial"):
        if os.path.exists(p):
            with open(p, encoding="utf-8") as f:
                for line in f:
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError:
                        continue  # a line cut by an interrupted write is scored again
                    if not row.get("_summary"):
                        done[row["instance_id"]] = row
    return done


def model_label(model_name: str | None, model_path: str) -> str:
    """The name a summary gives a model: the one asked for, else its folder's (or file's) name."""
    return model_name or os.path.basename(model_path.rstrip("/"))


def resumable_rows(
    out: str,
    ids: list[str],
    produce: Callable[[dict[str, dict[str, Any]]], Iterator[dict[str, Any]]],
    summary: Callable[[list[dict[str, Any]]], dict[str, Any]],
    *,
    source: str,
) -> dict[str, Any]:
    """Rows keyed by `instance_id`, made resumable: `produce(done)` yields the rows not yet done, each
    appended to `out.partial` as it comes; then `out` is written atomically, the rows in `ids` order
    and the `summary` of them last. Returns the summary. Raises `InputError` when `ids` (read
    from `source`) repeat, since rows are resumed by id."""
    if len(set(ids)) != len(ids):
        raise InputError(f"{source}: instance ids are not unique, so rows cannot be resumed by id")
    done = done_rows(out)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
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
