"""The local miniature pipeline: each stage writes one artifact under the prefix and is skipped
when its artifact already exists, so a second run reuses finished work."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from terminalworld.recorder import RecordConfig, record_corpus
from terminalworld.sampling import HeldoutConfig, SubsetsConfig, make_subsets, sample_heldout, subset_path


@dataclass(frozen=True)
class DemoConfig:
    prefix: str
    trajectories: int = 160
    record_seed: int = 0
    subset_sizes: str = "20,60"
    heldout_n: int = 24
    context_turns: int = 14
    seed: int = 42

    @property
    def corpus_dir(self) -> str:
        return os.path.join(self.prefix, "corpus", "recorded")

    @property
    def subsets_dir(self) -> str:
        return os.path.join(self.prefix, "corpus", "subsets")

    @property
    def heldout_path(self) -> str:
        return os.path.join(self.prefix, "heldout", f"sim_ppl_heldout_{self.heldout_n}.jsonl")

    @property
    def largest_subset(self) -> str:
        return subset_path(self.subsets_dir, max(int(s) for s in self.subset_sizes.split(",")))


def describe_demo(cfg: DemoConfig) -> str:
    return "\n".join([
        f"record   {cfg.trajectories} trajectories (seed {cfg.record_seed}) -> {cfg.corpus_dir}",
        f"subsets  sizes {cfg.subset_sizes} (seed {cfg.seed}) -> {cfg.subsets_dir}",
        f"heldout  n={cfg.heldout_n}, {cfg.context_turns} context turns, unseen in {cfg.largest_subset} -> {cfg.heldout_path}",
    ])  # fmt: skip


def run_demo(cfg: DemoConfig) -> dict[str, Any]:
    corpus_manifest = os.path.join(cfg.corpus_dir, "manifest.json")
    if not os.path.exists(corpus_manifest):
        record_corpus(RecordConfig(out=cfg.corpus_dir, trajectories=cfg.trajectories, seed=cfg.record_seed))
    corpus = os.path.join(cfg.corpus_dir, "*.jsonl.gz")
    if not os.path.exists(os.path.join(cfg.subsets_dir, "manifest.json")):
        make_subsets(SubsetsConfig(corpus=corpus, out=cfg.subsets_dir, sizes=cfg.subset_sizes, seed=cfg.seed))
    if not os.path.exists(cfg.heldout_path + ".manifest.json"):
        sample_heldout(HeldoutConfig(corpus=[corpus], train=[cfg.largest_subset], out=cfg.heldout_path,
                                     n=cfg.heldout_n, context_turns=cfg.context_turns, seed=cfg.seed))  # fmt: skip
    return {"corpus": cfg.corpus_dir, "subsets": cfg.subsets_dir, "heldout": cfg.heldout_path}
