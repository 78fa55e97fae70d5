"""How a corpus-scale stage runs its shards on Zephyr: on this machine, or as a cluster's workers.

A sharded job is a list of shard specs and one top-level function `fn(index, spec, **kwargs)`
returning a small picklable result (counts, file names, keys); `run_shards` runs them as one
Zephyr map over `Dataset.from_list` and returns the results in shard order. Large outputs are
written by the shards themselves, atomically, so a shard that already finished is recognised and
skipped when a killed job runs again.

Locally (Fray's `LocalClient`) one worker runs its shards inline in this process; more workers
run each shard in its own Python process (Zephyr's `SubprocessRunner`), because the work is
pure-Python parsing that threads would serialise on the GIL. Each such process pays Zephyr's
import (about 10 s on a 2-core machine), which is why local jobs use one shard per worker. On a
cluster Zephyr starts `count` workers of `cpu` cores and `ram` memory each.
"""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Workers:
    """The Zephyr workers of one sharded job, shown in the plan.

    `shards` is how many shards the inputs are cut into (None: one per input file); outputs never
    depend on it nor on `count`."""

    count: int = 1
    cpu: float = 1.0
    ram: str = "4g"
    shards: int | None = None

    def describe(self, shard_rows: int | None = None) -> str:
        """`4 workers x (1 cpu, 4g), 8 shards` for the plan (shards of `shard_rows` records for a
        job that cuts its inputs by rows)."""
        if shard_rows is not None:
            shards = f"shards of {shard_rows:,} rows"
        else:
            shards = "one shard per input file" if self.shards is None else f"{self.shards} shards"
        noun = "worker" if self.count == 1 else "workers"
        return f"{self.count} {noun} x ({self.cpu:g} cpu, {self.ram}), {shards}"


def local_workers(count: int) -> Workers:
    """Workers for this machine: one shard per worker, so each process pays Zephyr's import once."""
    return Workers(count=count, cpu=1.0, ram="4g", shards=count)


def run_shards(fn: Callable[..., Any], specs: list[Any], workers: Workers, *, name: str, **kwargs: Any) -> list[Any]:
    """`fn(index, spec, **kwargs)` for every spec as one Zephyr job; the results in spec order."""
    from fray.current_client import current_client
    from fray.local_backend import LocalClient
    from fray.types import ResourceConfig
    from zephyr.context import ZephyrContext
    from zephyr.dataset import Dataset
    from zephyr.runners import InlineRunner, SubprocessRunner

    if not specs:
        return []
    shard = functools.partial(_one_shard, fn=fn, kwargs=kwargs)
    dataset = Dataset.from_list(list(enumerate(specs))).map_shard(shard)
    resources = ResourceConfig(cpu=workers.cpu, ram=workers.ram)
    client = current_client()
    with contextlib.ExitStack() as stack:
        local = {}  # on a cluster Zephyr's defaults: the temp bucket and a subprocess per shard
        if isinstance(client, LocalClient):
            local = {
                "chunk_storage_prefix": stack.enter_context(tempfile.TemporaryDirectory(prefix="tw-zephyr-")),
                "stage_runner_factory": InlineRunner if workers.count == 1 else SubprocessRunner,
            }
        ctx = ZephyrContext(client=client, max_workers=workers.count, resources=resources, name=name, **local)
        results = ctx.execute(dataset).results
    return [r for _, r in sorted(results, key=lambda item: item[0])]


def _one_shard(items, _info, *, fn: Callable[..., Any], kwargs: dict[str, Any]):
    """Zephyr's `map_shard` body: each item is (index, spec); the result carries the index and the
    peak memory of the process that ran it."""
    for index, spec in items:
        result = fn(index, spec, **kwargs)
        if isinstance(result, dict):
            result = {**result, "peak_rss_mib": peak_rss_mib(), "pid": os.getpid()}
        yield index, result


def peak_rss_mib() -> float:
    """This process's peak resident memory so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
