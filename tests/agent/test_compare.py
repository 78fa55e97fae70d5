"""Paired agent comparisons on known answers."""

import pytest

from terminalworld.agent.compare import paired, pass_at_k_ci, per_task, permutation_test, sign_test, wilson
from terminalworld.errors import InputError


def test_wilson_interval_by_hand():
    lo, hi = wilson(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-4) and hi == pytest.approx(0.7634, abs=1e-4)
    assert wilson(0, 10)[0] == 0.0 and wilson(0, 10)[1] == pytest.approx(0.2775, abs=1e-4)
    assert wilson(0, 0) is None


def test_sign_and_permutation_tests_by_hand():
    assert sign_test(5, 0) == 2 / 32 and sign_test(0, 0) == 1.0 and sign_test(3, 3) == 1.0
    assert permutation_test([1, 1, 1]) == 2 / 8  # all plus or all minus
    assert permutation_test([1, -1, 0]) == 1.0 and permutation_test([0, 0]) == 1.0
    assert permutation_test([1.0] * 20) < 1e-3  # past the exact limit: seeded draws


def test_pass_at_k_with_intervals_over_tasks():
    assert pass_at_k_ci({"a": (2, 2), "b": (2, 2)}) == {
        "1": {"value": 1.0, "ci95": [1.0, 1.0]},
        "2": {"value": 1.0, "ci95": [1.0, 1.0]},
    }
    half = pass_at_k_ci({t: (2, 1) for t in "abcd"})
    assert half["1"] == {"value": 0.5, "ci95": [0.5, 0.5]} and half["2"]["value"] == 1.0
    mixed = pass_at_k_ci({t: (1, int(t < "e")) for t in "abcdefgh"}, seed=1)
    lo, hi = mixed["1"]["ci95"]
    assert mixed["1"]["value"] == 0.5 and 0.0 < lo < 0.5 < hi < 1.0


def test_paired_comparison_between_arms():
    rows = [{"task": t, "scored": True, "reward": 1.0} for t in "abcdefghij"]
    a = per_task([*rows, {"task": "x", "scored": False, "reward": None}])
    b = per_task([r | {"reward": 0.0} for r in rows])
    result = paired(a, b)
    assert result == {
        "tasks": 10,
        "mean_difference": 1.0,
        "a_higher": 10,
        "b_higher": 0,
        "ties": 0,
        "sign_p": 2 / 1024,
        "permutation_p": 2 / 1024,
    }
    assert paired(a, a)["sign_p"] == 1.0
    with pytest.raises(InputError, match="different tasks"):
        paired(a, {"a": (1, 1)})
    with pytest.raises(InputError, match="attempts differ"):
        paired(a, {t: (2, 0) for t in a})
