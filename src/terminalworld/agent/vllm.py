"""vLLM's OpenAI-compatible server for one checkpoint, inside a step (the `gpu` extra), or on a
CPU from the vLLM CPU build's own environment (`vllm_runtime`).

Production's counterpart of `serve.py`: the step starts it on loopback, waits until it lists the
model, points Harbor's agent (or the scorer, through `prompt_logprobs`) at it and stops it
afterwards.

On CPU: chunked prefill is off (with it, a seeded request that goes through a chunked prefill
crashes: `CPU Generator does not use offset`), so one prefill holds a whole prompt
(`--max-num-batched-tokens` = the context); the engine's OpenMP threads are pinned to this
process's share of the cores (`core.threads`) instead of vLLM's default, which reserves a core;
and the KV cache gets a stated size instead of vLLM's guess.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

from terminalworld.errors import StepFailed

CPU_KV_CACHE_GB = 2  # SmolLM2's 4,096-token context at 16 concurrent sequences needs under 1 GB


def vllm_command(
    *,
    model: str,
    served_model: str,
    max_model_len: int,
    port: int,
    seed: int,
    python: str = sys.executable,
    tokenizer: str | None = None,
    cpu: bool = False,
) -> list[str]:
    """The server's command line: the checkpoint's own chat template, bf16, one GPU, and vLLM's own
    sampling defaults: since vLLM 0.9 the server otherwise takes top-k / top-p from the checkpoint's
    `generation_config.json`, so a request giving only a temperature would not be pure temperature
    sampling, as `core.decoding.hf_sample` is in the project's HF paths."""
    argv = [
        python,
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
    if tokenizer:  # a GGUF checkpoint's HF conversion keeps its tokenizer in a folder of its own
        argv += ["--tokenizer", tokenizer]
    if cpu:
        argv += ["--no-enable-chunked-prefill", "--max-num-batched-tokens", str(max_model_len)]
    return argv


def free_port() -> int:
    """A loopback port free now (for a server started right after)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_env(threads: int) -> dict[str, str]:
    """The environment of a vLLM CPU server given `threads` cores of this process's."""
    from terminalworld.core.threads import child_env, cpu_list

    return child_env(
        threads,
        {**os.environ, "VLLM_CPU_OMP_THREADS_BIND": cpu_list(threads), "VLLM_CPU_KVCACHE_SPACE": str(CPU_KV_CACHE_GB)},
    )


@contextlib.contextmanager
def vllm_server(
    *,
    model: str,
    served_model: str,
    max_model_len: int,
    port: int = 8000,
    seed: int = 0,
    start_s: float = 1800.0,
    cpu_threads: int | None = None,
    log: str | None = None,
) -> Iterator[str]:
    """Run the server for the duration; yields its base URL (…/v1). With `cpu_threads`, the vLLM
    CPU build serves (from its own environment, built on first use) on that many cores. Raises
    `StepFailed` when it exits or does not answer within `start_s` seconds."""
    extra: dict = {}
    env = None
    if cpu_threads is not None:
        from terminalworld.agent.vllm_runtime import vllm_python
        from terminalworld.core.assets import hf_folder

        tokenizer = hf_folder(model, "tokenizer")
        model = hf_folder(model, "model")
        extra = {"python": vllm_python(), "tokenizer": tokenizer if tokenizer != model else None, "cpu": True}
        env = cpu_env(cpu_threads)
    command = vllm_command(
        model=model, served_model=served_model, max_model_len=max_model_len, port=port, seed=seed, **extra
    )
    output = open(log, "ab") if log else None  # noqa: SIM115 (closed when the server stops)
    proc = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT if output else None)
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
        if output:
            output.close()
