"""The sharded render + tokenize + pack job against the single process, on real SWE-ZERO rows
with the Qwen3 tokenizer: the same rows byte for byte, failing examples counted and named, and a
killed job resuming by shard."""

import gzip
import json
import os

import pytest

from terminalworld.core.records import dumps_row, iter_part, iter_records
from terminalworld.pipeline.zephyr import Workers
from terminalworld.train.render_rows import RenderConfig, render_file, split_row
from terminalworld.train.tokenize_job import ShardedTokenize, TokenizeJob, range_parts, tokenize_sharded


@pytest.fixture(scope="module")
def inputs(fixtures, tmp_path_factory):
    """Two files of real SWE-ZERO rows (each fixture row four times, relabelled), with a blank
    line, a malformed line and a row whose template cannot render it exactly."""
    raw = json.loads((fixtures / "adp_swe-zero-12m" / "sample_raw.json").read_text())
    folder = tmp_path_factory.mktemp("tok-inputs")
    rows = [dict(r, instance_id=f"{r['instance_id']}-{i}") for i in range(4) for r in raw]
    bad = dict(raw[0], instance_id="think-0")
    bad["messages"] = [dict(m) for m in raw[0]["messages"]]
    first_assistant = next(m for m in bad["messages"] if m["role"] == "assistant")
    first_assistant["content"] = "<think>hidden</think>" + first_assistant["content"]
    with gzip.open(folder / "a.jsonl.gz", "wt") as f:
        for r in rows[:5]:
            f.write(json.dumps(r) + "\n")
        f.write("\n{not json\n")
        f.write(json.dumps(bad) + "\n")
    with gzip.open(folder / "b.jsonl.gz", "wt") as f:
        for r in rows[5:]:
            f.write(json.dumps(r) + "\n")
    return str(folder / "*.jsonl.gz"), len(rows)


def _lines(paths):
    out = []
    for p in paths:
        with gzip.open(p, "rb") as f:
            out += f.read().splitlines()
    return out


def test_range_parts_cut_records_not_lines(inputs):
    from terminalworld.core.records import expand_all

    files = expand_all(inputs[0])
    shards = range_parts(files, skip=2, shard_rows=3)
    # 14 records: a.jsonl.gz holds rows on lines 1-5, a blank line 6 (no record), the malformed
    # line 7 and the unrenderable row on line 8; b.jsonl.gz holds 7 rows. Shards start at records
    # 2, 5, 8 and 11, and the second spans both files.
    assert [[(os.path.basename(p.path), p.first, p.stop) for p in s] for s in shards] == [
        [("a.jsonl.gz", 3, 7)],
        [("a.jsonl.gz", 7, None), ("b.jsonl.gz", 1, 2)],
        [("b.jsonl.gz", 2, 5)],
        [("b.jsonl.gz", 5, None)],
    ]
    held = [[r.line for part in s for r in iter_part(part)] for s in shards]
    assert held == [[3, 4, 5], [7, 8, 1], [2, 3, 4], [5, 6, 7]]


@pytest.mark.parametrize("shard_rows", [4, 100])
def test_sharded_rows_are_the_single_process_rows(inputs, tmp_path, shard_rows):
    pattern, n = inputs
    single = render_file(
        RenderConfig(tokenizer="qwen3", inputs=[pattern], out=str(tmp_path / "single.jsonl.gz"), arm="assistant")
    )
    job = TokenizeJob(
        inputs=[pattern],
        out=str(tmp_path / "job"),
        arm="assistant",
        tokenizer="qwen3",
        max_len=4000,
        seq_len=8192,
        shard_rows=shard_rows,
    )
    stats = tokenize_sharded(ShardedTokenize(job, Workers(count=1)))
    shards = sorted((tmp_path / "job" / "rows").glob("rows-*.jsonl.gz"))
    assert len(shards) == -(-(n + 2) // shard_rows)
    # The job's rows are the single pass's, each longer than the window split by the one rule.
    whole = [json.loads(line) for line in _lines([tmp_path / "single.jsonl.gz"])]
    want = [dumps_row(piece).rstrip("\n").encode() for row in whole for piece in split_row(row, 4000)]
    assert _lines(shards) == want
    # Both passes count and name the same two failures and never stop.
    assert stats["examples"] == single["examples"] == n
    assert stats["failed"] == single["failed"] == {"malformed record": 1, "template rewrites a message": 1}
    assert [(f["line"], f["instance_id"]) for f in stats["failures"]] == [(7, None), (8, "think-0")]
    assert stats["pack"]["documents"] + stats["pack"]["untrained"] == len(want)
    assert stats["tokens"] == single["tokens"]
    packed = [r.value for r in iter_records(str(tmp_path / "job" / "packed" / "*.jsonl.gz"))]
    assert all(len(p["input_ids"]) == 8192 for p in packed)


def test_a_killed_job_resumes_by_shard(inputs, tmp_path):
    pattern, _ = inputs
    job = TokenizeJob(
        inputs=[pattern], out=str(tmp_path), arm="pretrain", tokenizer="qwen3", max_len=4000, seq_len=8192, shard_rows=5
    )
    tokenize_sharded(ShardedTokenize(job, Workers(count=1)))
    files = sorted(p for p in tmp_path.rglob("*-0000*") if p.is_file())
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in files}
    # The kill: shard 1 lost its counts (it had not finished), shard 2 everything.
    (tmp_path / "rows" / "rows-00001.json").unlink()
    for p in tmp_path.rglob("*-00002*"):
        p.unlink()
    tokenize_sharded(ShardedTokenize(job, Workers(count=1)))
    after = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in files}
    assert {p: b for p, (_, b) in after.items()} == {p: b for p, (_, b) in before.items()}
    redone = {p.name for p in files if after[p][0] != before[p][0]}
    assert redone == {"rows-00001.jsonl.gz", "packed-00001.jsonl.gz", "rows-00001.json"} | {
        "rows-00002.jsonl.gz",
        "packed-00002.jsonl.gz",
        "rows-00002.json",
    }
    packed = [r.value for r in iter_records(str(tmp_path / "packed" / "*.jsonl.gz"))]
    assert all(set(p["loss_weights"]) <= {0.0, 1.0} for p in packed)


def test_split_row_keeps_every_token_in_order():
    from terminalworld.train.render_rows import RenderStats, split_row

    row = {"instance_id": "t", "input_ids": list(range(10)), "loss_weights": [0, 0, 1, 1, 1, 0, 1, 1, 0, 1]}
    stats = RenderStats()
    pieces = split_row(row, 4, stats)
    assert [p["input_ids"] for p in pieces] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert [p["loss_weights"] for p in pieces] == [[0, 0, 1, 1], [1, 0, 1, 1], [0, 1]]
    assert [p["instance_id"] for p in pieces] == ["t#0", "t#1", "t#2"]
    assert (stats.split_examples, stats.split_pieces) == (1, 3)
    assert split_row(row, 10, stats) == [row] and stats.split_examples == 1


def test_rows_longer_than_the_window_are_split_not_cut(inputs, tmp_path):
    """At a 600-token window every longer trajectory is split: the rows files hold every rendered
    token (the uncut render's count) and nothing is truncated."""
    pattern, n = inputs
    whole = render_file(
        RenderConfig(tokenizer="qwen3", inputs=[pattern], out=str(tmp_path / "whole.jsonl.gz"), arm="assistant")
    )
    job = TokenizeJob(
        inputs=[pattern], out=str(tmp_path / "job"), arm="assistant", tokenizer="qwen3", max_len=600, seq_len=1024
    )
    stats = tokenize_sharded(ShardedTokenize(job, Workers(count=1)))
    rows = [r.value for r in iter_records(str(tmp_path / "job" / "rows" / "*.jsonl.gz"))]
    assert stats["truncated_tokens"] == 0 and stats["split_examples"] > 0
    assert all(len(r["input_ids"]) <= 600 for r in rows)
    assert sum(len(r["input_ids"]) for r in rows) == whole["tokens"] == stats["tokens"]
    assert len(rows) == n - stats["split_examples"] + stats["split_pieces"]
