from pathlib import Path

import pytest

from tests.paths import FIXTURES, REPO_ROOT


def load_experiment(name: str):
    """An experiment file of experiments/ as a module (its `__main__` block does not run)."""
    import importlib.util
    import sys

    folder = str(REPO_ROOT / "experiments")
    if folder not in sys.path:
        sys.path.insert(0, folder)  # experiments import their siblings (phase0_grid)
    spec = importlib.util.spec_from_file_location(f"experiments_{name}", REPO_ROOT / "experiments" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def workdir():
    """A folder every uid may traverse (a root host runs sandboxes as an unprivileged uid, which must
    reach the repository), removed afterwards."""
    import tempfile

    from terminalworld.core.scratch import remove_tree  # what a command left may be deeper than rmtree goes

    base = Path(tempfile.mkdtemp(prefix="tw-test-"))
    base.chmod(0o711)
    yield base
    remove_tree(str(base))


@pytest.fixture(scope="session")
def fixtures() -> Path:
    assert FIXTURES.is_dir(), f"real fixtures not found at {FIXTURES}"
    return FIXTURES


@pytest.fixture(scope="session")
def recorded_corpus(tmp_path_factory) -> Path:
    """A small real recording shared by the corpus tests: 24 trajectories, 24 repos."""
    from terminalworld.corpus.recorder import RecordConfig, record_corpus

    out = tmp_path_factory.mktemp("corpus")
    record_corpus(RecordConfig(out=str(out), trajectories=24, seed=3, shard_size=10))
    return out


@pytest.fixture(scope="session")
def task_ladder(tmp_path_factory) -> Path:
    """Three validated tasks from seed 0 (one per repository) at every level of the ladder: one
    suite per level under `<level>/`."""
    from terminalworld.tasks.make import MakeTasksConfig, make_tasks

    out = tmp_path_factory.mktemp("tasks")
    make_tasks(MakeTasksConfig(out=str(out), n=3, seed=0, workers=2, level="ladder"))
    return out


@pytest.fixture(scope="session")
def generated_tasks(task_ladder) -> Path:
    """The ladder's `function` suite (the default level), shared by the task and agent tests."""
    return task_ladder / "function"
