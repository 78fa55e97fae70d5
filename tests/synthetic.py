"""A generated corpus at any size from a few real trajectories, for the sampler's tests and benchmarks
(`benchmarks/sampling.py` imports it from here).

Each row is a real SWE-ZERO-format row with a new instance id and a repo drawn from a 1/k law over
`repos` repos (a few huge repos, a long tail of rare ones, as in real corpora; the rare ones are
where unseen-repo held-out trajectories come from). Optional defects put every kind of bad record
the readers count into known places: invalid JSON, undecodable bytes, a record that is not a
trajectory, a trajectory without a repo, and blank lines (which are not records).
"""

from __future__ import annotations

import gzip
import json
import math
import os
import random
from typing import Any

DEFECTS = (
    b'{"instance_id": "broken", "messages": [\n',  # invalid JSON
    b"\xff\xfe not utf-8\n",  # undecodable bytes
    b'{"hello": "world"}\n',  # JSON, not a trajectory
    None,  # a trajectory without a repo (filled in from a real row)
    b"\n",  # a blank line: not a record
)


def write_generated_corpus(
    *,
    rows: list[dict[str, Any]],
    folder: str,
    n: int,
    shards: int,
    repos: int = 20_000,
    seed: int = 0,
    defect_every: int = 0,
    compresslevel: int = 1,
) -> list[str]:
    """Write n rows (plus a defect after every `defect_every`-th row, cycling through `DEFECTS`)
    as `corpus-{shard:03d}.jsonl.gz`; returns the files."""
    rng = random.Random(seed)
    per = -(-n // shards)
    files, defects = [], 0
    for s in range(shards):
        path = os.path.join(folder, f"corpus-{s:03d}.jsonl.gz")
        with gzip.open(path, "wb", compresslevel=compresslevel) as f:
            for i in range(s * per, min(n, (s + 1) * per)):
                k = int(math.exp(rng.uniform(0, math.log(repos))))
                row = dict(rows[rng.randrange(len(rows))], instance_id=f"gen-{i}", repo=f"org{k}/repo{k}")
                f.write(json.dumps(row).encode() + b"\n")
                if defect_every and (i + 1) % defect_every == 0:
                    defect = DEFECTS[defects % len(DEFECTS)]
                    if defect is None:
                        defect = json.dumps({**row, "instance_id": f"norepo-{i}", "repo": None}).encode() + b"\n"
                    f.write(defect)
                    defects += 1
        files.append(path)
    return files
