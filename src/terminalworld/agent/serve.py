"""An OpenAI-compatible chat-completions endpoint over an in-process HF model, on loopback.

The local stand-in for vLLM's server: the Harbor agent talks to both the same way. It renders the
messages with the checkpoint's own chat template, generates (`core.decoding.hf_sample`: greedy at
temperature 0, else pure temperature sampling with the request's seed), and answers 400 with "maximum context length" when the prompt and the
requested tokens do not fit, as vLLM does. One request at a time (the model is shared).
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from terminalworld.core.assets import load_hf_model, load_tokenizer
from terminalworld.core.decoding import hf_sample


class ChatModel:
    """A causal LM with its tokenizer and template: `complete(request)` → an OpenAI response body."""

    def __init__(self, path: str, *, context_tokens: int, dtype: str = "float32"):
        self.tokenizer = load_tokenizer(path)
        self.model = load_hf_model(path, dtype).eval()
        self.context_tokens = context_tokens
        self.lock = threading.Lock()

    def complete(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """(HTTP status, body) for one chat-completions request."""
        import torch

        text = self.tokenizer.apply_chat_template(request["messages"], add_generation_prompt=True, tokenize=False)
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        max_new = int(request.get("max_tokens") or 256)
        if len(ids) + max_new > self.context_tokens:
            message = (
                f"This model's maximum context length is {self.context_tokens} tokens; the messages have "
                f"{len(ids)} and {max_new} more were requested."
            )
            return 400, {"error": {"message": message, "type": "BadRequestError"}}
        with self.lock:
            out = hf_sample(
                self.model,
                torch.tensor([ids]),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                max_new_tokens=max_new,
                temperature=float(request.get("temperature") or 0.0),
                seed=int(request.get("seed") or 0),
                pad=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
            )
        new = out[0].tolist()
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        body = {
            "object": "chat.completion",
            "model": request.get("model", "model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(ids), "completion_tokens": len(new), "total_tokens": len(ids) + len(new)},
        }
        return 200, body


def _handler(model: ChatModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
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
def serving(model: ChatModel):
    """Serve `model` on 127.0.0.1 at a free port for the duration; yields the base URL (…/v1)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(model))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
