import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("TERMINALWORLD_FIXTURES", REPO_ROOT.parent / "shared" / "fixtures" / "real"))
SWE_ZERO = FIXTURES / "adp_swe-zero-12m" / "sample_raw.json"


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
