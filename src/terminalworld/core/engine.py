"""Generation for many concurrent callers on transformers' continuous batching.

`ContinuousEngine.generate(ids, ...)` may be called from any number of threads (a chat server's
requests, a simulator's episodes); one manager thread runs transformers' `ContinuousBatchingManager`
over a paged key/value cache, adding each request to the running batch as it arrives and
retiring it at its stop token, and sharing cached blocks between prompts with a common prefix
(a task's attempts, a conversation's next turn). It replaces a hand-written batcher: the library
schedules prefill and decode per step, which a gather window cannot.

Sampling is keyed per request, not drawn from one global generator: the manager runs greedy
(argmax), and a logits processor adds to each row's scores Gumbel noise drawn from a generator
seeded with (the request's seed, the number of tokens it has generated). Argmax over
`logits / temperature + Gumbel` is an exact draw from the tempered softmax (cut to the `top_p`
nucleus first), so a request's tokens depend on its own seed alone, not on which requests share
its steps or in what order they arrived: a rerun draws the same tokens, up to float rounding in
the batched matmuls at near-ties. Temperature 0 adds no noise: greedy.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar, Literal

Engine = Literal["continuous", "batched"]  # how a chat server generates: this module, or `core.batching`

# Per-step budget of tokens (prompt chunks and decode rows together): large enough that 32
# decoding rows and a prompt's chunk share a step; small enough that a step's activations stay
# far below the cache.
MAX_BATCH_TOKENS = 2048
BLOCK_SIZE = 256  # tokens per paged-cache block (transformers' default)
_MIX = 0x9E3779B97F4A7C15  # a 64-bit odd constant: (seed, step) pairs map to distinct generator seeds


def draw_seed(seed: int, step: int) -> int:
    """The generator seed of a request's `step`-th token: distinct for distinct (seed, step)."""
    return (seed * _MIX + step) % (1 << 63)


def _seeded_processor() -> Any:
    from transformers.generation.continuous_batching.cb_logits_processors import ContinuousBatchingLogitsProcessor

    class SeededSampling(ContinuousBatchingLogitsProcessor):
        """Temperature, top-p and a per-request Gumbel draw, applied before the manager's argmax.

        The manager hands each processor one int32 per row; ours is the row's index into the
        draws it prepared for the same step, which is read back in `__call__` (CPU steps run
        prepare and call in order, one step at a time)."""

        supported_kwargs: ClassVar[dict[str, type]] = {"temperature": float, "top_p": float, "seed": int}
        ignored_kwargs = ()

        def __init__(self) -> None:
            self._rows: list[tuple[float, float, int]] = []

        def fill_defaults(self, int32_tensor: Any) -> None:
            int32_tensor.fill_(0)

        def prepare_tensor_args(self, requests_with_new_token: list[Any]) -> Any:
            import torch

            self._rows = []
            for future in requests_with_new_token:
                state = future.state
                kw = state.logit_processor_kwargs
                step = len(state.generated_tokens)
                self._rows.append(
                    (kw.get("temperature", 0.0), kw.get("top_p", 1.0), draw_seed(kw.get("seed", 0), step))
                )
            return torch.arange(len(self._rows), dtype=torch.int32)

        def __call__(self, scores: Any, tensor_arg: Any) -> Any:
            import torch

            out = scores.clone()
            for i, (temperature, top_p, key) in enumerate(self._rows[: scores.shape[0]]):
                if temperature <= 0:
                    continue  # greedy: the argmax of the raw scores
                row = scores[i].float() / temperature
                if top_p < 1.0:
                    row = _nucleus(row, top_p)
                generator = torch.Generator().manual_seed(key)
                uniform = torch.rand(row.shape, generator=generator, dtype=torch.float64).clamp_(1e-300, 1.0)
                out[i] = (row.double() - torch.log(-torch.log(uniform))).to(out.dtype)
            return out

    return SeededSampling()


def _nucleus(row: Any, top_p: float) -> Any:
    """`row` (scaled logits) with every token outside the smallest set of probability >= top_p set
    to -inf (the most likely token always kept)."""
    import torch

    ordered, index = torch.sort(row, descending=True)
    mass = torch.softmax(ordered, dim=-1).cumsum(-1)
    drop = mass - torch.softmax(ordered, dim=-1) >= top_p  # the mass before a token already reaches top_p
    ordered = ordered.masked_fill(drop, float("-inf"))
    return torch.empty_like(row).scatter_(0, index, ordered)


class ContinuousEngine:
    """`generate(ids, ...)` from any thread on one model; requests join the running batch."""

    def __init__(
        self,
        model: Any,
        *,
        stop: list[int],
        max_batch: int = 32,
        max_batch_tokens: int = MAX_BATCH_TOKENS,
        cache_tokens: int = 65536,
    ):
        """`stop`: the token ids that end a reply; `max_batch`: rows per step; `cache_tokens`: the
        paged cache's room (all requests in flight, their prompts and replies together)."""
        from transformers import GenerationConfig
        from transformers.generation.configuration_utils import ContinuousBatchingConfig
        from transformers.generation.continuous_batching.cb_logits_processors import (
            ContinuousBatchingLogitsProcessorList,
        )
        from transformers.generation.logits_process import LogitsProcessorList

        if max_batch < 1 or cache_tokens < BLOCK_SIZE:
            raise ValueError(
                f"max_batch must be >= 1 and cache_tokens >= {BLOCK_SIZE}, not {max_batch}, {cache_tokens}"
            )
        self.stop, self.max_batch = list(stop), max_batch
        config = GenerationConfig(do_sample=False, eos_token_id=self.stop, max_new_tokens=256)
        batching = ContinuousBatchingConfig(
            block_size=BLOCK_SIZE,
            num_blocks=-(-cache_tokens // BLOCK_SIZE),
            max_batch_tokens=max_batch_tokens,
            max_requests_per_batch=max_batch,
            use_cuda_graph=False,
            use_async_batching=False,
        )
        self.manager = model.init_continuous_batching(generation_config=config, continuous_batching_config=batching)
        processors = ContinuousBatchingLogitsProcessorList(LogitsProcessorList([_seeded_processor()]))
        processors.tensors_required = 1  # one int32 per row: its index into the step's draws
        self.manager.logit_processor = processors
        self._waiting: dict[str, tuple[threading.Event, list]] = {}
        self._lock = threading.Lock()
        self._count = 0
        # Started from a daemon thread, the manager's generation thread is a daemon too (a thread
        # inherits it), so a process that never closes its engine still exits.
        starter = threading.Thread(target=self.manager.start, daemon=True)
        starter.start()
        starter.join()
        self._router = threading.Thread(target=self._route, daemon=True, name="engine-results")
        self._router.start()

    def generate(
        self, ids: list[int], *, max_new_tokens: int, temperature: float, seed: int, top_p: float = 1.0
    ) -> list[int]:
        """The tokens generated after `ids`, through the first stop token, at most `max_new_tokens`:
        greedy at `temperature` 0, else sampled with `seed` (a bad value raises ValueError here)."""
        from terminalworld.core.batching import check_request
        from terminalworld.core.decoding import RowDraw

        check_request(ids, max_new_tokens)
        draw = RowDraw(temperature=float(temperature), seed=int(seed), top_p=float(top_p))  # its bounds
        done, box = threading.Event(), []
        with self._lock:
            self._count += 1
            request_id = f"r{self._count}"
            self._waiting[request_id] = (done, box)
        self.manager.add_request(
            list(ids),
            request_id=request_id,
            max_new_tokens=max_new_tokens,
            eos_token_id=self.stop,
            temperature=draw.temperature,
            top_p=draw.top_p,
            seed=draw.seed,
        )
        done.wait()
        result = box[0]
        if result.error is not None:
            raise RuntimeError(f"generation failed: {result.error}")
        return list(result.generated_tokens)

    def _route(self) -> None:
        while self.manager.is_running() or self._waiting:
            result = self.manager.get_result(timeout=0.1)
            if result is None:
                if not self.manager.is_running():
                    self._fail_all(self.manager.fatal_error or RuntimeError("the engine stopped"))
                    return
                continue
            if not result.is_finished() and result.error is None:
                continue
            with self._lock:
                waiter = self._waiting.pop(result.request_id, None)
            if waiter is not None:
                waiter[1].append(result)
                waiter[0].set()

    def _fail_all(self, error: BaseException) -> None:
        from types import SimpleNamespace

        with self._lock:
            waiting, self._waiting = self._waiting, {}
        for done, box in waiting.values():
            box.append(SimpleNamespace(error=str(error), generated_tokens=[]))
            done.set()

    def close(self) -> None:
        """Stop the manager thread; requests still waiting get an error."""
        self.manager.stop(block=True, timeout=10)
        self._fail_all(RuntimeError("the engine was closed"))
