"""Paired agent comparisons: two checkpoints graded on the same tasks with the same attempts.

An agent's pass@1 over a few dozen tasks is noisy, and two checkpoints are compared on the same
tasks, so the comparison is paired per task: the unit is a task, its value the share of attempts
that solved it. `pass_at_k_ci` gives pass@1..k with a percentile bootstrap over tasks; `wilson`
the interval of a pooled share; `paired` the per-task tests between two arms: the exact sign test
on the tasks where one arm's solve rate is higher (with one attempt per task, McNemar's exact test)
and the exact sign-flip permutation test on the per-task differences (Monte Carlo, seeded, past
`EXACT_TASKS` tasks). All are pure functions of per-task counts {task: (attempts, solves)}.
"""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

from terminalworld.agent.results import SOLVED, pass_at_k
from terminalworld.errors import InputError

EXACT_TASKS = 16  # up to this many tasks with a difference, the permutation test enumerates every sign
PERMUTATIONS = 20000
BOOTSTRAP = 2000
Z95 = 1.959963984540054


def per_task(rows: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """{task: (scored attempts, solves)} from trial rows (`results.read_trials`)."""
    out: dict[str, tuple[int, int]] = {}
    for r in rows:
        if r.get("scored"):
            n, c = out.get(r["task"], (0, 0))
            out[r["task"]] = (n + 1, c + int(r["reward"] >= SOLVED))
    return out


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson's score interval of a share (95 % by default); None without trials."""
    if n <= 0:
        return None
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def pass_at_k_ci(counts: dict[str, tuple[int, int]], *, seed: int = 0) -> dict[str, dict[str, Any]]:
    """pass@k for k = 1 .. the fewest attempts of a task, each with a 95 % percentile bootstrap
    interval over tasks (resampled with replacement, seeded)."""
    if not counts:
        return {}
    tasks = sorted(counts)
    k_max = min(counts[t][0] for t in tasks)
    rng = random.Random(seed)
    draws = [[rng.randrange(len(tasks)) for _ in tasks] for _ in range(BOOTSTRAP)]
    out = {}
    for k in range(1, k_max + 1):
        values = [pass_at_k(*counts[t], k) for t in tasks]
        stats = sorted(sum(values[i] for i in d) / len(d) for d in draws)
        lo, hi = stats[int(0.025 * (BOOTSTRAP - 1))], stats[int(0.975 * (BOOTSTRAP - 1))]
        out[str(k)] = {"value": sum(values) / len(values), "ci95": [lo, hi]}
    return out


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign test (ties dropped): the chance of a split at least this uneven."""
    n, k = wins + losses, min(wins, losses)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n) if n else 1.0


def permutation_test(diffs: list[float], *, seed: int = 0) -> float:
    """Two-sided paired sign-flip test of mean(diffs) = 0: exact over every sign pattern of the
    non-zero differences up to `EXACT_TASKS` of them, else `PERMUTATIONS` seeded draws."""
    nz = [d for d in diffs if d != 0]
    if not nz:
        return 1.0
    observed = abs(sum(nz)) - 1e-12
    if len(nz) <= EXACT_TASKS:
        signs = itertools.product((1, -1), repeat=len(nz))
        hits = total = 0
        for s in signs:
            total += 1
            hits += abs(sum(a * b for a, b in zip(s, nz, strict=True))) >= observed
        return hits / total
    rng = random.Random(seed)
    hits = sum(abs(sum(d if rng.random() < 0.5 else -d for d in nz)) >= observed for _ in range(PERMUTATIONS))
    return (hits + 1) / (PERMUTATIONS + 1)


def paired(a: dict[str, tuple[int, int]], b: dict[str, tuple[int, int]], *, seed: int = 0) -> dict[str, Any]:
    """Arm a against arm b on the same tasks with the same number of attempts: the mean per-task
    solve-rate difference (a - b), the tasks where each is higher, and both tests' two-sided p."""
    if set(a) != set(b):
        raise InputError(f"paired comparison: the arms graded different tasks ({len(set(a) ^ set(b))} differ)")
    uneven = [t for t in a if a[t][0] != b[t][0]]
    if uneven:
        raise InputError(f"paired comparison: attempts differ on {len(uneven)} tasks (first: {uneven[0]})")
    diffs = [a[t][1] / a[t][0] - b[t][1] / b[t][0] for t in sorted(a)]
    wins, losses = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
    return {
        "tasks": len(diffs),
        "mean_difference": sum(diffs) / len(diffs) if diffs else None,
        "a_higher": wins,
        "b_higher": losses,
        "ties": len(diffs) - wins - losses,
        "sign_p": sign_test(wins, losses),
        "permutation_p": permutation_test(diffs, seed=seed),
    }
