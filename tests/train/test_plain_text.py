"""The control's unrelated text: the training repos' own files as plain documents, every token
trained, packed to the run's length; never a repo the trajectories did not come from."""

import gzip
import json

import pytest

from terminalworld.core.assets import SMOLLM2, load_tokenizer
from terminalworld.errors import InputError
from terminalworld.train.plain_text import PlainTextJob, write_plain_text

MESSAGES = [
    {"role": "system", "content": "s"},
    {"role": "user", "content": "task"},
    {"role": "assistant", "content": "ls"},
    {"role": "user", "content": "a.py"},
]


def _subset(tmp_path, repos):
    path = tmp_path / "subset.jsonl"
    rows = [{"instance_id": f"i{k}", "repo": r, "messages": MESSAGES} for k, r in enumerate(repos)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_the_training_repos_files_fill_the_sequences_every_token_trained(tmp_path):
    job = PlainTextJob(
        trajectories=[_subset(tmp_path, ["pypi/attrs", "pypi/attrs", "elsewhere/not-a-tree"])],
        out=str(tmp_path / "out"),
        tokenizer=SMOLLM2,
        seq_len=1024,
        sequences=3,
    )
    stats = write_plain_text(job)
    assert stats["repos"] == ["elsewhere/not-a-tree", "pypi/attrs"] and stats["pack"]["sequences"] == 3
    assert stats["documents"] and all(d.startswith("pypi/attrs/") for d in stats["documents"])
    rows = [
        json.loads(x)
        for x in gzip.decompress((tmp_path / "out/packed/packed-00000.jsonl.gz").read_bytes()).splitlines()
    ]
    assert len(rows) == 3 and all(len(r["input_ids"]) == len(r["loss_weights"]) == 1024 for r in rows)
    text = load_tokenizer(SMOLLM2).decode(rows[0]["input_ids"])
    assert text.startswith("# pypi/attrs/") and "import" in text
    assert sum(rows[0]["loss_weights"]) > 256  # plain text: every document token trained (padding aside)
    assert json.loads((tmp_path / "out/stats.json").read_text())["render_tokenizer"] == SMOLLM2


def test_too_little_text_or_no_trajectory_is_an_error(tmp_path):
    few = PlainTextJob(
        trajectories=[_subset(tmp_path, ["elsewhere/not-a-tree"])],
        out=str(tmp_path / "a"),
        tokenizer=SMOLLM2,
        seq_len=1024,
        sequences=1,
    )
    with pytest.raises(InputError, match="fills 0 sequences, not 1"):
        write_plain_text(few)
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(InputError, match="no trajectory"):
        write_plain_text(PlainTextJob(**{**few.__dict__, "trajectories": [str(tmp_path / "empty.jsonl")]}))
