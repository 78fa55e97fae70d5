"""Pinned agent benchmarks: a Hugging Face dataset of Harbor task folders at an exact revision with
its exact list of instance ids, or a Harbor registry dataset at an exact version. The pins
themselves live in the experiment files."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from terminalworld.errors import StepFailed


@dataclass(frozen=True, kw_only=True)
class Benchmark:
    """Where a benchmark's tasks come from, pinned."""

    name: str
    hf_dataset: str | None = None
    revision: str | None = None
    instance_ids: tuple[str, ...] = ()
    registry: str | None = None  # Harbor's registry: "NAME@VERSION"

    def describe(self) -> str:
        """One line for the plan."""
        if self.registry:
            return f"{self.name}: Harbor registry {self.registry}"
        ids = hashlib.sha256("\n".join(self.instance_ids).encode()).hexdigest()[:12]
        return (
            f"{self.name}: hf://datasets/{self.hf_dataset}@{self.revision}, {len(self.instance_ids)} ids (sha256 {ids})"
        )

    def __str__(self) -> str:  # the plan shows this line, not a hundred ids
        return self.describe()

    def tasks(self, dest: str) -> str:
        """The `--tasks` argument of agent-eval: the registry dataset, or the HF snapshot downloaded
        into `dest` and checked to hold exactly the pinned instance ids."""
        if self.registry:
            return f"registry:{self.registry}"
        from huggingface_hub import snapshot_download

        snapshot_download(repo_id=self.hf_dataset, repo_type="dataset", revision=self.revision, local_dir=dest)
        found = {p for p in os.listdir(dest) if os.path.isdir(os.path.join(dest, p)) and not p.startswith(".")}
        if self.instance_ids and found != set(self.instance_ids):
            missing, extra = sorted(set(self.instance_ids) - found), sorted(found - set(self.instance_ids))
            raise StepFailed(
                f"{self.hf_dataset}@{self.revision} is not the pinned slice: missing {missing[:5]}, extra {extra[:5]}"
            )
        return dest
