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
