"""Scoring through a running vLLM server: the vLLM CPU build lives in an environment of its own
(`agent.vllm_runtime`), so the scorer reaches it over HTTP, not in process."""

from __future__ import annotations

import json
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from terminalworld.errors import InputError


class VLLMServerScorer:
    """A running vLLM server's `prompt_logprobs` (the completions endpoint, token ids in): the vLLM
    CPU build, which lives in its own environment and so serves from its own process. A batch's
    rows go as concurrent requests, which the server batches."""

    def __init__(self, url: str, served_model: str):
        models = _get_json(f"{url.rstrip('/')}/models")["data"]
        model = next((m for m in models if m["id"] == served_model), None)
        if model is None:
            raise InputError(f"{url} does not serve {served_model!r} (it serves {[m['id'] for m in models]})")
        self.url, self.served_model, self.max_len = url.rstrip("/"), served_model, model.get("max_model_len")

    def _one(self, ids: np.ndarray, positions: np.ndarray) -> np.ndarray:
        body = {"model": self.served_model, "prompt": ids.tolist(), "max_tokens": 1, "prompt_logprobs": 0}
        request = urllib.request.Request(
            f"{self.url}/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=3600) as r:
            entries = json.loads(r.read())["choices"][0]["prompt_logprobs"]
        # Entry p maps token ids (as JSON keys) to their log-probability at p, the observed one always included.
        return np.array([entries[p][str(int(ids[p]))]["logprob"] for p in positions], dtype=np.float64)

    def batch_logprobs(self, items: list[tuple[np.ndarray, np.ndarray]]) -> list[np.ndarray]:
        """log p(token[p] | tokens[:p]) at each row's positions (each p >= 1), in the order of `items`."""
        with ThreadPoolExecutor(max_workers=min(16, len(items))) as pool:
            return list(pool.map(lambda item: self._one(*item), items))


def _get_json(url: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return json.loads(r.read())
    except OSError as e:
        raise InputError(f"no vLLM server answers at {url} ({e})") from None
