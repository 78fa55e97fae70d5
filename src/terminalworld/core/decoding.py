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
