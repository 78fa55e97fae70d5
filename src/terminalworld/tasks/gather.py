"""Run a per-tree job over the run's code trees until enough tasks, in a result that never depends
on how many run at once: one rule for every level of `tasks make`.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from tqdm import tqdm

from terminalworld.env.codetrees import CodeTree


def gather(
    trees: list[CodeTree],
    job: Callable[[CodeTree], tuple[list[dict], Counter]],
    remove: Callable[[list[dict]], None],
    *,
    n: int,
    workers: int,
    desc: str,
) -> tuple[list[dict], Counter, int]:
    """Run `job` on the trees, `workers` at a time (0: one per core), until `n` tasks: the tasks, the
    counts of what was dropped and the number of trees tried. Batches run in parallel, but results
    are taken in tree order up to the n-th task (`remove` deletes the extra ones), so the tasks and
    the counts never depend on the number of workers."""
    workers = workers or os.cpu_count() or 1
    tasks: list[dict] = []
    dropped: Counter = Counter()
    tried = 0
    with tqdm(total=n, desc=desc, unit="task") as bar, ThreadPoolExecutor(workers) as pool:
        for start in range(0, len(trees), workers):
            for made, lost in pool.map(job, trees[start : start + workers]):
                if len(tasks) >= n:
                    remove(made)
                    continue
                tried += 1
                dropped += lost
                kept = made[: n - len(tasks)]
                remove(made[len(kept) :])
                tasks += kept
                bar.update(len(kept))
            if len(tasks) >= n:
                break
    return tasks, dropped, tried
