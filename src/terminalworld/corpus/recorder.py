"""Record a real-shell corpus in SWE-ZERO's row format.

The exploration policy (`corpus.exploration`, shaped like SWE-ZERO's execution-free agents) issues
15–30 commands grounded in a real code tree; every command runs in the bubblewrap sandbox and its
real output becomes the observation. With generated tasks, the solver's policy (`corpus.solver`)
adds one task-solving episode per task, graded by the task's own verifier (its reward stays in
the episode's metadata).

The policy is seeded per trajectory (`seed`, index), every file time is pinned after each command
and the trees are built deterministically, so the same seed re-records the same rows.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import tomllib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from terminalworld.core.paths import check_outputs
from terminalworld.core.prompts import SYSTEM_PROMPT, TASK_SYSTEM_PROMPT
from terminalworld.core.records import atomic_jsonl, dumps_row, write_json
from terminalworld.core.trajectories import OBSERVATION_PREFIX, Trajectory, Turn
from terminalworld.corpus.actions import FORMAT, action_message, workspace_root
from terminalworld.corpus.exploration import Policy, TreeIndex, run_on_fresh_copy
from terminalworld.corpus.solver import plan
from terminalworld.env.codetrees import CodeTree, discover_code_trees, normalize_times
from terminalworld.env.sandbox import Sandbox, SandboxConfig, check_available
from terminalworld.errors import InputError
from terminalworld.options import above, at_least, option
from terminalworld.tasks import layout


def record_one(
    tree: CodeTree, index: TreeIndex, seed: int, i: int, min_turns: int, max_turns: int, sandbox_config: SandboxConfig
) -> Trajectory:
    """Trajectory `i`: plan it with a policy seeded by (seed, i, repo) and run every command in a
    sandbox over a fresh copy of the tree (removed afterwards)."""
    rng = random.Random(f"{seed}:{i}:{tree.repo}")
    policy = Policy(index, rng, min_turns, max_turns)
    steps = list(policy.plan())
    results = run_on_fresh_copy(tree, [step.command for step in steps], sandbox_config)
    turns = [Turn(action_message(s), OBSERVATION_PREFIX + r.output) for s, r in zip(steps, results, strict=True)]
    return Trajectory(
        instance_id=f"{tree.repo.split('/', 1)[1]}-{i}",
        repo=tree.repo,
        system=SYSTEM_PROMPT,
        task=policy.task(),
        turns=tuple(turns),
        format=FORMAT,
        metadata={"exit_status": "submitted", "source_version": tree.version, "task_kind": policy.kind},
    )


@dataclass(frozen=True)
class RecordConfig:
    """A recording: how many trajectories, the seed, shards, turn counts and sandbox limits."""

    out: str = option(help="output folder: jsonl.gz shards and manifest.json (resumable per shard)")
    trajectories: int = option(120)
    seed: int = option(0)
    shard_size: int = option(50)
    min_turns: int = option(15)
    max_turns: int = option(30)
    workers: int = option(0, help="parallel sandboxes (0: one per core)")
    timeout_s: float = option(10.0, flag="--timeout", help="per-command time limit, seconds")
    # SWE-ZERO's cap: the first and last half around a truncation note.
    max_output_chars: int = option(8000, help="observation cap: head and tail around a truncation note")
    tasks: str | None = option(None, help="generated tasks folder: one solving episode per task, in solving.jsonl.gz")

    def __post_init__(self) -> None:
        at_least(self, trajectories=1, seed=0, shard_size=1, min_turns=1, max_turns=1, workers=0, max_output_chars=1)
        above(self, timeout_s=0)

    def check_paths(self) -> None:
        """Refuse, before any work, outputs that cannot be written or that touch an input."""
        check_outputs([("--out", self.out, "dir", ())], [("--tasks", self.tasks)])


def record_corpus(cfg: RecordConfig) -> dict[str, Any]:
    """Record `cfg.trajectories` trajectories into jsonl.gz shards plus `manifest.json`.

    Shard k holds trajectories [k*shard_size, (k+1)*shard_size); a shard already on disk is kept,
    so an interrupted recording resumes. Repositories are visited in a seeded order, all distinct
    before any repeats."""
    check_available()
    trees = discover_code_trees()
    if not trees:
        raise InputError("no pure-Python distribution found to use as a code tree")
    order = list(trees)
    random.Random(cfg.seed).shuffle(order)
    indexes: dict[str, TreeIndex] = {}
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    n_shards = (cfg.trajectories + cfg.shard_size - 1) // cfg.shard_size
    half = cfg.max_output_chars // 2
    sandbox_config = SandboxConfig(timeout_s=cfg.timeout_s, head_chars=half, tail_chars=cfg.max_output_chars - half)
    workers = cfg.workers or os.cpu_count() or 1
    shards = []

    def job(i: int) -> Trajectory:
        tree = order[i % len(order)]
        return record_one(tree, indexes[tree.repo], cfg.seed, i, cfg.min_turns, cfg.max_turns, sandbox_config)

    with tqdm(total=cfg.trajectories, desc="record", unit="traj") as bar, ThreadPoolExecutor(workers) as pool:
        for k in range(n_shards):
            ids = range(k * cfg.shard_size, min((k + 1) * cfg.shard_size, cfg.trajectories))
            path = out / f"shard-{k:05d}-of-{n_shards:05d}.jsonl.gz"
            if not path.exists():
                for i in ids:
                    tree = order[i % len(order)]
                    indexes.setdefault(tree.repo, TreeIndex.build(tree))
                with atomic_jsonl(str(path)) as f:
                    for traj in pool.map(job, ids):
                        f.write(dumps_row(traj.to_swe_zero_row()))
                        bar.update(1)
            else:
                bar.update(len(ids))
            shards.append(
                {"path": path.name, "trajectories": len(ids), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
            )
    repos = sorted({order[i % len(order)].repo for i in range(cfg.trajectories)})
    if cfg.tasks:
        shards.append(record_solving_shard(cfg.tasks, out, cfg.seed, sandbox_config, workers))
        repos = sorted(set(repos) | set(shards[-1].pop("repos")))
    manifest = {
        "format": FORMAT,
        "config": {k: v for k, v in vars(cfg).items() if k not in ("out", "tasks")},
        "trajectories": cfg.trajectories,
        "repos": len(repos),
        "shards": shards,
        "code_trees": {t.repo: t.version for t in trees if t.repo in set(repos)},
    }
    write_json(str(out / "manifest.json"), manifest)
    return manifest


def record_solving(task: Path, seed: int, sandbox_config: SandboxConfig, *, wrong: bool = False) -> Trajectory:
    """Run the solver's episode for `task` in the sandbox (a wrong fix when `wrong`) and grade it
    with the task's verifier."""
    rng = random.Random(f"{seed}:{task.name}")
    meta = tomllib.loads((task / "task.toml").read_text())["metadata"]
    steps = plan(task, rng, wrong=wrong)
    with layout.repo_copy(task, prefix="tw-solve-", dir=workspace_root()) as repo:
        sandbox = Sandbox(str(repo), sandbox_config)
        turns = []
        for step in steps:
            result = sandbox.run(step.command)
            normalize_times(repo)
            turns.append(Turn(action_message(step), OBSERVATION_PREFIX + result.output))
        reward = layout.verify(task, repo)
    level = meta.get("level", "function")
    return Trajectory(
        instance_id=f"solve-{task.name}" if level == "function" else f"solve-{level}-{task.name}",
        repo=meta["repo"],
        system=TASK_SYSTEM_PROMPT,
        task=(task / "instruction.md").read_text(),
        turns=tuple(turns),
        format=FORMAT,
        metadata={"exit_status": "submitted", "source_version": meta["source_version"], "task_kind": "solve"}
        | {"reward": reward, "task_id": task.name, "bug_kind": meta["bug_kind"], "level": level}
        | {"wrong_fix": wrong},
    )


SOLVING = "solving.jsonl.gz"


def solving_tasks(tasks_dir: Path) -> list[Path]:
    """The task folders of a suite, or of every level of a ladder (`tasks make --level ladder`:
    a suite per level under `<level>/`), levels in the ladder's order; command tasks left out (the
    solver records fixes, and a command task has no bug)."""
    path = tasks_dir / "manifest.json"
    manifest = json.loads(path.read_text()) if path.is_file() else {}
    # A ladder's top manifest names its levels; each level's own manifest also names its `level`.
    levels = manifest.get("levels", []) if "level" not in manifest else []
    roots = [tasks_dir / level for level in levels] if levels else [tasks_dir]
    found = [p for root in roots for p in sorted(root.iterdir()) if (p / "task.toml").is_file()]
    return [p for p in found if layout.command_spec(p) is None]


def record_solving_shard(
    tasks_dir: str, out: Path, seed: int, sandbox_config: SandboxConfig, workers: int
) -> dict[str, Any]:
    """One solving episode per task folder of `tasks_dir` into `{out}/solving.jsonl.gz` (kept if
    present, so a recording resumes); its manifest entry, with the repos and how many were solved."""
    tasks = solving_tasks(Path(tasks_dir))
    if not tasks:
        raise InputError(f"--tasks {tasks_dir}: no task folder inside")
    path = out / SOLVING
    if not path.exists():
        with atomic_jsonl(str(path)) as f, ThreadPoolExecutor(workers) as pool:
            for traj in tqdm(
                pool.map(lambda t: record_solving(t, seed, sandbox_config), tasks), total=len(tasks), desc="solve"
            ):
                f.write(dumps_row(traj.to_swe_zero_row()))
    with gzip.open(path, "rt") as f:
        rows = [json.loads(line) for line in f]
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    solved = sum(r["reward"] >= 1.0 for r in rows)
    return {
        "path": path.name,
        "trajectories": len(rows),
        "solved": solved,
        # What the solving episodes cover: the ladder's levels and the kinds of bug, solved ones only.
        "solved_by_level": dict(
            sorted(Counter(r.get("level", "function") for r in rows if r["reward"] >= 1.0).items())
        ),
        "solved_by_kind": dict(sorted(Counter(r["bug_kind"] for r in rows if r["reward"] >= 1.0).items())),
        "sha256": sha,
        "repos": [r["repo"] for r in rows],
    }
