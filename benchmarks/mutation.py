"""Mutation testing of the modules that hold the project's rules, one module at a time, with mutmut 3.

    uv run python benchmarks/mutation.py MODULE [--sample N] [--seed 0] [--children 2]

MODULE is one of the keys of `MODULES` (render, scoring, sampling, packing, sandbox, metrics). The
checkout is copied to a scratch folder (mutmut writes its `mutants/` tree beside the sources), the
`[tool.mutmut]` section of the copy is narrowed to the module and its tests, and mutmut generates
every mutant and maps tests to functions. Then it runs every mutant, or, with `--sample N`, a
uniform seeded sample of N of them: where each surviving mutant reruns tests that load a model
or start sandboxes, a sample bounds the cost and the kill rate comes with a 95% Wilson interval.
The module's entry in `benchmarks/results/mutation.json` is replaced (its hand-written list of
equivalent mutants is kept for mutants that still survive).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import random
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "mutation.json"
# module -> (source file, test selection: test files, then pytest options)
MODULES = {
    "render": ("src/terminalworld/core/render.py", ["tests/core/test_render.py", "-k", "not cli"]),
    "scoring": ("src/terminalworld/eval/scoring.py", ["tests/eval/test_scoring.py"]),
    "sampling": (
        "src/terminalworld/corpus/sampling.py",
        ["tests/corpus/test_sampling.py", "tests/corpus/test_sampling_mutants.py"],
    ),
    "packing": (
        "src/terminalworld/train/packing.py",
        ["tests/train/test_packing.py", "tests/train/test_packing_mutants.py"],
    ),
    "sandbox": (
        "src/terminalworld/env/sandbox.py",
        ["tests/env/test_sandbox.py", "tests/env/test_sandbox_attacks.py", "tests/env/test_sandbox_hostile.py"],
    ),
    "metrics": (
        "src/terminalworld/eval/metrics.py",
        ["tests/eval/test_metrics.py", "tests/eval/test_metrics_mutants.py"],
    ),
}


def wilson(k: int, n: int, z: float = 1.96) -> list[float]:
    """The 95% Wilson score interval of a proportion k / n."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [round(centre - half, 4), round(centre + half, 4)]


def _narrow(pyproject: Path, source: str, tests: list[str]) -> None:
    text = pyproject.read_text()
    text = re.sub(r"only_mutate = \[.*?\]", f"only_mutate = {json.dumps([source])}", text, flags=re.S)
    text = re.sub(
        r"pytest_add_cli_args_test_selection = \[.*?\]",
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}",
        text,
        flags=re.S,
    )
    pyproject.write_text(text)


def _results(work: Path, env: dict[str, str]) -> dict[str, str]:
    out = subprocess.run(
        ["uv", "run", "mutmut", "results", "--all", "true"], cwd=work, env=env, capture_output=True, text=True
    ).stdout
    return dict(line.strip().split(": ", 1) for line in out.splitlines() if ": " in line)


def _changed_lines(diff: str) -> list[str]:
    """The -/+ lines of a mutant's diff: what a reader needs to judge it."""
    return [line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("module", choices=sorted(MODULES))
    ap.add_argument("--sample", type=int, default=0, help="run a uniform sample of this many mutants (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--children", type=int, default=2)
    args = ap.parse_args()
    source, tests = MODULES[args.module]
    dotted = source.removeprefix("src/").removesuffix(".py").replace("/", ".")
    # The scoring tests compare against an independent computation on the same weights: a tiny random
    # model keeps each mutant's rerun to seconds (tests/eval/test_scoring.py).
    env = {**os.environ, "TERMINALWORLD_TINY_SCORING_MODEL": "1"}
    with tempfile.TemporaryDirectory(prefix="tw-mutation-") as tmp:
        os.chmod(tmp, 0o755)  # like a checkout: the sandbox tests run commands as another uid
        work = Path(tmp) / "repo"
        shutil.copytree(ROOT, work, ignore=shutil.ignore_patterns(".venv", "mutants", "local-prefix", ".git", "site"))
        _narrow(work / "pyproject.toml", source, tests)
        # Generates the mutants, then stops: the pattern matches none (mutmut says so and exits 1).
        subprocess.run(["uv", "run", "mutmut", "run", f"{dotted}.x_no_such_function*"], cwd=work, env=env)
        names = sorted(_results(work, env))
        if not names:
            raise SystemExit(f"mutmut generated no mutant of {source}")
        chosen = sorted(random.Random(args.seed).sample(names, args.sample)) if args.sample else names
        run = ["uv", "run", "mutmut", "run", "--max-children", str(args.children)]
        subprocess.run([*run, *(chosen if args.sample else [f"{dotted}*"])], cwd=work, env=env, check=True)
        status = {k: v for k, v in _results(work, env).items() if k in set(chosen)}
        diffs = {
            k: subprocess.run(
                ["uv", "run", "mutmut", "show", k], cwd=work, env=env, capture_output=True, text=True
            ).stdout
            for k, v in status.items()
            if v != "killed"
        }
    counts = {s: sum(v == s for v in status.values()) for s in ("killed", "survived", "timeout", "suspicious")}
    counts["not_checked"] = sum(v == "not checked" for v in status.values())
    n = len(chosen)
    doc = json.loads(RESULTS.read_text())
    old = doc["modules"].get(source, {})
    equivalent = [e for e in old.get("equivalent", []) if status.get(e["mutant"]) == "survived"]
    doc["modules"][source] = {
        "mutants": len(names),
        "checked": n,
        "sampled": bool(args.sample),
        **counts,
        "kill_rate": round(counts["killed"] / n, 4),
        "kill_rate_ci95": wilson(counts["killed"], n) if args.sample else None,
        "tests_used": tests,
        "survivors": {k: _changed_lines(diffs[k]) for k in sorted(diffs)},
        "equivalent": equivalent,
        "date": datetime.date.today().isoformat(),
        "command": f"uv run python benchmarks/mutation.py {args.module}"
        + (f" --sample {args.sample} --seed {args.seed}" if args.sample else ""),
    }
    RESULTS.write_text(json.dumps(doc, indent=2) + "\n")
    print(
        json.dumps({k: v for k, v in doc["modules"][source].items() if k not in ("survivors", "equivalent")}, indent=2)
    )


if __name__ == "__main__":
    main()
