"""The packing rules on rows small enough to pack by hand: exact fills, the one-token shift, the
counters, the error messages, and the training tokenizer's copy."""

import json

import numpy as np
import pytest

from terminalworld.core.assets import load_tokenizer
from terminalworld.errors import PackingError
from terminalworld.train.packing import PackStats, pack_rows, shifted_weights, training_tokenizer

SEP = 9


def doc(iid, ids, weights):
    return {"instance_id": iid, "input_ids": ids, "loss_weights": weights}


def test_greedy_packing_by_hand():
    """Documents of 3, 2 and 4 tokens in rows of 7: the first two fill a row exactly (3+1+2+1), the
    third opens a new one padded with the separator at weight 0; weights are shifted by one inside
    each document and 0 on its last token and the separator."""
    rows = [doc("a", [1, 2, 3], [0, 1, 1]), doc("b", [4, 5], [1, 1]), doc("c", [6, 7, 8, 1], [0, 0, 1, 0])]
    stats = PackStats()
    packed = list(pack_rows(rows, 7, SEP, stats))
    assert packed == [
        {"input_ids": [1, 2, 3, SEP, 4, 5, SEP], "loss_weights": [1, 1, 0, 0, 1, 0, 0], "instance_ids": ["a", "b"]},
        {"input_ids": [6, 7, 8, 1, SEP, SEP, SEP], "loss_weights": [0, 1, 0, 0, 0, 0, 0], "instance_ids": ["c"]},
    ]
    assert all(isinstance(x, int) for p in packed for x in p["input_ids"])
    assert stats == PackStats(documents=3, sequences=2, tokens=9, padding=2)


def test_packing_without_stats_or_rows():
    """Stats are optional; no rows give no sequence; a row without an instance id is named ""."""
    assert list(pack_rows([], 4, SEP)) == []
    (only,) = pack_rows([{"input_ids": [1, 2], "loss_weights": [0, 1]}], 4, SEP)
    assert only == {"input_ids": [1, 2, SEP, SEP], "loss_weights": [1, 0, 0, 0], "instance_ids": [""]}


def test_documents_with_no_trained_prediction_are_left_out_and_counted():
    """No position predicts a document's first token, so a document trained only there (or nowhere)
    has nothing to train; alone in a sequence it would make Levanter's loss 0/0."""
    rows = [doc("a", [1, 2], [1, 0]), doc("b", [3, 4], [0, 1]), doc("c", [5], [1]), doc("d", [6, 7], [0, 0])]
    stats = PackStats()
    (row,) = pack_rows(rows, 8, SEP, stats)
    assert row["instance_ids"] == ["b"] and row["loss_weights"] == [1, 0, 0, 0, 0, 0, 0, 0]
    assert stats == PackStats(documents=1, sequences=1, tokens=2, padding=5, untrained=3)
    assert list(pack_rows([doc("d", [6, 7], [0, 0])], 8, SEP)) == []


def test_longest_document_is_seq_len_minus_one():
    """A document of seq_len-1 tokens fits with its separator; one of seq_len does not, and the error
    names the row, its length and seq_len."""
    (row,) = pack_rows([doc("a", [1, 2, 3], [1, 1, 1])], 4, SEP)
    assert row["input_ids"] == [1, 2, 3, SEP] and row["loss_weights"] == [1, 1, 0, 0]
    with pytest.raises(PackingError, match=r"^a: 4 tokens do not fit seq_len 4 with a separator$"):
        list(pack_rows([doc("a", [1, 2, 3, 4], [1, 1, 1, 1])], 4, SEP))


def test_row_errors_name_the_row():
    """Mismatched weights and a separator inside a document are refused with the row's id."""
    with pytest.raises(PackingError, match=r"^a: 2 loss weights for 3 tokens$"):
        list(pack_rows([doc("a", [1, 2, 3], [1, 1])], 8, SEP))
    with pytest.raises(PackingError, match=r"^b: the separator id 9 occurs inside the document, so Levanter would cut"):
        list(pack_rows([doc("b", [1, SEP, 3], [1, 1, 1])], 8, SEP))


def test_shifted_weights_are_float32():
    """The shift keeps fractional weights and returns float32 for Levanter."""
    out = shifted_weights(np.array([1.0, 0.5, 0.25]))
    assert out.dtype == np.float32 and out.tolist() == [0.5, 0.25, 0.0]


def test_training_tokenizer_copy(tmp_path):
    """The copy reports the separator as eos, the shared tokenizer keeps its own eos, an existing
    empty folder is used, and an existing copy is left as it is."""
    tok = load_tokenizer("qwen3")
    eos_before = tok.eos_token
    out = tmp_path / "tok"
    out.mkdir()
    assert training_tokenizer("qwen3", str(out)) == str(out)
    config = json.loads((out / "tokenizer_config.json").read_text())
    assert config["eos_token"] == "<|endoftext|>"
    assert load_tokenizer("qwen3").eos_token == eos_before != "<|endoftext|>"
    (out / "tokenizer_config.json").write_text("{}")
    assert training_tokenizer("qwen3", str(out)) == str(out)
    assert (out / "tokenizer_config.json").read_text() == "{}"


@pytest.mark.parametrize("name", ["qwen3", "smollm2"])
def test_training_tokenizer_needs_the_separator_token(name, tmp_path):
    """A separator the vocabulary lacks (None id, or mapped to the unknown token) is refused."""
    with pytest.raises(PackingError, match=rf"^{name}: no token '<\|no-such-token\|>' to use as document separator$"):
        training_tokenizer(name, str(tmp_path / "t"), separator="<|no-such-token|>")
    assert not (tmp_path / "t").exists()


def test_a_document_that_would_overflow_by_one_opens_a_new_row():
    """Two documents of 3 tokens need 8 positions with their separators: with seq_len 7 the second
    goes to a new row, never into a row one token too long."""
    rows = [doc("a", [1, 2, 3], [1, 1, 1]), doc("b", [4, 5, 6], [1, 1, 1])]
    packed = list(pack_rows(rows, 7, SEP))
    assert [p["input_ids"] for p in packed] == [[1, 2, 3, SEP, SEP, SEP, SEP], [4, 5, 6, SEP, SEP, SEP, SEP]]
    assert [p["instance_ids"] for p in packed] == [["a"], ["b"]]
