"""Every artifact's canonical name, hence its one path `{MARIN_PREFIX}/{name}/{version}`, and the
names of the files inside artifact folders.

Marin resolves the prefix (`MARIN_PREFIX`); the production experiment files pin it to `BUCKET`,
the local demo to `./local-prefix`. Versions are pinned in the experiment files, so paths are
pinned too. This module imports nothing, so every stage may name its files from here.
"""

from __future__ import annotations

BUCKET = "gs://marin-us-east5"

# Artifact names (Marin step names).
CORPUS = "terminalworld/corpus/swe-zero-12m"  # the 12M-trajectory SWE-ZERO copy (adopted)
RECORDED_CORPUS = "terminalworld/corpus/recorded"  # the real-shell recording (local demo)
SUBSETS = "terminalworld/subsets/swe-zero"  # nested subsets: subset-{size}.jsonl.gz
REPORT = "terminalworld/reports/world-model-probe"
ECHO_REPORT = "terminalworld/reports/echo-miniature"  # ECHO's three arms side by side
PILOT_REPORT = "terminalworld/reports/pilot"  # the pilot: SmolLM2-135M, three arms x three scales
EVAL_SETS = "terminalworld/hf-eval-sets"  # the held-out set and every checkpoint's scores as HF datasets
SNAPSHOTS = "terminalworld/snapshots/swe-zero"  # pinned repositories per SWE-ZERO instance (grounding)
PROBES = "terminalworld/probes"  # tier-2 probe set: real session prefixes, true outputs from the sandbox
# The docs site: its dependencies are the reports it shows, so its provenance names them.
DOCS_SITE = "terminalworld/docs-site"

# Files inside artifact folders.
CORPUS_FILES = "*.jsonl*"  # a corpus folder's trajectory shards
TOKENIZED_ROWS_DIR = "rows"  # rendered rows in input order (rows-00000.jsonl.gz, ...) and each shard's counts
PACKED_ROWS = "packed"  # folder of packed Levanter rows (packed-00000.jsonl.gz, ...), one file per shard
TRAINING_TOKENIZER = "training-tokenizer"  # the tokenizer whose eos is the document separator
STATS = "stats.json"
AGENT_SUMMARY = "summary.json"  # an agent grade's pass@1, pass@k and counts
ECHO_ARM = "arm.json"  # one ECHO arm's steps and held-out cross-entropies
HF_EXPORT = "hf"  # a checkpoint artifact's final HF export (tokenizer and chat template included)
PROBES_FILE = "probes.jsonl"  # a probe set's rows (the held-out schema plus `family`)
SIM_ROWS = "sim_eval.jsonl"  # a simulator grade's rows, its summary last
SHADOW_LOG = "shadow.jsonl"  # a simulated Harbor trial's commands, simulated and real outputs (its agent folder)


def heldout(n: int) -> str:
    """The world-model probe's held-out set of n rows. (Snapshots committed before 2026-12-06 name
    it `heldout/sim_ppl_heldout_{n}`, and scores `sim-ppl-eval/sim_ppl_{model}`: they record what ran.)"""
    return f"heldout/probe_heldout_{n}"


def heldout_file(n: int) -> str:
    """The rows file inside the held-out artifact of n rows."""
    return f"probe_heldout_{n}.jsonl"


def subset_file(size: int) -> str:
    """The file of one nested subset inside the subsets artifact."""
    return f"subset-{size}.jsonl.gz"


def tokenized(arm: str, scale: str) -> str:
    """Rendered and packed rows of one loss-mask arm at one scale."""
    return f"terminalworld/tokenized/{arm}-{scale}"


def checkpoint(arm: str, scale: str) -> str:
    """Levanter checkpoints under checkpoints/, the final HF export under hf/."""
    return f"checkpoints/terminalworld/{arm}-{scale}"


def scores(model: str) -> str:
    """The world-model probe's scores of one model."""
    return f"probe-eval/probe_{model}"


def scores_file(model: str) -> str:
    """The scores file inside a scores artifact."""
    return f"probe_{model}.jsonl"


def tasks(purpose: str) -> str:
    """Generated SWE-style tasks in Harbor's format: "train" ones are solved into the corpus,
    "heldout" ones (from repos unseen in training) grade the agents."""
    return f"terminalworld/tasks/{purpose}"


def agent_grade(benchmark: str, model: str) -> str:
    """One model's agent grade on one benchmark (Harbor's job, trial rows and summaries)."""
    return f"agent-eval/{benchmark}/{model}"


def sim_grade(tier: int, model: str) -> str:
    """One checkpoint's simulator grade at one tier (1 held-out rows, 2 probes, 3 closed loop)."""
    return f"sim-eval/tier{tier}/{model}"


def echo_arm(arm: str) -> str:
    """One arm of ECHO's on-policy miniature (grpo, echo or env-only)."""
    return f"terminalworld/echo/{arm}"


def echo_rl(name: str) -> str:
    """An RL run with ECHO's objective (SkyRL checkpoints, exports and the resolved config)."""
    return f"checkpoints/terminalworld/rl/{name}"


def scale_name(size: int) -> str:
    """10000 -> 10K, 1000000 -> 1M."""
    for unit, div in (("M", 1_000_000), ("K", 1_000)):
        if size >= div and size % div == 0:
            return f"{size // div}{unit}"
    return str(size)
