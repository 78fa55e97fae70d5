"""vLLM's OpenAI-compatible server for one checkpoint, inside a step (the `gpu` extra).

Production's counterpart of `serve.py`: the step starts it on loopback, waits until it lists the
model, points Harbor's agent at it and stops it afterwards.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

from terminalworld.errors import StepFailed


def vllm_command(*, model: str, served_model: str, max_model_len: int, port: int, seed: int) -> list[str]:
    """The server's command line: the checkpoint's own chat template, bf16, one GPU, and vLLM's own
    sampling defaults: since vLLM 0.9 the server otherwise takes top-k / top-p from the checkpoint's
    `generation_config.json`, so a request giving only a temperature would not be pure temperature
    sampling, as `core.decoding.hf_sample` is in the project's HF paths."""
    return [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model,
        "--served-model-name",
        served_model,
        "--max-model-len",
        str(max_model_len),
        "--dtype",
        "bfloat16",
        "--seed",
        str(seed),
        "--generation-config",
        "vllm",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]


@contextlib.contextmanager
def vllm_server(
    *, model: str, served_model: str, max_model_len: int, port: int = 8000, seed: int = 0, start_s: float = 1800.0
) -> Iterator[str]:
    """Run the server for the duration; yields its base URL (…/v1). Raises `StepFailed` when it
    exits or does not answer within `start_s` seconds."""
    command = vllm_command(model=model, served_model=served_model, max_model_len=max_model_len, port=port, seed=seed)
    proc = subprocess.Popen(command)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + start_s
        while True:
            if proc.poll() is not None:
                raise StepFailed(f"vLLM exited with status {proc.returncode} before serving {model}")
            with (
                contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError),
                urllib.request.urlopen(f"{url}/models", timeout=5) as r,
            ):
                if served_model in {m["id"] for m in json.loads(r.read())["data"]}:
                    break
            if time.monotonic() > deadline:
                raise StepFailed(f"vLLM did not serve {model} within {start_s:g} s")
            time.sleep(5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
