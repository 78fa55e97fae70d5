"""The inference precision as a declared choice: CPU features read from /proc/cpuinfo's flags, `auto`
resolved to bfloat16 only where the hardware has it natively and the measured agreement meets the
bound, and the measured figures the code quotes equal the committed benchmark's."""

import json
from pathlib import Path

import pytest

from terminalworld.core import precision
from terminalworld.core.precision import BOUND, MEASURED, bf16_features, cpu_flags, resolve
from terminalworld.errors import InputError

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "precision.json"

SAPPHIRE = "processor\t: 0\nmodel name\t: Intel Xeon\nflags\t\t: fpu avx512f avx512_bf16 amx_bf16 amx_tile\n\n"
CASCADE = "processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512_vnni\n"
ZEN4 = "processor\t: 0\nflags\t\t: fpu avx512f avx512_bf16\nbugs\t\t: spectre_v1\n"


def test_bf16_features_are_read_from_the_first_processors_flags():
    assert bf16_features(cpu_flags(SAPPHIRE)) == ["amx_bf16", "avx512_bf16"]
    assert bf16_features(cpu_flags(ZEN4)) == ["avx512_bf16"]
    assert bf16_features(cpu_flags(CASCADE)) == []
    assert cpu_flags("no flags here") == frozenset()
    assert isinstance(cpu_flags(), frozenset)  # this machine's, whatever it has


def test_auto_is_bfloat16_only_where_native_faster_and_within_the_bound(monkeypatch):
    good = {"speedup": 2.0, **{k: b / 2 for k, b in BOUND.items()}}
    monkeypatch.setitem(precision.MEASURED, "bfloat16", good)
    assert resolve("auto", "cpu", cpu_flags(SAPPHIRE)) == "bfloat16"
    assert resolve("auto", "cpu", cpu_flags(ZEN4)) == "bfloat16"
    assert resolve("auto", "cpu", cpu_flags(CASCADE)) == "float32"  # bf16 emulated: no native units
    for explicit in ("float32", "bfloat16"):
        assert resolve(explicit, "cpu", cpu_flags(CASCADE)) == explicit  # a stated choice is kept
    monkeypatch.setitem(precision.MEASURED, "bfloat16", {**good, "row_mean_nll_nats": 2 * BOUND["row_mean_nll_nats"]})
    assert resolve("auto", "cpu", cpu_flags(SAPPHIRE)) == "float32"  # measured outside the bound
    monkeypatch.setitem(precision.MEASURED, "bfloat16", {**good, "speedup": 0.9})
    assert resolve("auto", "cpu", cpu_flags(SAPPHIRE)) == "float32"  # measured slower
    with pytest.raises(InputError, match="precision 'fp8'"):
        resolve("fp8")


def test_the_quoted_measurement_is_the_committed_benchmarks():
    scoring = json.loads(RESULTS.read_text())["scoring"]
    measured = {"speedup": scoring["speedup_bfloat16"], **scoring["agreement_bfloat16"]}
    quoted = MEASURED["bfloat16"]
    assert quoted == {k: pytest.approx(abs(measured[k]), abs=5e-4 if k != "speedup" else 5e-3) for k in quoted}
