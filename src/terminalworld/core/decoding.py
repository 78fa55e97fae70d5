"""The project's one call of HF `generate`: pure temperature sampling, greedy at temperature 0.

The in-process chat server (the agent's local endpoint), the ECHO rollouts and the HF simulator
all sample through `hf_sample`, so they share one policy and it matches what vLLM's
`SamplingParams(temperature=t, top_k=-1, top_p=1.0)` does on a GPU: no top-k and no top-p, which
transformers would otherwise take from the model's generation config (top-k 50 by default).
A process that generates without an entry point that chose its threads gets its share of the cores
(`core.threads`) on its first call.

The model samples in a declared compute precision (`generation_model`, `core.precision`): float32,
bfloat16 weights, or `auto`, which is bfloat16 where the hardware runs it natively and its measured
agreement with float32 meets the bound.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any


def generation_model(path: str, precision: str = "auto", device: str = "cpu") -> Any:
    """The causal LM at `path` that HF generation samples from, in `precision` on `device`."""
    from terminalworld.core.assets import load_hf_model

    return load_hf_model(path, precision, device).eval()


def hf_sample(
    model: Any,
    ids: Any,
    *,
    attention_mask: Any,
    max_new_tokens: int,
    temperature: float,
    seed: int,
    pad: int,
    stop: int | list[int] | None = None,
    past_key_values: Any = None,
) -> Any:
    """The tokens `model` generates after each row of `ids` (a 2-D tensor, left-padded, with its
    `attention_mask`), seeded by `seed`; generation ends at `stop` (default: the model's own end
    of sequence) or after `max_new_tokens`. Rows that stop early are padded with `pad`. A
    `past_key_values` cache holding a prefix of `ids` is extended in place, so only the rest is
    prefilled."""
    import torch

    from terminalworld.core.threads import ensure_threads

    ensure_threads()
    sampled = temperature > 0
    ends = {} if stop is None else {"eos_token_id": stop}
    if past_key_values is not None:
        ends["past_key_values"] = past_key_values
    torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(
            ids,
            attention_mask=attention_mask,
            max_new_tokens=max_new_tokens,
            do_sample=sampled,
            temperature=temperature if sampled else None,
            top_k=0 if sampled else None,
            top_p=1.0 if sampled else None,
            pad_token_id=pad,
            **ends,
        )
    return out[:, ids.shape[1] :]


@dataclass(frozen=True)
class RowDraw:
    """One row's sampling in a batch: `temperature` 0 is greedy; above it, pure temperature
    sampling cut to the `top_p` nucleus (1.0: no cut), drawn from the row's own generator seeded
    with `seed`, so the row's tokens do not depend on the rows beside it."""

    temperature: float = 0.0
    seed: int = 0
    top_p: float = 1.0

    def __post_init__(self) -> None:
        if not math.isfinite(self.temperature) or self.temperature < 0:
            raise ValueError(f"temperature must be a finite number >= 0, not {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], not {self.top_p}")
        if not 0 <= self.seed < 1 << 63:
            raise ValueError(f"seed must be in [0, 2**63), not {self.seed}")


class _RowSampler:
    """A logits processor that draws each sampled row's next token from that row's generator and
    leaves only it standing, so a greedy `generate` picks it; greedy rows pass untouched. A row
    alone draws as `hf_sample` does under `torch.manual_seed(seed)` (the same warps in the same
    order, the same `multinomial` on a CPU generator in the same state)."""

    def __init__(self, draws: list[RowDraw]):
        self.draws = draws
        self.generators: list[Any] | None = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self.generators is None:  # on the logits' device, seeded once: one stream per row per call
            self.generators = [
                torch.Generator(device=scores.device).manual_seed(d.seed) if d.temperature > 0 else None
                for d in self.draws
            ]
        out = scores.clone()
        for i, (d, g) in enumerate(zip(self.draws, self.generators, strict=True)):
            if g is None:
                continue
            row = scores[i : i + 1] / d.temperature
            if d.top_p < 1:  # transformers' TopPLogitsWarper, row by row
                ordered, order = torch.sort(row, descending=False)
                cut = ordered.softmax(dim=-1).cumsum(dim=-1) <= 1 - d.top_p
                cut[..., -1:] = False
                row = row.masked_fill(cut.scatter(1, order, cut), -float("inf"))
            token = torch.multinomial(torch.softmax(row, dim=-1), num_samples=1, generator=g)[0, 0]
            out[i] = -float("inf")
            out[i, token] = 0.0
        return out


def hf_sample_rows(
    model: Any,
    ids: Any,
    *,
    attention_mask: Any,
    max_new_tokens: int,
    draws: list[RowDraw],
    pad: int,
    stop: int | list[int] | None = None,
) -> Any:
    """As `hf_sample`, but each row of `ids` with its own `RowDraw`: greedy and sampled rows in one
    batch, each sampled row seeded on its own. A row's tokens are those it gets alone, up to the
    float rounding of the padded batch's matmuls (tests/core/test_batching.py)."""
    import torch
    from transformers import LogitsProcessorList

    from terminalworld.core.threads import ensure_threads

    if len(draws) != ids.shape[0]:
        raise ValueError(f"{len(draws)} draws for {ids.shape[0]} rows")
    ensure_threads()
    ends = {} if stop is None else {"eos_token_id": stop}
    sampler = [_RowSampler(draws)] if any(d.temperature > 0 for d in draws) else []
    with torch.no_grad():
        out = model.generate(
            ids,
            attention_mask=attention_mask,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            temperature=None,
            top_k=None,
            top_p=None,
            pad_token_id=pad,
            logits_processor=LogitsProcessorList(sampler),
            **ends,
        )
    return out[:, ids.shape[1] :]


def left_padding_mask(lengths: list[int]) -> Any:
    """The attention mask of rows of these lengths left-padded to the longest: 0 on padding."""
    import torch

    width = max(lengths)
    return torch.tensor([[0] * (width - n) + [1] * n for n in lengths])


def cached_sample_rows(
    model: Any,
    prompts: list[list[int]],
    *,
    max_new_tokens: list[int],
    draws: list[RowDraw],
    pad: int,
    stop: list[int],
    cache: Any,
) -> list[list[int]]:
    """As `hf_sample_rows` on `prompts` (each row at most its own `max_new_tokens`, through its
    first `stop` token), with each row prefilled alone after the longest prefix `cache`
    (`core.prefix_cache.PrefixCache`) holds, then decoded together: the rows' caches are joined,
    left-padded, into room reserved for the longest reply, and stepped at once. Each prompt, and
    each prompt with its reply, is stored back in `cache`, so a conversation's next turn and a
    task's next attempt prefill only what is new."""
    import torch
    from transformers import DynamicCache

    from terminalworld.core.threads import ensure_threads

    if not len(prompts) == len(draws) == len(max_new_tokens) or not prompts:
        raise ValueError(f"{len(prompts)} prompts, {len(draws)} draws and {len(max_new_tokens)} caps")
    ensure_threads()
    sampler = _RowSampler(draws)
    rows, last = [], []
    with torch.no_grad():
        for ids in prompts:  # prefill alone: no padding, only the tokens the cache lacks
            layers, n = cache.lookup(ids)
            kv = DynamicCache() if layers is None else DynamicCache(ddp_cache_data=layers)
            out = model(
                input_ids=torch.tensor([ids[n:]]),
                position_ids=torch.arange(n, len(ids)).unsqueeze(0),
                past_key_values=kv,
                use_cache=True,
                logits_to_keep=1,
            )
            layers = [(layer.keys, layer.values) for layer in out.past_key_values.layers]
            cache.store(ids, layers)
            rows.append(layers)
            last.append(out.logits[:, -1].float())
        lengths = [len(p) for p in prompts]
        width = max(lengths)
        joined = DynamicCache()
        joined.layers = [
            _preallocated_layer()([row[i] for row in rows], capacity=width + max(max_new_tokens))
            for i in range(len(rows[0]))
        ]
        del rows
        mask = left_padding_mask(lengths)
        scores = torch.cat(last)
        new: list[list[int]] = [[] for _ in prompts]
        done = [False] * len(prompts)
        for step in range(max(max_new_tokens)):
            tokens = sampler(None, scores).argmax(dim=-1).tolist()
            feed = [pad if d else t for t, d in zip(tokens, done, strict=True)]  # a finished row steps on padding
            for r, t in enumerate(tokens):
                if not done[r]:
                    new[r].append(t)
                    done[r] = t in stop or len(new[r]) >= max_new_tokens[r]
            if all(done):
                break
            mask = torch.cat([mask, torch.ones(len(prompts), 1, dtype=mask.dtype)], dim=1)
            out = model(
                input_ids=torch.tensor([feed]).T,
                attention_mask=mask,
                position_ids=torch.tensor([[n + step] for n in lengths]),
                past_key_values=joined,
                use_cache=True,
            )
            joined, scores = out.past_key_values, out.logits[:, -1].float()
        fed = joined.layers[0].keys.shape[2] - width  # reply tokens whose keys and values exist
        for r, (ids, n) in enumerate(zip(prompts, lengths, strict=True)):
            keep = min(len(new[r]), fed)
            if keep:
                span = slice(width - n, width + keep)
                cache.store(
                    ids + new[r][:keep],
                    [(la.keys[r : r + 1, :, span], la.values[r : r + 1, :, span]) for la in joined.layers],
                )
    return new


@functools.cache
def _preallocated_layer() -> type:
    """A cache layer (transformers' `DynamicLayer`) that writes each step's keys and values into
    room reserved for the whole reply, where `DynamicLayer` concatenates, a copy of the whole
    cache at every decode step; it hands out views of the part written, the same values."""
    from transformers.cache_utils import DynamicLayer

    class Preallocated(DynamicLayer):
        def __init__(self, rows: list[tuple[Any, Any]], *, capacity: int):
            """`rows`: each row's keys and values, [1, heads, its length, head_dim], left-padded
            here to the longest (zeros, which the batch's mask hides)."""
            super().__init__()
            keys = rows[0][0]
            _, h, _, d = keys.shape
            n = max(k.shape[2] for k, _ in rows)
            self._k, self._v = keys.new_zeros(len(rows), h, capacity, d), keys.new_zeros(len(rows), h, capacity, d)
            for r, (k, v) in enumerate(rows):
                self._k[r, :, n - k.shape[2] : n], self._v[r, :, n - v.shape[2] : n] = k[0], v[0]
            self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True
            self._fill(n)

        def _fill(self, n: int) -> None:
            self.n = n
            self.keys, self.values = self._k[:, :, :n], self._v[:, :, :n]

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            end = self.n + key_states.shape[-2]
            if end > self._k.shape[2]:
                raise ValueError(f"the cache holds {self._k.shape[2]} positions, not {end}")
            self._k[:, :, self.n : end], self._v[:, :, self.n : end] = key_states, value_states
            self._fill(end)
            return self.keys, self.values

    return Preallocated


GQA_SDPA = "sdpa_gqa"


def grouped_attention(model: Any) -> Any:
    """`model` with transformers' SDPA attention, except that grouped-query heads stay grouped
    when a mask is given (a left-padded batch's decode steps). transformers repeats each key/value
    head for its query heads whenever there is a mask: a copy of the whole cache, three times over
    for SmolLM2, at every step of every layer; torch's SDPA takes the grouped heads and the mask
    together (`enable_gqa`) with the same outputs. Returns `model`."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(GQA_SDPA, _gqa_sdpa)
    ALL_MASK_ATTENTION_FUNCTIONS.register(GQA_SDPA, sdpa_mask)
    model.set_attn_implementation(GQA_SDPA)
    return model


def _gqa_sdpa(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[Any, None]:
    """transformers' `sdpa_attention_forward` with `enable_gqa` whatever the mask."""
    import torch

    is_causal = getattr(module, "is_causal", True) if is_causal is None else is_causal
    out = torch.nn.functional.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=attention_mask,
        dropout_p=dropout,
        scale=scaling,
        is_causal=query.shape[2] > 1 and attention_mask is None and is_causal,
        enable_gqa=hasattr(module, "num_key_value_groups"),
    )
    return out.transpose(1, 2).contiguous(), None
