"""Dynamic batching over one HF causal LM: concurrent callers' requests are collected for a few
milliseconds and generated together, left-padded, in one `generate` call.

Where the callers are known in advance (an agent grade's concurrent attempts), `gather` holds the
window open until that many requests are in, up to `window_s`: the attempts' requests arrive a
sandbox command apart, so a few-millisecond window batches at most two of them, while waiting the
length of a command batches them all and costs each turn at most the wait.

Greedy and sampled requests share a batch: each sampled row draws from its own generator seeded
with its request's seed, at its own temperature and top-p (`core.decoding.hf_sample_rows`), so a
row's tokens are those it gets alone, up to float rounding in the padded matmuls (see
tests/core/test_batching.py), and a request alone gets what `hf_sample` gives it with its seed.
`max_batch=1` is the one-at-a-time path (the benchmarks' baseline).

With `prefix_bytes`, the batcher keeps that much of recent prompts' keys and values
(`core.prefix_cache`): each row is prefilled alone after the longest prefix held, and the rows are
decoded together (`core.decoding.cached_sample_rows`), so a conversation's turn prefills only its
new messages and a task's attempts share its prompt; without, one left-padded `generate` call.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from terminalworld.core.decoding import RowDraw, cached_sample_rows, hf_sample_rows, left_padding_mask
from terminalworld.core.prefix_cache import PrefixCache

WINDOW_S = 0.005  # how long a batch collects after its first request, unless told otherwise


@dataclass
class _Job:
    ids: list[int]
    max_new_tokens: int
    draw: RowDraw
    done: threading.Event = field(default_factory=threading.Event)
    result: list[int] | None = None
    error: BaseException | None = None


class DynamicBatcher:
    """`generate(ids, ...)` from any thread; one worker thread runs the model."""

    def __init__(
        self,
        model: Any,
        *,
        pad: int,
        stop: list[int],
        max_batch: int = 16,
        window_s: float = WINDOW_S,
        gather: int | None = None,
        prefix_bytes: int = 0,
    ):
        """`window_s`: how long a batch collects after its first request; `gather`: stop collecting
        once this many are in (default `max_batch`); `prefix_bytes`: how much of recent prompts'
        keys and values is kept for reuse (0: none)."""
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        gather = max_batch if gather is None else gather
        if not 1 <= gather <= max_batch or window_s < 0:
            raise ValueError(f"gather must be 1..max_batch ({max_batch}) and window_s >= 0, not {gather}, {window_s}")
        self.model, self.pad, self.stop = model, pad, list(stop)
        self.max_batch, self.window_s, self.gather = max_batch, window_s, gather
        self.cache = PrefixCache(prefix_bytes) if prefix_bytes else None
        self.batches: list[int] = []  # the size of each generate call (what batching achieved)
        self._queue: queue.Queue[_Job] = queue.Queue()
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None

    def generate(
        self, ids: list[int], *, max_new_tokens: int, temperature: float, seed: int, top_p: float = 1.0
    ) -> list[int]:
        """The tokens generated after `ids`, through the first stop token, at most `max_new_tokens`:
        greedy at `temperature` 0, else sampled with `seed` (a bad value raises ValueError here)."""
        check_request(ids, max_new_tokens)
        job = _Job(list(ids), max_new_tokens, RowDraw(temperature=temperature, seed=seed, top_p=top_p))
        with self._lock:
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, daemon=True, name="dynamic-batcher")
                self._worker.start()
        self._queue.put(job)
        job.done.wait()
        if job.error is not None:
            raise job.error
        return job.result

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            deadline = time.monotonic() + self.window_s
            while len(batch) < self.gather:
                try:
                    batch.append(self._queue.get(timeout=max(0.0, deadline - time.monotonic())))
                except queue.Empty:
                    break
            while len(batch) < self.max_batch:  # whoever else is already waiting
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            self._serve(batch)

    def _serve(self, batch: list[_Job]) -> None:
        try:
            for job, new in zip(batch, self._generate(batch), strict=True):
                job.result = new
        except Exception as e:  # every caller of the failed call gets its error
            for job in batch:
                job.error = e
        self.batches.append(len(batch))
        for job in batch:
            job.done.set()

    def _generate(self, batch: list[_Job]) -> list[list[int]]:
        import torch

        if self.cache is not None:
            new = cached_sample_rows(
                self.model,
                [j.ids for j in batch],
                max_new_tokens=[j.max_new_tokens for j in batch],
                draws=[j.draw for j in batch],
                pad=self.pad,
                stop=self.stop,
                cache=self.cache,
            )
            return [until_stop(row, self.stop) for row in new]
        width = max(len(j.ids) for j in batch)
        ids = torch.tensor([[self.pad] * (width - len(j.ids)) + j.ids for j in batch])
        mask = left_padding_mask([len(j.ids) for j in batch])
        out = hf_sample_rows(
            self.model,
            ids,
            attention_mask=mask,
            max_new_tokens=max(j.max_new_tokens for j in batch),
            draws=[j.draw for j in batch],
            pad=self.pad,
            stop=self.stop,
        )
        return [until_stop(row.tolist()[: j.max_new_tokens], self.stop) for row, j in zip(out, batch, strict=True)]


def check_request(ids: list[int], max_new_tokens: int) -> None:
    """Refuse a request with no prompt tokens or no room for a new one (ValueError)."""
    if not ids or max_new_tokens < 1:
        raise ValueError(f"a request needs prompt tokens and max_new_tokens >= 1, not {len(ids)} and {max_new_tokens}")


def until_stop(ids: list[int], stop: list[int]) -> list[int]:
    """`ids` through its first stop token (the padding after a finished row dropped)."""
    cut = next((i for i, t in enumerate(ids) if t in stop), None)
    return ids if cut is None else ids[: cut + 1]
