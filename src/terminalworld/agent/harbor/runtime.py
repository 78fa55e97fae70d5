"""Harbor's own Python environment: Harbor pinned exactly (`harbor-requirements.txt`), installed
apart from the project because its pins conflict with ours, as Marin runs it.

Built once with uv under the cache (`$TERMINALWORLD_CACHE/harbor/<hash of the pins>`), from the
package registry; every later run reuses it. Jobs run in it with the project's `src` on PYTHONPATH
and Harbor's telemetry and litellm's cost-map download turned off.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from terminalworld.core.assets import build_once, cache_root
from terminalworld.errors import InputError

REQUIREMENTS = Path(__file__).with_name("harbor-requirements.txt")
HARBOR_VERSION = "0.26.0"
SRC = Path(__file__).resolve().parents[3]
QUIET_ENV = {"HARBOR_TELEMETRY": "0", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def _uv() -> list[str]:
    uv = shutil.which("uv")
    return [uv] if uv else [sys.executable, "-m", "uv"]


def harbor_python() -> str:
    """The interpreter of Harbor's environment, created on first use."""
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:12]

    def build(out: str) -> None:
        try:
            subprocess.run([*_uv(), "venv", "--quiet", "--python", "3.12", out], check=True, capture_output=True)
            python = os.path.join(out, "bin", "python")
            install = [*_uv(), "pip", "install", "--quiet", "--python", python, "--no-deps", "-r", str(REQUIREMENTS)]
            subprocess.run(install, check=True, capture_output=True)
        except subprocess.CalledProcessError as e:
            raise InputError(
                f"could not build Harbor's environment: {e.stderr.decode(errors='replace')[-2000:]}"
            ) from None

    return os.path.join(build_once(os.path.join(cache_root(), "harbor", digest), build), "bin", "python")


def harbor_env() -> dict[str, str]:
    """The environment a Harbor process runs with: ours, plus the project's source and quiet flags."""
    path = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, **QUIET_ENV, "PYTHONPATH": path}
