"""Compute precision of inference (scoring and HF generation): a declared choice, float32 the reference.

bfloat16 weights can run a CPU's bf16 matrix units (AMX tiles, AVX512-BF16 dot products) and a
GPU's tensor cores faster than float32; they also move each log-probability. So `auto` picks
bfloat16 only where the hardware computes it natively, where it measured faster, and where its
measured agreement with float32 on real rows meets `BOUND` (`MEASURED`, from
`benchmarks/precision.py`); everywhere else, and in every exactness test, float32.
"""

from __future__ import annotations

from typing import Literal

from terminalworld.errors import InputError

Precision = Literal["auto", "float32", "bfloat16"]
PRECISIONS = ("auto", "float32", "bfloat16")
CPUINFO = "/proc/cpuinfo"
# /proc/cpuinfo flags of native bf16 matrix arithmetic: Intel AMX tiles, AVX-512 bf16 dot products.
BF16_FLAGS = ("amx_bf16", "avx512_bf16")

# The agreement a faster precision must keep with float32 on real rows: each row's mean NLL per
# target token within 0.005 nats (a PPL within 0.5%), and the probe's median PPL within 0.5%.
# The pilot's checkpoints differ from each other by far more (tenths of a nat), so a precision
# inside the bound cannot reorder them.
BOUND = {"row_mean_nll_nats": 0.005, "median_ppl_rel": 0.005}

# bfloat16 weights against float32 on SmolLM2-135M-Instruct, real held-out rows, one interleaved run
# of benchmarks/precision.py on 2 cores with AVX512-BF16 and no AMX (benchmarks/results/precision.json;
# tests/core/test_precision.py checks these equal it): scoring's speed-up, then its agreement. On
# 6 rows of 895-1,699 tokens at 1-minute load 0.9-1.2 (quiet): 1.57x faster, but one row's mean NLL
# moved 0.0094 nats, outside the bound (the median PPL moved 0.48%), so `auto` is float32 on this CPU kind.
MEASURED = {"bfloat16": {"speedup": 1.565, "row_mean_nll_nats": 0.0094, "median_ppl_rel": 0.0048}}


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The CPU feature flags of the first processor in `cpuinfo` (default: this machine's
    /proc/cpuinfo; none where it cannot be read)."""
    if cpuinfo is None:
        try:
            with open(CPUINFO) as f:
                cpuinfo = f.read(1 << 20)  # the first processor's block is a few KB
        except OSError:
            return frozenset()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def bf16_features(flags: frozenset[str]) -> list[str]:
    """Which of the native bf16 features the flags name (`BF16_FLAGS` order)."""
    return [f for f in BF16_FLAGS if f in flags]


def within_bound(agreement: dict[str, float]) -> bool:
    """Whether a measured agreement (`MEASURED`'s keys) meets `BOUND` on every measure."""
    return all(abs(agreement[k]) <= bound for k, bound in BOUND.items())


def pays(measured: dict[str, float]) -> bool:
    """Whether a precision measured faster than float32 and within the bound."""
    return measured["speedup"] > 1.0 and within_bound(measured)


def native_bf16(device: str, flags: frozenset[str] | None = None) -> bool:
    """Whether `device` computes bf16 matmuls natively: a CPU with AMX or AVX512-BF16, a CUDA GPU
    that reports bf16 support."""
    if device == "cuda":
        import torch

        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return bool(bf16_features(cpu_flags() if flags is None else flags))


def resolve(choice: str, device: str = "cpu", flags: frozenset[str] | None = None) -> str:
    """The precision a choice stands for on `device`: `auto` is bfloat16 where the hardware has it
    natively and it measured faster and within the bound, else float32; the others are themselves."""
    if choice not in PRECISIONS:
        raise InputError(f"precision {choice!r}: choose one of {', '.join(PRECISIONS)}")
    if choice != "auto":
        return choice
    return "bfloat16" if pays(MEASURED["bfloat16"]) and native_bf16(device, flags) else "float32"
