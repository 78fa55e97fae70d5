"""A client of OpenAI-compatible chat-completions endpoints (vLLM's server, `agent.serve`), with the
standard library only, so that Harbor's own environment can import it: the agent asks its model
there, and the simulated environment its simulator."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


class ContextLengthExceededError(Exception):
    """The endpoint refused the prompt as longer than the model's context: the episode ends there
    and the verifier grades what the agent did (an agent's failure, not the infrastructure's)."""


def chat_completion(api_base: str, body: dict[str, Any]) -> tuple[str, int, int]:
    """(reply, prompt tokens, completion tokens) of one chat-completions request `body`."""
    request = urllib.request.Request(
        f"{api_base.rstrip('/')}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=3600) as response:
            answer = json.loads(response.read())
    except urllib.error.HTTPError as e:
        detail = e.read().decode(errors="replace")
        if e.code == 400 and "context" in detail.lower():
            raise ContextLengthExceededError(detail) from None
        raise
    usage = answer.get("usage") or {}
    return answer["choices"][0]["message"]["content"], usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
