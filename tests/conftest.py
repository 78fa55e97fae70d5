from pathlib import Path

import pytest

from tests.paths import FIXTURES, REPO_ROOT


def pytest_collection_modifyitems(items):
    """The modules that hold a `slow_ci` run go first (each kept whole, in its own order): with
    xdist's work stealing (pyproject's addopts) the longest runs start at once and the short tests
    fill the other worker, instead of a long run starting late and finishing while a worker idles."""
    slow = {item.path for item in items if item.get_closest_marker("slow_ci")}
    items.sort(key=lambda item: item.path not in slow)


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


@pytest.fixture(scope="session", autouse=True)
def jax_compilation_cache(tmp_path_factory):
    """One JAX persistent compilation cache per test process: the Levanter runs of a session (the
    reduced pilot's thirteen among them) jit the same train step at the same shapes, and every
    compile after the first reads the executable back instead of compiling it again. Set both in
    this process and in the environment, so that the training subprocesses a test launches share it.
    Per xdist worker, as JAX writes entries without a lock."""
    import os
    import sys

    folder = str(tmp_path_factory.mktemp("jax-cache"))
    settings = {"jax_compilation_cache_dir": folder, "jax_persistent_cache_min_compile_time_secs": 0}
    env_before = {name.upper(): os.environ.get(name.upper()) for name in settings}
    for name, value in settings.items():
        os.environ[name.upper()] = str(value)  # JAX reads these when it is imported
    # Only a JAX imported already (collection does not import it) needs its config set; a test
    # process that never trains never pays for importing it here.
    jax = sys.modules.get("jax")
    before = {name: getattr(jax.config, name) for name in settings} if jax else {}
    for name, value in settings.items() if jax else ():
        jax.config.update(name, value)
    yield folder
    for name, value in before.items():
        jax.config.update(name, value)
    for name, value in env_before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


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
