"""Tier 2 probe sets: session prefixes plus one command whose true output the sandbox gave.

A simulator is graded per command family (`FAMILIES`), so one right about listings and wrong about
test logs shows as such. Each probe is a held-out row (`core.heldout`'s schema plus `family`): one
to three real earlier steps of the recorder's policy on a code tree, then a target command of its
family, every command run in the sandbox over a fresh copy and formatted as the recorder formats a
turn. A target whose output is blank, hits a sandbox limit or differs when run again is not a
probe (the next tree is tried, the reason counted). Each probe is seeded by (seed, index, repo) in
its own copy, so a seed gives the same bytes whatever the number of workers.
"""

from __future__ import annotations

import ast
import hashlib
import os
import random
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from terminalworld.core.formats import repos_in
from terminalworld.core.heldout import heldout_row
from terminalworld.core.paths import check_outputs
from terminalworld.core.prompts import SYSTEM_PROMPT, TASK_SYSTEM_PROMPT
from terminalworld.core.records import atomic_jsonl, dumps_row, write_json
from terminalworld.core.trajectories import OBSERVATION_PREFIX, Trajectory, Turn
from terminalworld.corpus.actions import FORMAT, Step, action_message, shell_quote, workspace_root
from terminalworld.corpus.exploration import Policy, TreeIndex, run_on_fresh_copy
from terminalworld.env.codetrees import CodeTree, discover_code_trees, module_name
from terminalworld.env.sandbox import CommandResult, SandboxConfig, check_available
from terminalworld.errors import InputError
from terminalworld.options import above, at_least, option

# Round-robin over the probe index. `range` is `head -n K` or `sed -n 'A,Bp'` of a file, `cat` a file
# of at most SMALL_FILE_BYTES, `grep` `grep -n "NAME" FILE` for a name FILE defines; the git ones
# follow a real `sed -i` edit in the prefix; `missing_file` reads a path that does not exist;
# `traceback` calls an undecorated function with one positional argument too many (a TypeError, or
# most often the import's ModuleNotFoundError: the sandbox's python3 has no third-party package);
# `test_summary` runs a unittest file the prefix writes (one test that the function exists, one
# that its `__name__` is right or, half the time, wrong), its unreproducible `Ran N tests in` line
# dropped. The Python families use the task system prompt (it offers python3), the others the
# exploration prompt.
FAMILIES = (
    "ls",
    "wc",
    "grep",
    "range",
    "cat",
    "git_status",
    "git_diff",
    "missing_file",
    "traceback",
    "test_summary",
)
PYTHON_FAMILIES = frozenset({"traceback", "test_summary"})
SMALL_FILE_BYTES = 2048
MAX_PREFIX = 3
TRACEBACK = "Traceback (most recent call last):"


class Unusable(Exception):
    """A code tree cannot give a probe of the family asked for; the message is the reason counted."""


def _python_files(index: TreeIndex, rng: random.Random, *, min_lines: int = 1) -> list[str]:
    """The tree's `.py` files with at least `min_lines` lines, in a seeded order."""
    files = [p for p, n in index.lines.items() if p.endswith(".py") and n >= min_lines]
    if not files:
        raise Unusable("no_python_file")
    rng.shuffle(files)
    return files


def _ls(policy: Policy, rng: random.Random) -> tuple[list[Step], Step]:
    folder = rng.choice(policy.ix.dirs or ["."])
    command = rng.choice([f"ls {folder}", f"ls -la {folder}"])
    return [], Step(f"Let me see what `{folder}` contains.", command)


def _wc(policy: Policy, rng: random.Random) -> tuple[list[Step], Step]:
    path = _python_files(policy.ix, rng)[0]
    return [], Step(f"Let me check how long `{path}` is before reading it.", f"wc -l {path}")


def _grep(policy: Policy, rng: random.Random) -> tuple[list[Step], Step]:
    public = [d for d in policy.ix.definitions if not d.name.startswith("_")] or policy.ix.definitions
    d = rng.choice(public)
    return [], Step(f"Let me find every line of `{d.path}` that mentions `{d.name}`.", f'grep -n "{d.name}" {d.path}')


def _range(policy: Policy, rng: random.Random) -> tuple[list[Step], Step]:
    path = _python_files(policy.ix, rng, min_lines=10)[0]
    n = policy.ix.lines[path]
    if rng.random() < 0.5:
        k = rng.choice([10, 15, 20, 30])
        return [], Step(f"Let me look at the beginning of `{path}`.", f"head -n {k} {path}")
    a = rng.randint(1, n - 5)
    b = min(n, a + rng.randint(5, 25))
    return [], Step(f"Let me read lines {a} to {b} of `{path}`.", f"sed -n '{a},{b}p' {path}")


def _cat(policy: Policy, rng: random.Random) -> tuple[list[Step], Step]:
    small = [rel for src, rel in policy.ix.tree.files if 0 < src.stat().st_size <= SMALL_FILE_BYTES]
    if not small:
        raise Unusable("no_small_file")
    path = rng.choice(small)
    return [], Step(f"`{path}` is short; let me read all of it.", f"cat {path}")


def _edit(policy: Policy) -> Step:
    """The recorder's `sed -i` edit of the policy's target definition (the task's subject)."""
    return policy.edit()[0]


def _git_status(policy: Policy, rng: random.Random) -> tuple[list[Step], Step]:
    return [_edit(policy)], Step("Let me confirm which files my edit changed.", "git status")


def _git_diff(policy: Policy, rng: random.Random) -> tuple[list[Step], Step]:
    return [_edit(policy)], Step("Let me check the diff of my change.", "git diff")


def _missing_file(policy: Policy, rng: random.Random) -> tuple[list[Step], Step]:
    existing = set(policy.ix.lines) | set(policy.ix.dirs)
    base = Path(_python_files(policy.ix, rng)[0])
    names = [f"test_{base.stem}.py", f"{base.stem}_utils.py", f"{base.stem}_helpers.py", f"_{base.stem}_v2.py"]
    missing = [p for p in (str(base.parent / name).removeprefix("./") for name in names) if p not in existing]
    if not missing:
        raise Unusable("no_missing_path")
    path = rng.choice(missing)
    commands = [f"cat {path}", f"head -n 20 {path}", f"wc -l {path}", f"sed -n '1,20p' {path}", f"ls -l {path}"]
    commands.append(f'grep -n "def " {path}')
    return [], Step(f"Let me check whether `{path}` exists and what it holds.", rng.choice(commands))


def _parse(source: Path) -> list[ast.stmt]:
    """The top-level statements of a source file; none when it does not parse."""
    try:
        return ast.parse(source.read_text(encoding="utf-8", errors="replace")).body
    except SyntaxError:
        return []


def _callable_functions(source: Path) -> list[ast.FunctionDef]:
    """Public top-level functions whose call with one positional argument too many fails before the
    body runs: no decorator that could wrap them, no `*args` or `**kwargs`."""
    return [
        f
        for f in _parse(source)
        if isinstance(f, ast.FunctionDef)
        and not f.name.startswith("_")
        and not f.decorator_list
        and f.args.vararg is None
        and f.args.kwarg is None
    ]


def _importable_function(policy: Policy, rng: random.Random) -> tuple[str, str, ast.FunctionDef]:
    """(path, module, function) of a seeded `.py` file of the tree with a function to call."""
    sources = {rel: src for src, rel in policy.ix.tree.files}
    for path in _python_files(policy.ix, rng):
        module = module_name(path)
        functions = _callable_functions(sources[path]) if module else []
        if functions:
            return path, module, rng.choice(functions)
    raise Unusable("no_callable_function")


def _traceback(policy: Policy, rng: random.Random) -> tuple[list[Step], Step]:
    path, module, f = _importable_function(policy, rng)
    end = max(f.lineno, f.body[0].lineno - 1)
    read = Step(f"Let me read the signature of `{f.name}` in `{path}`.", f"sed -n '{f.lineno},{end}p' {path}")
    args = ", ".join(["None"] * (len(f.args.posonlyargs) + len(f.args.args) + 1))
    code = f"import {module}; {module}.{f.name}({args})"
    call = Step(
        f"Let me see how `{f.name}` fails when it is called with too many arguments.", f"python3 -c {shell_quote(code)}"
    )
    return [read], call


def _test_summary(policy: Policy, rng: random.Random) -> tuple[list[Step], Step]:
    _path, module, f = _importable_function(policy, rng)
    expected = f.name if rng.random() < 0.5 else f.name + rng.choice(["_v2", "_impl", "_legacy"])
    test_path = f"test_{f.name.lower()}_probe.py"
    source = (
        f"import unittest\n\nimport {module}\n\n\nclass ProbeTest(unittest.TestCase):\n"
        f"    def test_defined(self):\n        self.assertTrue(hasattr({module}, {f.name!r}))\n\n"
        f"    def test_name(self):\n        self.assertEqual({module}.{f.name}.__name__, {expected!r})\n"
    )
    write = Step(f"Let me write a small test for `{f.name}`.", f"cat <<'EOF' > {test_path}\n{source}EOF")
    run = Step("Let me run the test.", f'python3 -m unittest -v {test_path} 2>&1 | grep -v "^Ran "')
    return [write], run


_TARGETS: dict[str, Callable[[Policy, random.Random], tuple[list[Step], Step]]] = {
    "ls": _ls,
    "wc": _wc,
    "grep": _grep,
    "range": _range,
    "cat": _cat,
    "git_status": _git_status,
    "git_diff": _git_diff,
    "missing_file": _missing_file,
    "traceback": _traceback,
    "test_summary": _test_summary,
}


def plan_probe(*, family: str, index: TreeIndex, rng: random.Random) -> tuple[Policy, list[Step], Step]:
    """The policy (for the task), the prefix steps and the target step of one probe: the recorder's
    orientation, up to two of its read-only exploration steps (never the target command itself), then
    the family's setup step if it has one."""
    if not index.definitions:
        raise Unusable("no_definition")
    policy = Policy(index, rng, 1, 1)
    setup, target = _TARGETS[family](policy, rng)
    steps = [policy.orient()]
    for _ in range(rng.randint(0, MAX_PREFIX - 1 - len(setup))):
        step = policy.explore()
        if step.command not in {s.command for s in steps} | {target.command}:
            steps.append(step)
    return policy, steps + setup, target


def run_steps(*, tree: CodeTree, steps: Sequence[Step], sandbox_config: SandboxConfig) -> list[CommandResult]:
    """The result of each of `steps`, run in order in one sandbox over a fresh copy of `tree`, file
    times pinned after each (as the recorder does); then the last step's once more, run again, so a
    caller can tell a reproducible output from one that is not."""
    return run_on_fresh_copy(tree, [step.command for step in [*steps, steps[-1]]], sandbox_config)


def _target_problem(results: list[CommandResult]) -> str | None:
    """Why the target's output makes no probe: a limit, a blank output, or a second run that differs.
    (A prefix step that hits a limit stays, note and all, as in a recorded session.)"""
    *_, target, again = results
    if target.limits or again.limits:
        return "limit_hit"
    if not target.output.strip():
        return "empty_output"
    if target.output != again.output:
        return "unstable_output"
    return None


def probe_row(*, tree: CodeTree, family: str, instance_id: str, seed: int, sandbox_config: SandboxConfig) -> dict:
    """One probe of `family` from `tree` as a held-out row plus `family`; raises `Unusable`."""
    rng = random.Random(f"{seed}:{instance_id}:{tree.repo}")
    policy, prefix, target = plan_probe(family=family, index=TreeIndex.build(tree), rng=rng)
    steps = [*prefix, target]
    results = run_steps(tree=tree, steps=steps, sandbox_config=sandbox_config)
    if problem := _target_problem(results):
        raise Unusable(problem)
    turns = tuple(
        Turn(action_message(s), OBSERVATION_PREFIX + r.output)
        for s, r in zip(steps, results[: len(steps)], strict=True)
    )
    system = TASK_SYSTEM_PROMPT if family in PYTHON_FAMILIES else SYSTEM_PROMPT
    traj = Trajectory(instance_id, tree.repo, system, policy.task(), turns, FORMAT)
    return {**heldout_row(traj, len(prefix)), "family": family}


def _probe(*, i: int, order: Sequence[CodeTree], seed: int, sandbox_config: SandboxConfig) -> tuple[dict, Counter]:
    """Probe `i`: family `i` round-robin, from the first code tree, starting at position `i` of the
    seeded order, that gives one; and why the trees tried before it did not."""
    family = FAMILIES[i % len(FAMILIES)]
    skipped: Counter = Counter()
    for k in range(len(order)):
        tree = order[(i + k) % len(order)]
        try:
            row = probe_row(
                tree=tree, family=family, instance_id=f"probe-{seed}-{i:05d}", seed=seed, sandbox_config=sandbox_config
            )
            return row, skipped
        except Unusable as e:
            skipped[f"{family}:{e}"] += 1
    raise InputError(f"no code tree gives a {family!r} probe: {dict(skipped)}")


@dataclass(frozen=True)
class ProbesConfig:
    """A probe set: how many, the seed, which code trees, and the sandbox's limits."""

    out: str = option(
        help="probe rows (JSON Lines); the manifest goes to OUT.manifest.json",
    )
    n: int = option(200, help="number of probes, round-robin over the families")
    seed: int = option(0)
    repos: list[str] = option([], help="only these code trees (pypi/NAME)")
    exclude_repos: list[str] = option([], help="leave these code trees out (say, trained on)")
    # The steps' spelling of the same: trajectory files whose repos are left out (a bad line is an error).
    exclude_repos_from: list[str] = option([], cli=False)
    timeout_s: float = option(10.0, help="wall limit per command")
    max_output_chars: int = option(8000, help="the sandbox's output cut (head and tail), as the recorder's")
    workers: int = option(0, help="parallel probes (0: one per core); the output does not depend on it")

    def __post_init__(self) -> None:
        at_least(self, n=1, seed=0, max_output_chars=1, workers=0)
        above(self, timeout_s=0)

    def check_paths(self) -> None:
        """Refuse, before any work, outputs that cannot be written or that touch an input."""
        check_outputs([("--out", self.out, "file", (".manifest.json",))], [])


def make_probes(cfg: ProbesConfig) -> dict[str, Any]:
    """Write `cfg.n` probes to the JSON Lines file `cfg.out` (atomically) and `OUT.manifest.json`
    beside it; returns the manifest."""
    out, n, seed, repos, exclude_repos = cfg.out, cfg.n, cfg.seed, cfg.repos, cfg.exclude_repos
    if cfg.exclude_repos_from:
        exclude_repos = sorted(set(exclude_repos) | repos_in(cfg.exclude_repos_from))
    timeout_s, max_output_chars, workers = cfg.timeout_s, cfg.max_output_chars, cfg.workers
    check_available()
    trees = [t for t in discover_code_trees() if (not repos or t.repo in repos) and t.repo not in exclude_repos]
    if not trees:
        raise InputError("no code tree left after repos / exclude_repos")
    random.Random(seed).shuffle(trees)
    half = max_output_chars // 2
    sandbox_config = SandboxConfig(timeout_s=timeout_s, head_chars=half, tail_chars=max_output_chars - half)
    skipped: Counter = Counter()
    rows = []
    with tqdm(total=n, desc="probes", unit="probe") as bar, ThreadPoolExecutor(workers or os.cpu_count() or 1) as pool:
        for row, lost in pool.map(
            lambda i: _probe(i=i, order=trees, seed=seed, sandbox_config=sandbox_config), range(n)
        ):
            rows.append(row)
            skipped += lost
            bar.update(1)
    with atomic_jsonl(out) as f:
        for row in rows:
            f.write(dumps_row(row))
    versions = {t.repo: t.version for t in trees}
    manifest = {
        "config": {"n": n, "seed": seed, "repos": list(repos), "exclude_repos": list(exclude_repos)}
        | {"timeout_s": timeout_s, "max_output_chars": max_output_chars},
        "probes": len(rows),
        "families": dict(Counter(r["family"] for r in rows)),
        "skipped": dict(sorted(skipped.items())),
        "code_trees": {repo: versions[repo] for repo in sorted({r["repo"] for r in rows})},
        "sha256": hashlib.sha256(Path(out).read_bytes()).hexdigest(),
        "workspace_root": workspace_root(),
    }
    write_json(out + ".manifest.json", manifest)
    return manifest
