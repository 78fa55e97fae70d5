"""Every artifact's canonical name, hence its one path: `{MARIN_PREFIX}/{name}/{version}`.

The prefix defaults to the production bucket; `MARIN_PREFIX=/some/folder` remaps the same layout
to a local folder. Versions are pinned in the experiment files, so paths are pinned too. Inside an
artifact folder, file names are fixed here as well.
"""

from __future__ import annotations

import os

BUCKET = "gs://marin-us-east5"

# Artifact names (Marin step names).
CORPUS = "terminalworld/corpus/swe-zero-12m"  # the 12M-trajectory SWE-ZERO copy (adopted)
RECORDED_CORPUS = "terminalworld/corpus/recorded"  # the real-shell recording (local demo)
SUBSETS = "terminalworld/subsets/swe-zero"  # nested subsets: subset-{size}.jsonl.gz
PRETRAIN_TEXT = "terminalworld/tokenized/pretrain"  # the local demo's base-model corpus text


def heldout(n: int) -> str:
    return f"heldout/sim_ppl_heldout_{n}"


def heldout_file(n: int) -> str:
    return f"sim_ppl_heldout_{n}.jsonl"


def tokenized(arm: str, scale: str) -> str:
    return f"terminalworld/tokenized/{arm}-{scale}"


def checkpoint(arm: str, scale: str) -> str:
    """Levanter checkpoints under checkpoints/, HF exports under hf/step-N."""
    return f"checkpoints/terminalworld/{arm}-{scale}"


def scores(model: str) -> str:
    return f"sim-ppl-eval/sim_ppl_{model}"


def scores_file(model: str) -> str:
    return f"sim_ppl_{model}.jsonl"


REPORT = "terminalworld/reports/world-model-probe"


def prefix() -> str:
    return os.environ.get("MARIN_PREFIX", BUCKET)


def scale_name(size: int) -> str:
    """10000 -> 10K, 1000000 -> 1M."""
    for unit, div in (("M", 1_000_000), ("K", 1_000)):
        if size >= div and size % div == 0:
            return f"{size // div}{unit}"
    return str(size)
