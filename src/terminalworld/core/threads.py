"""How many threads a process that runs a model may use: the cores it actually has (its CPU
affinity, capped by its cgroup's CPU quota) divided among the busy model processes that share them,
so two busy threads never share one core.

On a shared 2-core machine a two-thread decode step next to one busy neighbour ran up to 36x
slower than a one-thread step (docs/serving.md): torch's default (one thread per visible core)
assumes the machine is its own. A parent that starts a model process beside itself (a scorer
beside a server, a server for a Harbor job) passes the child its share through `child_env`, which
sets `TERMINALWORLD_THREADS` and the OpenMP/MKL variables before the child's runtime starts.
"""

from __future__ import annotations

import contextlib
import math
import os

THREADS_ENV = "TERMINALWORLD_THREADS"
CGROUP_CPU_MAX = "/sys/fs/cgroup/cpu.max"  # cgroup v2: "<quota> <period>" or "max <period>"
CGROUP_V1 = ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu/cpu.cfs_period_us")


def _cgroup_cores() -> int | None:
    """The whole cores the cgroup's CPU quota allows (rounded up), or None when unlimited."""
    try:
        with open(CGROUP_CPU_MAX) as f:
            quota, period = f.read().split()[:2]
        if quota == "max":
            return None
        return max(1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        pass
    try:
        with open(CGROUP_V1[0]) as q, open(CGROUP_V1[1]) as p:
            quota_us, period_us = int(q.read()), int(p.read())
        return None if quota_us <= 0 else max(1, math.ceil(quota_us / period_us))
    except (OSError, ValueError):
        return None


def available_cores() -> int:
    """Cores this process may run on: its affinity mask, capped by its cgroup CPU quota."""
    cores = len(os.sched_getaffinity(0))
    quota = _cgroup_cores()
    return min(cores, quota) if quota else cores


def thread_budget(sharing: int = 1) -> int:
    """Threads for one of `sharing` busy model processes on this process's cores (at least one).
    A share a parent passed down (`TERMINALWORLD_THREADS`) wins: the parent knows its neighbours."""
    if sharing < 1:
        raise ValueError(f"sharing must be at least 1, not {sharing}")
    given = os.environ.get(THREADS_ENV)
    if given:
        try:
            n = int(given)
        except ValueError:
            raise ValueError(f"{THREADS_ENV}={given!r} is not a whole number of threads") from None
        if n < 1:
            raise ValueError(f"{THREADS_ENV}={given!r}: at least one thread")
        return min(n, available_cores())
    return max(1, available_cores() // sharing)


def set_threads(sharing: int = 1) -> int:
    """Give torch (intra-op, and one inter-op thread: inference runs one op at a time) and this
    process's future OpenMP children this process's share of the cores; returns the thread count.
    Call once at the entry of a process that runs a model, before its first op."""
    import torch

    n = thread_budget(sharing)
    torch.set_num_threads(n)
    # Already set, or parallel work has started: the inter-op pool stays as it is.
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)
    os.environ.update(_omp(n))
    global _configured
    _configured = True
    return n


def child_env(threads: int, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a child model process given `threads` threads (ours by default)."""
    return {**(os.environ if env is None else env), THREADS_ENV: str(threads), **_omp(threads)}


def _omp(n: int) -> dict[str, str]:
    return {"OMP_NUM_THREADS": str(n), "MKL_NUM_THREADS": str(n)}


def cpu_list(threads: int) -> str:
    """The last `threads` cores of this process's affinity, as a cpu list ("2,3"): where a child
    that pins its own threads (vLLM's `VLLM_CPU_OMP_THREADS_BIND`) should run."""
    cores = sorted(os.sched_getaffinity(0))
    return ",".join(str(c) for c in cores[-max(1, min(threads, len(cores))) :])


_configured = False


def ensure_threads(sharing: int = 1) -> int | None:
    """For code that may run a model without an entry point of its own having set threads (a
    library call): once per process, lower torch's threads to this process's share when it has
    more (never raise a count a caller chose); returns the count set, or None."""
    global _configured
    if _configured:
        return None
    import torch

    _configured = True
    n = thread_budget(sharing)
    if torch.get_num_threads() <= n:
        return None
    return set_threads(sharing)
