"""Sampling rules the main sampling tests leave open: the exact key, ties between equal keys, the
bad-line cap, argument checks, every manifest count, and the progress labels."""

import gzip
import hashlib
import json
import re

import pytest

from terminalworld.core.formats import load_trajectories
from terminalworld.core.heldout import read_heldout
from terminalworld.core.records import MAX_BAD_LINES, BadLine, Tally
from terminalworld.core.targets import class_counts
from terminalworld.corpus.sampling import (
    HeldoutConfig,
    SubsetsConfig,
    make_subsets,
    sample_heldout,
    sample_key,
)
from terminalworld.errors import InputError


@pytest.fixture(scope="module")
def base_rows(recorded_corpus):
    return [t.to_swe_zero_row() for t in load_trajectories(str(recorded_corpus / "*.jsonl.gz"))]


def write_jsonl(path, rows, extra_lines=()):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "".join(x + "\n" for x in extra_lines))
    return str(path)


def test_sample_key_is_the_big_endian_8_byte_blake2b_of_seed_id_and_file_name():
    """The key hashes "seed NUL id NUL basename:line" to 8 bytes, read big-endian; folders do not count."""
    digest = hashlib.blake2b(b"42\x00org/r-1\x00shard.jsonl.gz:3", digest_size=8).digest()
    assert sample_key(42, "org/r-1", "/a/b/shard.jsonl.gz", 3) == int.from_bytes(digest, "big")
    assert sample_key(42, "org/r-1", "/c/shard.jsonl.gz", 3) == sample_key(42, "org/r-1", "shard.jsonl.gz", 3)
    assert sample_key(42, "org/r-1", "/a/b/shard.jsonl.gz", 3) < 2**64


def test_tally_keeps_only_the_first_max_bad_lines():
    """Every bad line is counted; only the first MAX_BAD_LINES are kept, with file, line and reason."""
    tally = Tally()
    for n in range(MAX_BAD_LINES + 1):
        tally.bad(BadLine("f.jsonl", n + 1, "bad"))
    assert tally.counts["malformed"] == MAX_BAD_LINES + 1
    assert len(tally.bad_lines) == MAX_BAD_LINES
    assert tally.bad_lines[-1] == {"file": "f.jsonl", "line": MAX_BAD_LINES, "reason": "bad"}


@pytest.mark.parametrize("sizes", ["", ",", "0,5", "-1"])
def test_subset_sizes_must_be_positive(sizes, tmp_path):
    """Empty, zero or negative sizes are refused before reading the corpus."""
    with pytest.raises(InputError, match=rf"^--sizes must be positive integers, got '{sizes}'$"):
        make_subsets(SubsetsConfig(corpus=str(tmp_path / "none*.jsonl"), out=str(tmp_path), sizes=sizes))


def test_subsets_manifest_and_message(base_rows, tmp_path, capsys):
    """The manifest lists corpus, seed, sorted sizes, scanned and malformed counts, the bad lines and
    the subset files, and is written beside them; the progress bar is labelled; too small a corpus
    is an error giving both numbers."""
    corpus = write_jsonl(tmp_path / "c.jsonl", base_rows[:3], ["{broken"])
    m = make_subsets(SubsetsConfig(corpus=[corpus], out=str(tmp_path / "o"), sizes="2,1", seed=5))
    assert m == {
        "corpus": [corpus],
        "seed": 5,
        "sizes": [1, 2],
        "scanned": 4,
        "malformed": 1,
        "duplicates": 0,
        "instance_ids": {"1": 1, "2": 2},
        "bad_lines": [{"file": corpus, "line": 4, "reason": m["bad_lines"][0]["reason"]}],
        "subsets": {"1": "subset-1.jsonl.gz", "2": "subset-2.jsonl.gz"},
    }
    assert m["bad_lines"][0]["reason"].startswith("invalid JSON")
    assert json.loads((tmp_path / "o" / "manifest.json").read_text()) == m
    err = capsys.readouterr().err
    assert "subsets:" in err and re.search(r"[\d?]traj/s", err)
    with pytest.raises(InputError, match=r"^the corpus has 3 valid trajectories, fewer than the largest subset \(4\)$"):
        make_subsets(SubsetsConfig(corpus=[corpus], out=str(tmp_path / "p"), sizes="4"))


def test_equal_keys_keep_the_first_row_seen(base_rows, tmp_path):
    """Two files with the same name in two folders, with the same instance id on the same line, have
    equal keys: the subset keeps the row read first."""
    first = write_jsonl(tmp_path / "a" / "c.jsonl", [dict(base_rows[0], instance_id="dup", repo="org/first")])
    second = write_jsonl(tmp_path / "b" / "c.jsonl", [dict(base_rows[1], instance_id="dup", repo="org/second")])
    make_subsets(SubsetsConfig(corpus=[first, second], out=str(tmp_path / "o"), sizes="1"))
    (line,) = gzip.decompress((tmp_path / "o" / "subset-1.jsonl.gz").read_bytes()).decode().splitlines()
    assert json.loads(line)["repo"] == "org/first"


def _oracle_subsets(paths, seed, k):
    """The duplicate rule by brute force: rank every record, keep each content's best-ranked
    occurrence, take k; count the skipped copies ranked up to the last one taken."""
    records = [(r, t) for p in paths for r, t in (x for x in _valid(p))]
    ranked = sorted(
        (
            (sample_key(seed, t.instance_id, r.file, r.line), i, r.line_bytes(), t.instance_id)
            for i, (r, t) in enumerate(records)
        )
    )
    taken, seen, skipped = [], set(), []
    for key, i, line, iid in ranked:
        if line in seen:
            skipped.append((key, i))
        else:
            seen.add(line)
            taken.append((key, i, line, iid))
    taken = taken[:k]
    return taken, sum(s <= taken[-1][:2] for s in skipped)


def _valid(path):
    from terminalworld.core.formats import iter_trajectories

    return [x for x in iter_trajectories(path) if not isinstance(x, BadLine)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_byte_identical_records_are_sampled_once_and_counted(base_rows, tmp_path, seed):
    """The duplicate rule: a copied line (or a copied shard) is one trajectory, sampled at its
    best-ranked occurrence, and the manifest counts the copies skipped up to the last row sampled;
    rollouts that share an instance id but differ are kept, and `instance_ids` counts distinct ids.
    The single process and the Zephyr job agree with a brute-force ranking, byte for byte."""
    from terminalworld.corpus.sharded import SubsetsJob, make_subsets_sharded
    from terminalworld.pipeline.zephyr import Workers

    rows = [{**r, "instance_id": f"task-{i % 5}", "repo": f"org/r{i}"} for i, r in enumerate(base_rows * 3)]
    a = write_jsonl(tmp_path / "a.jsonl", rows + rows[:20])  # 20 lines copied within the file
    b = write_jsonl(tmp_path / "b.jsonl", rows[10:40])  # 30 lines copied into another file
    k = 40
    taken, duplicates = _oracle_subsets([a, b], seed, k)
    assert duplicates > 0  # the seeds reach copies
    outs = {}
    for name, run in (
        ("single", make_subsets),
        ("sharded", lambda c: make_subsets_sharded(SubsetsJob(c, Workers(shards=3)))),
    ):
        cfg = SubsetsConfig(corpus=[a, b], out=str(tmp_path / name), sizes=f"10,{k}", seed=seed)
        m = run(cfg)
        lines = gzip.decompress((tmp_path / name / f"subset-{k}.jsonl.gz").read_bytes()).splitlines(keepends=True)
        assert lines == [line for _, _, line, _ in taken]
        assert len(set(lines)) == k
        assert m["duplicates"] == duplicates
        assert m["instance_ids"] == {"10": len({t[3] for t in taken[:10]}), str(k): 5}
        outs[name] = {p.name: p.read_bytes() for p in sorted((tmp_path / name).iterdir())}
    assert outs["single"] == outs["sharded"]


@pytest.mark.parametrize(
    ("n", "context_turns", "problem"),
    [(0, 3, "--n must be at least 1, got 0"), (-1, 3, "--n must be at least 1, got -1"),
     (1, -1, "--context-turns must be at least 0, got -1")],
)  # fmt: skip
def test_heldout_arguments_are_checked(n, context_turns, problem, tmp_path):
    """n must be at least 1 and context_turns at least 0 (the config's own bounds)."""
    with pytest.raises(InputError, match=rf"^{problem}$"):
        sample_heldout(
            HeldoutConfig(corpus=["x"], train=["y"], out=str(tmp_path / "h"), n=n, context_turns=context_turns)
        )


def test_heldout_of_one_row_with_no_context(base_rows, tmp_path):
    """n = 1 and context_turns = 0 are valid: one row, and the progress bars are labelled."""
    corpus = write_jsonl(tmp_path / "c.jsonl", [dict(base_rows[0], instance_id="x-1", repo="org/x")])
    train = write_jsonl(tmp_path / "t.jsonl", [dict(base_rows[1], instance_id="t-1", repo="org/t")])
    m = sample_heldout(
        HeldoutConfig(corpus=[corpus], train=[train], out=str(tmp_path / "h.jsonl"), n=1, context_turns=0)
    )
    assert m["selected"] == 1 and m["context_turns"] == 0


def _mixed_corpus(base_rows, tmp_path):
    """Rows 1-2: eligible (repos org/e1, org/e2); 3: no repo; 4-5: training instances; 6: a training
    repo; 7: too short; 8: another eligible row of org/e1; 9: invalid JSON."""
    short = dict(base_rows[6], instance_id="s-1", repo="org/s", messages=base_rows[6]["messages"][:4])
    rows = [
        dict(base_rows[0], instance_id="e1-1", repo="org/e1"),
        dict(base_rows[1], instance_id="e2-1", repo="org/e2"),
        dict(base_rows[2], instance_id="norepo", repo=None),
        dict(base_rows[3], instance_id="t-1", repo="org/new1"),
        dict(base_rows[4], instance_id="t-2", repo="org/new2"),
        dict(base_rows[5], instance_id="x-1", repo="org/train"),
        short,
        dict(base_rows[7], instance_id="e1-2", repo="org/e1"),
    ]
    corpus = write_jsonl(tmp_path / "c.jsonl", rows, ["{broken"])
    train_rows = [
        dict(base_rows[8], instance_id="t-1", repo="org/train"),
        dict(base_rows[9], instance_id="t-2", repo="org/train"),
    ]
    train = write_jsonl(tmp_path / "t.jsonl", train_rows, ["{bad"])
    return corpus, train


def test_heldout_manifest_counts_every_reason(base_rows, tmp_path, capsys):
    """Each row is counted under exactly one reason; a row without a repo is a bad line (and does not
    stop the pass); the manifest echoes the configuration and the training pass."""
    corpus, train = _mixed_corpus(base_rows, tmp_path)
    out = str(tmp_path / "h.jsonl")
    m = sample_heldout(HeldoutConfig(corpus=[corpus], train=[train], out=out, n=2, context_turns=2, seed=3))
    reason = {b["line"]: b["reason"] for b in m["bad_lines"]}
    assert reason[3] == "missing field 'repo'" and reason[9].startswith("invalid JSON")
    assert all(b["file"] == corpus for b in m["bad_lines"])
    assert {k: v for k, v in m.items() if k not in ("bad_lines", "train_bad_lines")} == {
        "corpus": [corpus],
        "train": [train],
        "n": 2,
        "context_turns": 2,
        "seed": 3,
        "scanned": 9,
        "malformed": 2,
        "too_short": 1,
        "sentinel_target": 0,
        "excluded_repo": 1,
        "excluded_instance": 2,
        "eligible": 3,
        "eligible_repos": 2,
        "selected": 2,
        "target_classes": class_counts(r["target_class"] for r in read_heldout(out)),
        "train_scanned": 3,
        "train_malformed": 1,
        "train_repos": 1,
        "train_instances": 2,
    }
    assert [b["line"] for b in m["train_bad_lines"]] == [3]
    assert json.loads((tmp_path / "h.jsonl.manifest.json").read_text()) == m
    err = capsys.readouterr().err
    assert "train ids:" in err and "held-out:" in err


def test_too_few_repos_message_gives_every_count(base_rows, tmp_path):
    """Too few eligible repos is an error that counts eligible rows and every reason for exclusion."""
    corpus, train = _mixed_corpus(base_rows, tmp_path)
    want = (
        r"^only 2 eligible repos \(3 eligible trajectories\) for --n 3: 1 too short, 0 sentinel targets, "
        r"1 in training repos, "
        r"2 training instances, 2 malformed$"
    )
    with pytest.raises(InputError, match=want):
        sample_heldout(
            HeldoutConfig(corpus=[corpus], train=[train], out=str(tmp_path / "h.jsonl"), n=3, context_turns=2)
        )


def test_heldout_equal_keys_keep_the_first_row_and_order_stably(base_rows, tmp_path):
    """Equal keys (same file name, line and instance id in two folders): within a repo the row read
    first stays; across repos both are kept, first-read first, without comparing the rows."""
    train = write_jsonl(tmp_path / "t.jsonl", [dict(base_rows[9], instance_id="t-1", repo="org/t")])
    same_repo = [
        write_jsonl(tmp_path / d / "c.jsonl", [dict(base_rows[k], instance_id="dup", repo="org/r")])
        for d, k in (("a", 0), ("b", 1))
    ]
    out = tmp_path / "h.jsonl"
    sample_heldout(HeldoutConfig(corpus=same_repo, train=[train], out=str(out), n=1, context_turns=2))
    (row,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert row["task"] == base_rows[0]["messages"][1]["content"]
    two_repos = [
        write_jsonl(tmp_path / d / "c.jsonl", [dict(base_rows[k], instance_id="dup", repo=f"org/{d}")])
        for d, k in (("c", 2), ("d", 3))
    ]
    sample_heldout(HeldoutConfig(corpus=two_repos, train=[train], out=str(out), n=2, context_turns=2))
    assert [json.loads(x)["repo"] for x in out.read_text().splitlines()] == ["org/c", "org/d"]


def test_subsets_hold_at_most_k_keys_in_memory(base_rows, tmp_path, monkeypatch):
    """The streaming pass keeps only the K = max(sizes) smallest keys, however long the corpus."""
    import heapq

    import terminalworld.corpus.sampling as sampling

    largest = []

    class CountingHeap:
        def heappush(self, heap, item):
            heapq.heappush(heap, item)
            largest.append(len(heap))

        def heapreplace(self, heap, item):
            heapq.heapreplace(heap, item)
            largest.append(len(heap))

        def heappop(self, heap):
            return heapq.heappop(heap)

        def heapify(self, heap):
            heapq.heapify(heap)
            largest.append(len(heap))

    monkeypatch.setattr(sampling, "heapq", CountingHeap())
    rows = [{**r, "instance_id": f"{r['instance_id']}-{i}"} for i in range(8) for r in base_rows]
    write_jsonl(tmp_path / "corpus.jsonl", rows)
    make_subsets(SubsetsConfig(corpus=[str(tmp_path / "corpus.jsonl")], out=str(tmp_path / "s"), sizes="3,5"))
    assert len(rows) > 5 and max(largest) == 5
