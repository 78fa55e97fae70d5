"""The repository's own paths that tests and benchmarks read: one home for the fixture location.

Nothing here points outside the repository, so a clone with nothing beside it runs every test
(`tests/test_paths.py` holds every test module to that).
"""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "real"  # real trajectories, byte-identical; README.md names their sources
SWE_ZERO = FIXTURES / "adp_swe-zero-12m" / "sample_raw.json"
RECORDER_SESSIONS = REPO_ROOT / "tests" / "fixtures" / "recorder" / "sessions.jsonl.gz"  # this project's recorder
