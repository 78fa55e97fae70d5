"""Key/value caches of recent prompts, so a request that extends one prefills only the rest.

An agent's turn resends its whole conversation: the task prompt (the same for every attempt at a
task), each earlier reply and each observation. Prefilling it again is most of a turn's work on a
CPU (docs/serving.md); with the caches of what was already computed, a turn prefills the tokens
after the longest prefix it shares with a cached sequence, and every attempt at a task after the
first prefills only its last prompt token.

Entries are private copies (a lookup hands out a copy the caller may extend), evicted least
recently used past `max_bytes` of keys and values in all, so memory stays bounded whatever the
callers send (SmolLM2-135M in float32 holds 46 KB a token: 4 GiB is about 93,000 tokens). Only
the thread that runs the model touches a cache.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

Layers = list[tuple[Any, Any]]  # per layer: keys and values, [1, kv_heads, tokens, head_dim]


def common_prefix(a: tuple[int, ...], b: list[int]) -> int:
    """How many leading tokens `a` and `b` share."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class PrefixCache:
    """Recent token sequences with their per-layer keys and values (one row each)."""

    def __init__(self, max_bytes: int):
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, not {max_bytes}")
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[int, ...], Layers] = OrderedDict()
        self._bytes: dict[tuple[int, ...], int] = {}
        self.hits = 0  # prompt tokens served from the cache
        self.misses = 0  # prompt tokens prefilled

    @property
    def nbytes(self) -> int:
        """The bytes of keys and values held."""
        return sum(self._bytes.values())

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Drop every entry (the counts stay)."""
        self._entries.clear()
        self._bytes.clear()

    def lookup(self, ids: list[int]) -> tuple[Layers | None, int]:
        """A private copy of the cached keys and values for the longest prefix of `ids` held, and its
        length; at most `len(ids) - 1`, so the caller still prefills the last token (its logits)."""
        best, n = None, 0
        for key in self._entries:
            k = min(common_prefix(key, ids), len(ids) - 1)
            if k > n:
                best, n = key, k
        self.hits += n
        self.misses += len(ids) - n
        if best is None:
            return None, 0
        self._entries.move_to_end(best)
        return [(k[:, :, :n].clone(), v[:, :, :n].clone()) for k, v in self._entries[best]], n

    def store(self, ids: list[int], layers: Layers) -> None:
        """Keep a copy of `layers` (the keys and values of exactly `ids`), dropping entries that are
        prefixes of it and the least recently used past the byte budget."""
        key = tuple(ids)
        if any(k.shape[0] != 1 or k.shape[2] != len(key) for k, _ in layers):
            raise ValueError(f"one row of {len(key)} positions expected, not {tuple(layers[0][0].shape)}")
        size = sum(k.nbytes + v.nbytes for k, v in layers)
        if not key or size > self.max_bytes:
            return
        for old in [k for k in self._entries if len(k) <= len(key) and key[: len(k)] == k]:
            del self._entries[old], self._bytes[old]
        self._entries[key], self._bytes[key] = [(k.clone(), v.clone()) for k, v in layers], size
        while self.nbytes > self.max_bytes:
            old, _ = self._entries.popitem(last=False)
            del self._bytes[old]
