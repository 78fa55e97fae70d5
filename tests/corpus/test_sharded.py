"""The Zephyr jobs against the single-process sampler, byte for byte, on a generated corpus with
every kind of bad record, at several shard counts (groups of files, stripes of files)."""

import pytest

from terminalworld.core.records import iter_records
from terminalworld.corpus.sampling import HeldoutConfig, SubsetsConfig, make_subsets, sample_heldout
from terminalworld.corpus.sharded import (
    HeldoutJob,
    SubsetsJob,
    make_subsets_sharded,
    sample_heldout_sharded,
    shard_parts,
)
from terminalworld.errors import InputError
from terminalworld.pipeline.zephyr import Workers, local_workers
from tests.synthetic import write_generated_corpus


@pytest.fixture(scope="module")
def generated(recorded_corpus, tmp_path_factory):
    rows = [r.value for r in iter_records(str(recorded_corpus / "*.jsonl.gz"))]
    folder = tmp_path_factory.mktemp("generated")
    write_generated_corpus(rows=rows, folder=str(folder), n=3000, shards=5, repos=3000, seed=1, defect_every=97)
    return str(folder / "corpus-*.jsonl.gz")


def _files(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def reference(generated, tmp_path_factory):
    out = tmp_path_factory.mktemp("reference")
    cfg = SubsetsConfig(corpus=[generated], out=str(out / "subsets"), sizes="60,500", seed=3)
    make_subsets(cfg)
    heldout = HeldoutConfig(
        corpus=[generated],
        train=[str(out / "subsets" / "subset-500.jsonl.gz")],
        out=str(out / "h" / "heldout.jsonl"),
        n=25,
        context_turns=3,
        seed=3,
    )
    sample_heldout(heldout)
    return out, cfg, heldout


@pytest.mark.parametrize("shards", [None, 2, 12])
def test_sharded_subsets_and_heldout_are_byte_identical(reference, tmp_path, shards):
    out, cfg, heldout = reference
    workers = Workers(count=1, shards=shards)
    sampling = SubsetsConfig(**{**cfg.__dict__, "out": str(tmp_path / "subsets")})
    manifest = make_subsets_sharded(SubsetsJob(sampling, workers))
    assert _files(tmp_path / "subsets") == _files(out / "subsets")
    # The defects are really there, counted where they were read and merged in reading order.
    # 30 defects: 6 each of invalid JSON, undecodable bytes, non-trajectories (malformed), repo-less
    # trajectories (valid here, malformed for the held-out set) and blank lines (not records).
    assert (manifest["scanned"], manifest["malformed"]) == (3024, 18)
    assert len({b["file"] for b in manifest["bad_lines"]}) == 5
    h = HeldoutConfig(**{**heldout.__dict__, "out": str(tmp_path / "h" / "heldout.jsonl")})
    m = sample_heldout_sharded(HeldoutJob(h, workers))
    assert _files(tmp_path / "h") == _files(out / "h")
    assert m["selected"] == 25 and m["excluded_repo"] > 0 and m["malformed"] == 24
    assert sum("missing field 'repo'" in b["reason"] for b in m["bad_lines"]) == 6


def test_worker_processes_give_the_same_bytes(reference, tmp_path):
    """Two local workers run each shard in its own Python process (Zephyr's subprocess runner)."""
    out, cfg, heldout = reference
    make_subsets_sharded(
        SubsetsJob(SubsetsConfig(**{**cfg.__dict__, "out": str(tmp_path / "subsets")}), local_workers(2))
    )
    assert _files(tmp_path / "subsets") == _files(out / "subsets")
    h = HeldoutConfig(**{**heldout.__dict__, "out": str(tmp_path / "h" / "heldout.jsonl")})
    sample_heldout_sharded(HeldoutJob(h, local_workers(2)))
    assert _files(tmp_path / "h") == _files(out / "h")


def test_shards_cover_every_line_once(generated):
    from terminalworld.core.records import expand_all

    files = expand_all(generated)
    for shards in (None, 1, 3, 5, 12):
        specs = shard_parts(files, shards)
        owners = [(i, n) for spec in specs for i, part in spec for n in range(1, 700) if part.holds(n)]
        assert sorted(owners) == [(i, n) for i in range(len(files)) for n in range(1, 700)]
        assert len(specs) == (len(files) if shards is None else max(shards, 1) if shards <= len(files) else 15)


def test_errors_match_the_single_process(generated, tmp_path):
    cfg = SubsetsConfig(corpus=[generated], out=str(tmp_path), sizes="5000", seed=3)
    with pytest.raises(InputError) as single:
        make_subsets(cfg)
    with pytest.raises(InputError) as sharded:
        make_subsets_sharded(SubsetsJob(cfg, Workers(shards=3)))
    assert str(single.value) == str(sharded.value)
