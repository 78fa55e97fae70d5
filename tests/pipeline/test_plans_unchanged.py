"""Every experiment's plan keeps its steps: the same `name@version`, output folder and config
fingerprint (Marin's recipe hash), so refactoring the library never forks an artifact silently.

A change that is meant to change a plan rewrites the fixture on purpose and says why in the
commit:

    uv run python tests/pipeline/test_plans_unchanged.py     # rewrite plans.json
"""

import json
import os
import runpy
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = sorted(p.stem for p in (REPO_ROOT / "experiments").glob("*.py"))
FIXTURE = Path(__file__).with_name("plans.json")
PREFIX = "/prefix"


def plan_of(name: str) -> list[dict[str, str]]:
    """The steps of `experiments/{name}.py`'s targets, dependencies first (an experiment without a
    `__main__` entry, such as a shared grid, has none)."""
    from marin.experiment.cli import graph_handles

    from terminalworld.pipeline import entry

    targets: list = []

    def capture(found, *args, recipe=None, **kwargs) -> int:
        targets.extend(found(recipe()) if recipe is not None else found)  # a recipe at its defaults
        return 0

    folder = str(REPO_ROOT / "experiments")
    saved_main, saved_path, saved_env = entry.main, list(sys.path), dict(os.environ)
    entry.main = capture
    sys.path.insert(0, folder)  # experiments import their siblings
    os.environ["MARIN_PREFIX"] = PREFIX
    try:
        try:
            runpy.run_path(str(REPO_ROOT / "experiments" / f"{name}.py"), run_name="__main__")
        except SystemExit as e:
            assert e.code in (0, None), f"{name} exited with {e.code}"
    finally:
        entry.main, sys.path[:] = saved_main, saved_path
        os.environ.clear()
        os.environ.update(saved_env)
    return [
        {"step": f"{h.name}@{h.version}", "output": h.path(PREFIX), "fingerprint": h.fingerprint()}
        for h in graph_handles([getattr(t, "step", t) for t in targets])
    ]


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_plan_is_unchanged(name):
    expected = json.loads(FIXTURE.read_text())
    assert name in expected, f"experiments/{name}.py has no recorded plan; rewrite {FIXTURE.name}"
    assert plan_of(name) == expected[name]


def test_every_recorded_plan_has_its_experiment():
    assert sorted(json.loads(FIXTURE.read_text())) == EXPERIMENTS


if __name__ == "__main__":
    FIXTURE.write_text(json.dumps({name: plan_of(name) for name in EXPERIMENTS}, indent=1) + "\n")
    print(f"wrote {FIXTURE}")
