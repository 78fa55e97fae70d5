"""Training coverage counted from packed rows with known answers."""

import gzip
import json

import pytest

from terminalworld.train.coverage import scale_tokens, writeup_ratio

SEP = 0


def test_scale_tokens_counts_real_padding_and_loss_tokens_per_prefix(tmp_path):
    rows = [
        {"input_ids": [5, 6, 7, SEP, 8, 9, SEP, SEP], "loss_weights": [0, 1, 0, 0, 1, 0, 0, 0]},
        {"input_ids": [4, 4, 4, 4, 4, 4, 4, SEP], "loss_weights": [1, 1, 1, 1, 1, 1, 0, 0]},
        {"input_ids": [3, SEP, SEP, SEP, SEP, SEP, SEP, SEP], "loss_weights": [0] * 8},
    ]
    (tmp_path / "packed").mkdir()
    with gzip.open(tmp_path / "packed" / "packed-00000.jsonl.gz", "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    got = scale_tokens(str(tmp_path), {"x1": 1, "x3": 2, "past": 5}, SEP)
    assert got["x1"] == {"sequences": 1, "real_tokens": 5, "separator_and_padding_tokens": 3, "loss_tokens": 2}
    assert got["x3"] == {"sequences": 2, "real_tokens": 12, "separator_and_padding_tokens": 4, "loss_tokens": 8}
    assert got["past"]["sequences"] == 3 and got["past"]["real_tokens"] == 13


def test_writeup_ratio_is_an_upper_bound_of_trajectories_times_the_window():
    assert writeup_ratio(10_175, 10_000) == pytest.approx(10_000 * 8192 / 10_175)
    assert writeup_ratio(0, 10_000) is None
