"""An OpenAI-compatible chat-completions endpoint over an in-process HF model, on loopback.

The local stand-in for vLLM's server: the Harbor agent talks to both the same way. It renders the
messages with the checkpoint's own chat template, generates (greedy at temperature 0, else
temperature sampling, cut to the request's `top_p` if it sends one, drawn from a generator seeded
with the request's seed), and answers 400 with "maximum context length" when the prompt and the
requested tokens do not fit, as vLLM does. Concurrent requests (a Harbor job's trials, a
simulator's episodes) are batched (`core.batching`: collected for a few ms and decoded together;
each sampled row draws from its own seeded generator, so its tokens are those it gets alone), and
recent prompts' keys and values are kept (`PREFIX_BYTES`), as vLLM's automatic prefix caching
does: a turn prefills only what its conversation added since the last one.

Run in process (`serving`) or as a process of its own (`python -m terminalworld.agent.serve`), which
takes its share of the cores (`core.threads`) and reports it at `GET /health`.
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from terminalworld.core.assets import load_hf_model, load_tokenizer
from terminalworld.core.batching import WINDOW_S, DynamicBatcher
from terminalworld.core.decoding import grouped_attention
from terminalworld.core.engine import ContinuousEngine, Engine
from terminalworld.options import at_least, option, parse

MAX_BATCH = 16  # concurrent requests per generate call: the benchmark's largest concurrency
CONTINUOUS_BATCH = 32  # rows per step of the continuous engine: requests join and leave between steps
# How long an agent grade's batch waits for all its concurrent attempts: longer than a sandbox
# command between two turns (the pilot's estimate: 0.1-0.3 s), short against a turn's generation.
GATHER_WINDOW_S = 1.0
# The keys and values of recent prompts kept for reuse (`core.prefix_cache`): 4 GiB holds about
# 93,000 tokens of SmolLM2-135M in float32, every conversation of a round of the pilot's agent grade
# (24 tasks of about 2,000 tokens, queued attempt by attempt), so a task's next attempt finds its
# prompt.
PREFIX_BYTES = 4 << 30


class ChatModel:
    """A causal LM with its tokenizer and template: `complete(request)` → an OpenAI response body."""

    def __init__(
        self,
        path: str,
        *,
        context_tokens: int,
        dtype: str = "float32",
        max_batch: int = MAX_BATCH,
        gather: int | None = None,
        window_s: float = WINDOW_S,
        prefix_bytes: int = PREFIX_BYTES,
        engine: Engine = "batched",
    ):
        """`engine`: `continuous` (transformers' continuous batching, `core.engine`) or `batched`
        (`core.batching`); for the latter, `gather` and `window_s`: how a batch collects its
        requests; an agent grade gathers its concurrent attempts (`GATHER_WINDOW_S`);
        `prefix_bytes`: how much of recent prompts' keys and values is kept for reuse (0: none, each
        request prefilled whole)."""
        self.tokenizer = load_tokenizer(path)
        self.engine = engine
        self.context_tokens = context_tokens
        model = load_hf_model(path, dtype).eval()
        eos = model.generation_config.eos_token_id
        eos = self.tokenizer.eos_token_id if eos is None else eos
        stop = eos if isinstance(eos, list) else [eos]
        if engine == "continuous":
            self.model = model
            self.batcher = ContinuousEngine(model, stop=stop, max_batch=max(max_batch, CONTINUOUS_BATCH))
            return
        self.model = grouped_attention(model)  # a batch's padded decode steps
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        self.batcher = DynamicBatcher(
            self.model,
            pad=pad,
            stop=stop,
            max_batch=max_batch,
            gather=gather,
            window_s=window_s,
            prefix_bytes=prefix_bytes,
        )

    def stats(self) -> dict[str, Any]:
        """How the server has batched and reused so far: the batch settings, the size of each batch
        formed and, with kept prefixes, the prompt tokens reused and prefilled."""
        b = self.batcher
        if self.engine == "continuous":
            return {"engine": "continuous", "max_batch": b.max_batch}
        out = {
            "engine": "batched",
            "max_batch": b.max_batch,
            "gather": b.gather,
            "window_s": b.window_s,
            "batches": list(b.batches),
        }
        if b.cache is not None:
            out |= {"prefix_tokens_reused": b.cache.hits, "prefix_tokens_prefilled": b.cache.misses}
        return out

    def complete(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """(HTTP status, body) for one chat-completions request."""
        text = self.tokenizer.apply_chat_template(request["messages"], add_generation_prompt=True, tokenize=False)
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        max_new = int(request.get("max_tokens") or 256)
        if len(ids) + max_new > self.context_tokens:
            message = (
                f"This model's maximum context length is {self.context_tokens} tokens; the messages have "
                f"{len(ids)} and {max_new} more were requested."
            )
            return 400, {"error": {"message": message, "type": "BadRequestError"}}
        new = self.batcher.generate(
            ids,
            max_new_tokens=max_new,
            temperature=float(request.get("temperature") or 0.0),
            seed=int(request.get("seed") or 0),
            top_p=float(1.0 if request.get("top_p") is None else request["top_p"]),
        )
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        body = {
            "object": "chat.completion",
            "model": request.get("model", "model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(ids), "completion_tokens": len(new), "total_tokens": len(ids) + len(new)},
        }
        return 200, body


def _handler(model: ChatModel, name: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            route = self.path.rstrip("/")
            if route.endswith("/models"):  # as vLLM lists its model: the readiness check
                self._send(200, {"object": "list", "data": [{"id": name, "object": "model"}]})
            elif route == "/health":
                import torch

                threads = {"torch_threads": torch.get_num_threads(), "interop_threads": torch.get_num_interop_threads()}
                self._send(200, {**threads, **model.stats()})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                status, body = model.complete(request)
            except (ValueError, KeyError, TypeError) as e:
                status, body = 400, {"error": {"message": f"bad request: {e}"}}
            self._send(status, body)

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            return None

    return Handler


@contextmanager
def serving(model: ChatModel, name: str = "model", port: int = 0):
    """Serve `model` on 127.0.0.1 at `port` (0: a free one) for the duration; yields the base URL (…/v1)."""
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(model, name))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@dataclass(frozen=True)
class ServeConfig:
    """`python -m terminalworld.agent.serve`: one checkpoint behind an endpoint of its own."""

    model: str = option(help="checkpoint folder, GGUF file or asset name")
    served_model_name: str = option("model")
    port: int = option(0, help="0: any free port")
    context_tokens: int = option(32768)
    dtype: Literal["float32", "bfloat16"] = option("float32")
    max_batch: int = option(MAX_BATCH)
    prefix_bytes: int = option(PREFIX_BYTES, help="recent prompts' keys and values kept (0: none)")
    sharing: int = option(1, help="busy model processes sharing this one's cores")

    def __post_init__(self) -> None:
        at_least(self, port=0, context_tokens=1, max_batch=1, prefix_bytes=0, sharing=1)


def main(argv: list[str] | None = None) -> None:
    """Serve a checkpoint as a process of its own until killed; prints the base URL once ready."""
    import sys

    from terminalworld.core.threads import set_threads

    args = parse(
        ServeConfig,
        sys.argv[1:] if argv is None else argv,
        "python -m terminalworld.agent.serve",
        description=__doc__.split("\n")[0],
    )
    set_threads(args.sharing)
    model = ChatModel(
        args.model,
        context_tokens=args.context_tokens,
        dtype=args.dtype,
        max_batch=args.max_batch,
        prefix_bytes=args.prefix_bytes,
    )
    with serving(model, args.served_model_name, args.port) as url:
        print(url, flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
