"""Rows files that survive interruption: resumed by id, refused when they are another run's."""

import json

import pytest

from terminalworld.core.resumable import resumable_rows
from terminalworld.errors import InputError


def _run(out, ids, made):
    def produce(done):
        for i in ids:
            if i not in done:
                made.append(i)
                yield {"instance_id": i, "value": len(i)}

    return resumable_rows(out, ids, produce, lambda rows: {"_summary": True, "n": len(rows)}, source="in.jsonl")


def test_a_rerun_makes_only_the_rows_not_yet_done(tmp_path):
    out = str(tmp_path / "rows.jsonl")
    with open(out + ".partial", "w") as f:  # a killed run: one finished row, one cut append
        f.write(json.dumps({"instance_id": "b", "value": 1}) + '\n{"instance_id": "c", "va')
    made = []
    assert _run(out, ["a", "b", "c"], made) == {"_summary": True, "n": 3}
    assert made == ["a", "c"]
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert [r.get("instance_id") for r in rows] == ["a", "b", "c", None] and rows[1]["value"] == 1
    again = []
    _run(out, ["a", "b", "c"], again)
    assert again == []


def test_repeated_ids_and_another_runs_rows_are_refused_before_anything_is_made(tmp_path):
    out = str(tmp_path / "rows.jsonl")
    made = []
    with pytest.raises(InputError, match=r"in\.jsonl: instance ids are not unique"):
        _run(out, ["a", "b", "a"], made)
    (tmp_path / "rows.jsonl").write_text(json.dumps({"instance_id": "zz"}) + "\n")
    with pytest.raises(InputError, match="not among the inputs"):
        _run(out, ["a"], made)
    (tmp_path / "rows.jsonl").write_text("a report, not rows\n")
    with pytest.raises(InputError, match=r"rows\.jsonl:1: not a row"):
        _run(out, ["a"], made)
    assert made == [] and (tmp_path / "rows.jsonl").read_text() == "a report, not rows\n"
