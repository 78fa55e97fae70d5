"""The held-out set and each checkpoint's scores as Hugging Face datasets.

The research published its evaluation sets on the Hub as
`SWE-ZERO-{10K,100K,1M}-Qwen3-1.7B-Base{,-ECHO}-eval`. Here one dataset holds the held-out rows
(`heldout/`), and one per checkpoint holds every held-out row with that checkpoint's scores beside
it (`{name}/`), its summary row in `{name}/summary.json`. Each is written with
`Dataset.save_to_disk`; with `push`, each also goes to its Hub repo with the token read from the
environment variable the plan names (never from the config, so it never enters provenance).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from terminalworld.errors import InputError

if TYPE_CHECKING:
    from terminalworld.eval.metrics import Results

HELDOUT_DATASET = "heldout"


def eval_rows(heldout: list[dict[str, Any]], scores: Results, name: str) -> list[dict[str, Any]]:
    """Each held-out row with the checkpoint's scores of it (`score_*` fields); a row the scorer
    skipped keeps its reason in `score_skipped`."""
    by_id = scores.rows | scores.skipped
    missing = [r["instance_id"] for r in heldout if r["instance_id"] not in by_id]
    if missing:
        raise InputError(f"{name}: no score for {len(missing)} held-out rows, e.g. {missing[0]}")
    out = []
    for r in heldout:
        s = by_id[r["instance_id"]]
        out.append({**r, **{f"score_{k}": v for k, v in s.items() if k != "instance_id"}})
    return out


@dataclass(frozen=True)
class EvalSetsConfig:
    """The held-out rows, each checkpoint's scores file by name, the output folder, and whether to
    push to the Hub (each dataset to its repo in `hub_repos`, with the token in `$token_env`)."""

    heldout: str
    scores: dict[str, str]
    out: str
    hub_repos: dict[str, str] | None = None
    push: bool = False
    token_env: str = "HF_TOKEN"


def export_eval_sets(cfg: EvalSetsConfig) -> dict[str, Any]:
    """Save the held-out dataset and one dataset per checkpoint under `cfg.out`; with `push`, push
    each to `hub_repos[name]` (the held-out set under `hub_repos["heldout"]`). Returns what was
    written: names, rows and Hub repos."""
    heldout, scores, out, hub_repos, push, token_env = (
        cfg.heldout,
        cfg.scores,
        cfg.out,
        cfg.hub_repos,
        cfg.push,
        cfg.token_env,
    )
    import datasets

    from terminalworld.core.heldout import read_heldout
    from terminalworld.core.records import write_json
    from terminalworld.eval.metrics import read_results

    token = None
    if push:
        token = os.environ.get(token_env)
        if not token:
            raise InputError(f"pushing the evaluation sets needs a Hub token in ${token_env}")
        absent = [n for n in (HELDOUT_DATASET, *scores) if n not in (hub_repos or {})]
        if absent:
            raise InputError(f"no Hub repo named for {', '.join(absent)}")
    rows = read_heldout(heldout)
    sets = {HELDOUT_DATASET: (rows, None)}
    for name, path in scores.items():
        results = read_results(path)
        sets[name] = (eval_rows(rows, results, name), results.summary)
    written = {}
    for name, (data, summary) in sets.items():
        ds = datasets.Dataset.from_list(data)
        folder = os.path.join(out, name)
        ds.save_to_disk(folder)
        if summary is not None:
            write_json(os.path.join(folder, "summary.json"), summary)
        if push:
            ds.push_to_hub(hub_repos[name], token=token)
        written[name] = {"rows": len(data), "hub_repo": (hub_repos or {}).get(name), "pushed": push}
    write_json(os.path.join(out, "datasets.json"), written)
    return written
