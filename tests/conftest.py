import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("TERMINALWORLD_FIXTURES", REPO_ROOT.parent / "shared" / "fixtures" / "real"))
SWE_ZERO = FIXTURES / "adp_swe-zero-12m" / "sample_raw.json"


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
