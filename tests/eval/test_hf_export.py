"""The evaluation sets as Hugging Face datasets, from real SWE-ZERO held-out rows."""

import json

import datasets
import pytest

from terminalworld.core.formats import load_trajectories
from terminalworld.core.heldout import heldout_row
from terminalworld.core.records import dumps_row
from terminalworld.errors import InputError
from terminalworld.eval.hf_export import EvalSetsConfig, export_eval_sets


@pytest.fixture
def heldout_and_scores(fixtures, tmp_path):
    trajs = load_trajectories(str(fixtures / "adp_swe-zero-12m" / "sample_raw.json"))
    rows = [dict(heldout_row(t, 2), instance_id=f"{t.instance_id}-{i}") for i, t in enumerate(trajs)]
    (tmp_path / "heldout.jsonl").write_text("".join(dumps_row(r) for r in rows))
    scores = [
        {"instance_id": r["instance_id"], "nll": 1.5 + i, "target_tokens": 10 * (i + 1)} for i, r in enumerate(rows)
    ]
    summary = {"_summary": True, "model_name": "full", "token_weighted_ppl": 7.0}
    (tmp_path / "full.jsonl").write_text("".join(dumps_row(s) for s in [*scores, summary]))
    return tmp_path, rows, scores


def test_export_saves_the_heldout_set_and_each_checkpoints_scores(heldout_and_scores, tmp_path):
    folder, rows, _scores = heldout_and_scores
    out = tmp_path / "sets"
    written = export_eval_sets(
        EvalSetsConfig(heldout=str(folder / "heldout.jsonl"), scores={"full": str(folder / "full.jsonl")}, out=str(out))
    )
    assert written == {
        "heldout": {"rows": 3, "hub_repo": None, "pushed": False},
        "full": {"rows": 3, "hub_repo": None, "pushed": False},
    }
    held = datasets.load_from_disk(str(out / "heldout"))
    assert held.to_list() == rows  # prefix pairs, system and all, round-trip exactly
    full = datasets.load_from_disk(str(out / "full"))
    assert [r["score_nll"] for r in full] == [1.5, 2.5, 3.5]
    assert full[1]["target_env"] == rows[1]["target_env"] and full[1]["score_target_tokens"] == 20
    assert json.loads((out / "full" / "summary.json").read_text())["token_weighted_ppl"] == 7.0


def test_push_needs_a_token_and_every_repo_named(heldout_and_scores, tmp_path, monkeypatch):
    folder, *_ = heldout_and_scores
    args = {
        "heldout": str(folder / "heldout.jsonl"),
        "scores": {"full": str(folder / "full.jsonl")},
        "out": str(tmp_path / "o"),
    }
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(InputError, match=r"needs a Hub token in \$HF_TOKEN"):
        export_eval_sets(EvalSetsConfig(**args, hub_repos={"heldout": "o/h", "full": "o/f"}, push=True))
    monkeypatch.setenv("HF_TOKEN", "x")
    with pytest.raises(InputError, match="no Hub repo named for full"):
        export_eval_sets(EvalSetsConfig(**args, hub_repos={"heldout": "o/h"}, push=True))
    assert not (tmp_path / "o").exists()  # refused before writing anything


def test_a_missing_score_is_an_error(heldout_and_scores, tmp_path):
    folder, _rows, scores = heldout_and_scores
    (folder / "short.jsonl").write_text(dumps_row(scores[0]) + dumps_row({"_summary": True}))
    with pytest.raises(InputError, match="no score for 2 held-out rows"):
        export_eval_sets(
            EvalSetsConfig(
                heldout=str(folder / "heldout.jsonl"),
                scores={"short": str(folder / "short.jsonl")},
                out=str(tmp_path / "o"),
            )
        )


def test_corpora_read_through_fsspec_protocols(fixtures):
    """Readers take any fsspec URL: `hf://` resolves to huggingface_hub's file system, and a
    non-local protocol (memory://) reads like a local file."""
    import fsspec
    from huggingface_hub import HfFileSystem

    from terminalworld.core.formats import iter_trajectories

    assert fsspec.get_filesystem_class("hf") is HfFileSystem
    raw = json.loads((fixtures / "adp_swe-zero-12m" / "sample_raw.json").read_text())
    with fsspec.open("memory://corpus/part-0.jsonl", "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in raw))
    got = [item[1].instance_id for item in iter_trajectories("memory://corpus/*.jsonl")]
    assert got == [r["instance_id"] for r in raw]
