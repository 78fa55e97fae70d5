"""A nested scale continues the smaller scale's run from a copy of its last Levanter checkpoint, and
drops that copy once it has a later checkpoint of its own: the run it came from keeps it, so a chain
of scales holds each step once on disk (a 135M model's checkpoint is 1.6 GB with its optimizer)."""

from pathlib import Path

import pytest

from terminalworld.train.checkpoint import _copy_last_checkpoint, _drop_checkpoints_through


def checkpoint(root: Path, step: int, complete: bool = True) -> Path:
    folder = root / "checkpoints" / "sft" / f"step-{step}"
    (folder / "d").mkdir(parents=True)
    (folder / "d" / "weights").write_bytes(b"w" * 16)
    if complete:
        (folder / "metadata.json").write_text("{}")
    return folder


def steps(root: Path) -> list[int]:
    return sorted(int(p.name.split("-")[1]) for p in (root / "checkpoints" / "sft").glob("step-*"))


def test_a_continued_run_starts_from_the_last_complete_checkpoint_and_drops_the_copy(tmp_path):
    small, large = tmp_path / "x1", tmp_path / "x3"
    checkpoint(small, 1)
    checkpoint(small, 2)
    checkpoint(small, 3, complete=False)  # a save cut short: never continued from
    assert _copy_last_checkpoint(str(small), str(large)) == 2
    assert steps(large) == [2] and (large / "checkpoints/sft/step-2/d/weights").read_bytes() == b"w" * 16
    # Before the run saved a later checkpoint of its own, nothing is dropped: the copy is what a
    # killed run resumes from.
    assert _drop_checkpoints_through(str(large), 2) == [] and steps(large) == [2]
    checkpoint(large, 5, complete=False)
    assert _drop_checkpoints_through(str(large), 2) == [] and steps(large) == [2, 5]
    (large / "checkpoints/sft/step-5/metadata.json").write_text("{}")
    assert _drop_checkpoints_through(str(large), 2) == [2]
    assert steps(large) == [5] and steps(small) == [1, 2, 3]  # the smaller scale's run is untouched


def test_a_rerun_resumes_its_own_checkpoint_and_still_knows_where_it_began(tmp_path):
    small, large = tmp_path / "x1", tmp_path / "x3"
    checkpoint(small, 2)
    checkpoint(large, 2)
    checkpoint(large, 4)  # a rotating save of the interrupted run
    assert _copy_last_checkpoint(str(small), str(large)) == 2
    assert steps(large) == [2, 4]  # nothing copied over its own checkpoints
    checkpoint(large, 8)
    assert _drop_checkpoints_through(str(large), 2) == [2] and steps(large) == [4, 8]


def test_nothing_to_continue_from_is_a_clear_error(tmp_path):
    checkpoint(tmp_path / "x1", 2, complete=False)
    with pytest.raises(FileNotFoundError, match="no complete Levanter checkpoint"):
        _copy_last_checkpoint(str(tmp_path / "x1"), str(tmp_path / "x3"))
