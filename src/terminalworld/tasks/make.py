"""`terminalworld tasks make`: SWE-style bug-fix tasks from the embedded code trees, validated.

For each code tree, in an order seeded by `seed`:
1. In the sandbox, call each public function of a module on generated inputs (twice, with
   different hash seeds) and keep the calls whose results agree: the original behaviour.
2. Inject one bug into a function (`bugs.inject`), re-run the calls in the sandbox, and keep the
   bug when some call now fails: those calls are FAIL_TO_PASS, and calls that still pass are
   PASS_TO_PASS (a few of the function's own, then other functions').
   A bug needs `HIDDEN_FAILING` failing calls beyond the one the instruction shows, so that
   hard-coding the shown call (or reading it off the instruction) never passes, and at least two
   expected values among the function's cases, so that no single guessed value passes.
3. Write the task (`layout.write_task`): the repository with the bug committed as the only commit
   of a fresh repository (no reflog, no object of the original), an issue-style instruction that
   shows one failing call and as much more as the task's level gives, the cases, and the reverse patch as the
   solution.
4. Validate it as Harbor's verifier would: the original passes, the bugged copy fails, the oracle
   solution fixes it. A task that fails any check is dropped and counted in `manifest.json`.

The instruction is written at one level of a ladder of help (`LEVELS`), declared before any model
is graded: `command`, at the bottom, is no bug at all but a task one or two shell commands solve
(`tasks.commands`, its own tasks from the same unseen trees); `issue` shows the failing call and
its wrong output as a user would report it (no file, no hint of where the bug is); `function` adds
the file that defines the function and the reproduction command; `pinpoint` adds the buggy line,
quoted with its number, and the kind of change it needs. `--level ladder` writes every level, one
suite per level under `OUT/<level>/`; the fix levels (`FIX_LEVELS`) come from the same bugs, and
only `instruction.md` and the level in `task.toml` differ between them.

Everything is seeded by (seed, repo), so the same seed and trees give the same tasks.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import random
import shutil
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tqdm import tqdm

from terminalworld.core.formats import iter_trajectories
from terminalworld.core.paths import check_outputs
from terminalworld.core.records import Tally, tallied, write_json
from terminalworld.env import copies, visible
from terminalworld.env.codetrees import (
    CodeTree,
    discover_code_trees,
    git,
    materialize,
    materialized_bytes,
    module_name,
    normalize_times,
)
from terminalworld.env.sandbox import Sandbox, SandboxConfig, check_available
from terminalworld.errors import InputError
from terminalworld.options import at_least, option
from terminalworld.tasks import commands, layout
from terminalworld.tasks.bugs import Bug, fixed_lines, has_candidates, inject
from terminalworld.tasks.gather import gather

LEVELS = ("command", "issue", "function", "pinpoint")
FIX_LEVELS = LEVELS[1:]  # the levels that ask for a bug fix: the same bugs, more help at each
# What the pinpoint level says about the change each kind of bug needs (never the fixed text).
CHANGE_HINTS = {
    "flip_comparison": "A comparison operator on that line is the wrong way round (such as `<` for `<=`, or `==` for `!=`).",
    "off_by_one": "An integer constant on that line is off by one.",
    "wrong_operator": "An operator on that line is the wrong one (such as `+` for `-`, or `and` for `or`).",
    "wrong_constant": "A boolean constant on that line is inverted.",
    "swapped_arguments": "Two arguments of a call that starts on that line are in the wrong order.",
    "dropped_branch": "An `if` statement, with its body, is missing just before that line.",
}
MIN_CALLS = 3  # a function needs this many stable calls before a bug in it can be tested
MAX_FAIL_TO_PASS = 5
HIDDEN_FAILING = 2  # failing cases beyond the instruction's example: hard-coding the example never passes
MAX_PASS_TO_PASS = 5
OWN_PASS_TO_PASS = 2  # of the bugged function's passing calls among PASS_TO_PASS, when it has them


@dataclass(frozen=True)
class MakeTasksConfig:
    """`terminalworld tasks make`: how many tasks, from which repositories, with which seed."""

    out: str = option(help="output folder: one Harbor task folder per task, plus manifest.json")
    n: int = option(20, help="how many tasks")
    seed: int = option(0)
    repos: list[str] = option([], help="only these code trees (pypi/NAME); default: all")
    exclude_repos: list[str] = option([], help="never these code trees")
    exclude_repos_from: list[str] = option(
        [], help="trajectory files or globs (a training subset): the repos in them are never used"
    )
    per_repo: int = option(1, help="at most this many tasks from one repository")
    max_modules: int = option(6, help="modules of a repository tried before giving up on it")
    max_bugs: int = option(12, help="bugs tried per function")
    workers: int = option(0, help="repositories in parallel (0: one per core)")
    level: Literal["command", "issue", "function", "pinpoint", "ladder"] = option(
        "function",
        help="help in the instruction: command (no bug: a shell-command task), issue, function, pinpoint, "
        "or ladder (each level in OUT/<level>/)",
    )

    def __post_init__(self) -> None:
        at_least(self, n=1, seed=0, per_repo=1, max_modules=1, max_bugs=1, workers=0)

    def check_paths(self) -> None:
        """Refuse, before any work, outputs that cannot be written or that touch an input."""
        check_outputs([("--out", self.out, "dir", ())], [("--exclude-repos-from", p) for p in self.exclude_repos_from])


def levels(cfg: MakeTasksConfig) -> tuple[str, ...]:
    """The levels a run writes."""
    return LEVELS if cfg.level == "ladder" else (cfg.level,)


def fix_levels(cfg: MakeTasksConfig) -> tuple[str, ...]:
    """The levels a run writes that ask for a bug fix."""
    return tuple(level for level in levels(cfg) if level in FIX_LEVELS)


def level_dir(out: Path, cfg: MakeTasksConfig, level: str) -> Path:
    """Where the suite of `level` goes: `out` itself for one level, `out/<level>` for the ladder."""
    return out / level if cfg.level == "ladder" else out


def _cases(module: str, function: str, calls: list[list[str]]) -> list[dict[str, Any]]:
    return [
        {"id": f"{module}.{function}#{i}", "module": module, "function": function, "args": a, "expected": r}
        for i, (a, r) in enumerate(calls)
    ]


def _discover(sandbox: Sandbox, probe: Path, module: str, functions: list[str]) -> dict[str, list[list[str]]]:
    """Calls of `functions` whose results are the same under two hash seeds."""
    (probe / "spec.json").write_text(json.dumps({"module": module, "functions": functions}))
    runs = []
    for hash_seed in (1, 2):
        result = sandbox.run(f"PYTHONHASHSEED={hash_seed} python3 /probe/check.py --discover /probe/spec.json")
        try:
            runs.append(json.loads(result.output.strip().splitlines()[-1]) if not result.limits else {})
        except (json.JSONDecodeError, IndexError):
            runs.append({})
    stable = {}
    for name, calls in runs[0].items():
        again = {tuple(c) for c in runs[1].get(name, [])}
        kept = [c for c in calls if tuple(c) in again]
        if len(kept) >= MIN_CALLS:
            stable[name] = kept
    return stable


def _outcomes(sandbox: Sandbox, probe: Path, cases: list[dict[str, Any]]) -> dict[str, dict] | None:
    """Each case's result line from `check.py` in the sandbox, by id; None if the run failed."""
    (probe / "cases.json").write_text(json.dumps(cases))
    result = sandbox.run("PYTHONHASHSEED=3 python3 /probe/check.py /probe/cases.json")
    rows = {}
    for line in result.output.splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and "id" in row:
            rows[row["id"]] = row
    return rows if not result.limits and len(rows) == len(cases) else None


def instruction(level: str, *, module: str, case: dict[str, Any], got: str, path: str, bug: Bug) -> str:
    """The issue at `level` of the ladder (see the module docstring) for the first failing `case`,
    whose call returns `got` under `bug` in file `path`."""
    function = bug.function
    call = f"{function}({case['args'][1:-1].rstrip(',')})"
    shown = f"```python\n>>> from {module} import {function}\n>>> {call}\n{got}\n```\n\n"
    fix = f"Fix the bug in the source so that `{function}` behaves correctly again; do not change the tests or the call above.\n"
    if level == "issue":
        return (
            f"# `{function}` returns a wrong result\n\n`{function}` gives a different answer than it used to:\n\n"
            f"{shown}The expected result is `{case['expected']}`. {fix}"
        )
    text = (
        f"# `{module}.{function}` returns a wrong result\n\n"
        f"`{function}` (defined in `{path}`) gives a different answer than it used to:\n\n{shown}"
        f"The expected result is `{case['expected']}`.\n\n"
        f'Reproduce it from the repository root with `python3 -c "from {module} import {function}; '
        f'print(repr({call}))"`. {fix}'
    )
    if level == "pinpoint":
        line = bug.source.splitlines()[bug.line - 1].strip()
        text += f"\nThe bug is at line {bug.line} of `{path}`, which reads:\n\n```python\n{line}\n```\n\n"
        text += CHANGE_HINTS[bug.kind] + "\n"
    return text


def _patch(repo: Path, rel: str, original: str) -> str:
    """The unified diff from the committed (bugged) file back to `original`, for `git apply`."""
    bugged = (repo / rel).read_text()
    (repo / rel).write_text(original)
    try:
        return git(repo, "diff", "--no-color", "--", rel)
    finally:
        (repo / rel).write_text(bugged)


def _commit_bug(repo: Path, rel: str, bug: Bug) -> None:
    """Make `repo` a fresh repository whose only commit holds the bug: `git diff` and `git log` show
    nothing, and nothing in `.git` holds the original (an amended commit would leave it in the reflog
    and as an unreachable object, one `git checkout HEAD@{1} -- .` from the fix). No reflog is kept."""
    message = git(repo, "log", "-1", "--format=%B").strip()
    shutil.rmtree(repo / ".git")
    (repo / rel).write_text(bug.source)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "-c", "core.logAllRefUpdates=false", "commit", "-q", "-m", message)
    shutil.rmtree(repo / ".git" / "logs", ignore_errors=True)
    normalize_times(repo)


def _try_repo(tree: CodeTree, cfg: MakeTasksConfig, work: Path, out: Path) -> tuple[list[dict], Counter]:
    """Up to `cfg.per_repo` validated tasks from one code tree, and the counts of what was dropped."""
    rng = random.Random(f"{cfg.seed}:{tree.repo}")
    dropped: Counter = Counter()
    made: list[dict] = []
    orig = materialize(tree, work / "orig")
    probe = work / "probe"
    probe.mkdir()
    shutil.copyfile(layout.CHECK_SCRIPT, probe / "check.py")
    sandbox = Sandbox(str(orig), SandboxConfig(timeout_s=60), binds={"/probe": str(probe)})
    modules = [(rel, module_name(rel)) for rel in tree.py_files]
    modules = [(rel, m) for rel, m in modules if m]
    rng.shuffle(modules)
    for rel, module in modules[: cfg.max_modules]:
        source = (orig / rel).read_text()
        try:
            tree_ast = ast.parse(source)
        except SyntaxError:
            continue
        funcs = {n.name: n for n in tree_ast.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}
        calls = _discover(sandbox, probe, module, sorted(n for n, f in funcs.items() if has_candidates(source, f)))
        for function in sorted(calls, key=lambda _: rng.random()):
            if len(made) >= cfg.per_repo:
                return made, dropped
            candidates = inject(source, tree_ast, funcs[function])
            rng.shuffle(candidates)
            others = [c for name, cs in sorted(calls.items()) if name != function for c in _cases(module, name, cs)]
            own = _cases(module, function, calls[function])
            for bug in candidates[: cfg.max_bugs]:
                # A fix a command can copy from the sandbox's system folders solves the task unseen.
                if (seen := visible.fix_seen(function, fixed_lines(source, bug))) is not None:
                    dropped["fix_readable_in_sandbox"] += 1
                    where = f"{tree.repo} {module}.{function}:{bug.line}"
                    tqdm.write(f"{where}: fix readable in the sandbox at {seen}", file=sys.stderr)
                    continue
                (orig / rel).write_text(bug.source)
                outcomes = _outcomes(sandbox, probe, own + others)
                (orig / rel).write_text(source)
                if outcomes is None:
                    dropped["bug_run_failed"] += 1
                    continue
                failing = [c for c in own + others if not outcomes[c["id"]]["passed"]]
                if not failing:
                    dropped["bug_not_observable"] += 1
                    continue
                if len(failing) < 1 + HIDDEN_FAILING:
                    dropped["too_few_failing_cases"] += 1
                    continue
                # Some of the function's own passing calls first: code that tells the verifier apart
                # cannot then pass by returning one guessed value (or the bugged one's opposite).
                own_passing = [c for c in own if outcomes[c["id"]]["passed"]]
                passing = own_passing[:OWN_PASS_TO_PASS] + [c for c in others if outcomes[c["id"]]["passed"]]
                passing += own_passing[OWN_PASS_TO_PASS:]
                graded = failing[:MAX_FAIL_TO_PASS] + own_passing[:OWN_PASS_TO_PASS]
                if len({c["expected"] for c in graded if c["function"] == function}) < 2:
                    dropped["one_expected_value"] += 1
                    continue
                task = _write(
                    tree=tree,
                    cfg=cfg,
                    work=work,
                    out=out,
                    rel=rel,
                    module=module,
                    source=source,
                    bug=bug,
                    failing=failing,
                    passing=passing,
                    got=outcomes[failing[0]["id"]]["got"],
                )
                if task is None:
                    dropped["validation_failed"] += 1
                    continue
                made.append(task)
                break
    if not made:
        dropped["repo_without_task"] += 1
    return made, dropped


def _write(
    *,
    tree: CodeTree,
    cfg: MakeTasksConfig,
    work: Path,
    out: Path,
    rel: str,
    module: str,
    source: str,
    bug: Bug,
    failing: list[dict[str, Any]],
    passing: list[dict[str, Any]],
    got: str,
) -> dict | None:
    """Write and validate the task of `bug` in file `rel` (original text `source`); `got` is what the
    first failing call returns under the bug. Its manifest entry, or None when validation fails."""
    f2p, p2p = failing[:MAX_FAIL_TO_PASS], passing[:MAX_PASS_TO_PASS]
    name = tree.repo.split("/", 1)[1]
    digest = hashlib.sha256(bug.source.encode()).hexdigest()[:8]
    task_id = f"{name}__{bug.function}__{bug.kind}-{digest}".lower().replace("_", "-").replace(".", "-")
    bugged = work / f"bugged-{task_id}"
    shutil.copytree(work / "orig", bugged, symlinks=True)
    _commit_bug(bugged, rel, bug)
    patch = _patch(bugged, rel, source)
    cases = [{**c, "kind": "FAIL_TO_PASS"} for c in f2p] + [{**c, "kind": "PASS_TO_PASS"} for c in p2p]
    metadata = {"repo": tree.repo, "version": tree.version, "module": module, "function": bug.function}
    metadata |= {"kind": bug.kind, "seed": cfg.seed, "path": rel, "line": bug.line, "wrong_output": got}
    staging = work / f"task-{task_id}"
    text = {level: instruction(level, module=module, case=f2p[0], got=got, path=rel, bug=bug) for level in FIX_LEVELS}
    layout.write_task(
        staging, repo_dir=bugged, instruction=text["function"], cases=cases, patch=patch, metadata=metadata
    )
    checks = {}
    for check, repo, solve in (("original", work / "orig", False), ("bugged", None, False), ("oracle", None, True)):
        with copies.repo_copy(str(repo or staging / layout.REPO_DIR), prefix="tw-check-", dir=str(work)) as copy:
            checks[check] = layout.verify(staging, Path(copy), solve=solve)
    if checks != {"original": 1.0, "bugged": 0.0, "oracle": 1.0}:
        shutil.rmtree(staging)
        return None
    for level in fix_levels(cfg):  # the same validated task, each level's instruction
        dest = level_dir(out, cfg, level) / task_id
        shutil.rmtree(dest, ignore_errors=True)  # a task of an earlier, interrupted run
        shutil.copytree(staging, dest, symlinks=True)
        layout.write_instruction(dest, instruction=text[level], metadata=metadata | {"level": level})
    shutil.rmtree(staging)
    return {"task_id": task_id, **metadata, "fail_to_pass": len(f2p), "pass_to_pass": len(p2p)}


def make_tasks(cfg: MakeTasksConfig) -> dict[str, Any]:
    """Generate and validate `cfg.n` tasks into `cfg.out`; returns (and writes) the manifest."""
    check_available()
    excluded, tally = set(cfg.exclude_repos), Tally()
    for _, traj in tallied(iter_trajectories(cfg.exclude_repos_from) if cfg.exclude_repos_from else (), tally):
        excluded.add(traj.repo)
    if cfg.exclude_repos_from and tally.counts["scanned"] == tally.counts["malformed"]:
        raise InputError(
            f"--exclude-repos-from {','.join(cfg.exclude_repos_from)}: no valid trajectory in "
            f"{tally.counts['scanned']} records, so nothing could be excluded"
        )
    trees = [t for t in discover_code_trees() if (not cfg.repos or t.repo in cfg.repos) and t.repo not in excluded]
    if not trees:
        raise InputError("no code tree left after --repos / --exclude-repos")
    random.Random(cfg.seed).shuffle(trees)
    out = Path(cfg.out)
    for level in levels(cfg):
        level_dir(out, cfg, level).mkdir(parents=True, exist_ok=True)
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None

    def job(tree: CodeTree) -> tuple[list[dict], Counter]:
        # The probe's sandbox writes in the work folder, so it is a copy too; each check gets its own.
        with copies.copy_space("tw-tasks-", dir=base, content_bytes=materialized_bytes(tree)) as work:
            return _try_repo(tree, cfg, Path(work), out)

    common = {
        "config": {k: v for k, v in vars(cfg).items() if k not in ("out", "workers")},
        "levels": list(levels(cfg)),
    }
    excluded_counts = {
        "excluded_repos": len(excluded),
        "exclude_scanned": tally.counts["scanned"],
        "exclude_malformed": tally.counts["malformed"],
        "exclude_bad_lines": tally.bad_lines,
    }
    suites: dict[str, dict[str, Any]] = {}
    manifest: dict[str, Any] = {}
    if fix_levels(cfg):
        tasks, dropped, tried = gather(
            trees, job, lambda made: _remove(out, cfg, made), n=cfg.n, workers=cfg.workers, desc="tasks"
        )
        manifest = common | {
            "tasks": tasks,
            "repos": sorted({t["repo"] for t in tasks}),
            "repos_tried": tried,
            "dropped": dict(sorted(dropped.items())),
            **excluded_counts,
        }
        suites |= {
            level: manifest | {"level": level, "tasks": [t | {"level": level} for t in tasks]}
            for level in fix_levels(cfg)
        }
    if "command" in levels(cfg):
        suite = commands.suite(
            trees,
            seed=cfg.seed,
            n=cfg.n,
            per_repo=cfg.per_repo,
            workers=cfg.workers,
            out=level_dir(out, cfg, "command"),
            base=base,
        )
        suites["command"] = common | suite | excluded_counts
        manifest["command_tasks"] = len(suite["tasks"])  # the ladder's top manifest: its tasks are the bugs
    for level, suite in suites.items():  # each level is a suite of its own (`layout.task_order`)
        write_json(str(level_dir(out, cfg, level) / "manifest.json"), suite)
    if cfg.level != "ladder":
        return suites[cfg.level]
    write_json(str(out / "manifest.json"), manifest)
    return manifest


def _remove(out: Path, cfg: MakeTasksConfig, made: list[dict]) -> None:
    for extra in made:
        for level in fix_levels(cfg):
            shutil.rmtree(level_dir(out, cfg, level) / extra["task_id"])
