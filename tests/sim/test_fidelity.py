"""Tier-1 metrics on cases with known answers, and the research's degeneration rule to the byte."""

import zlib

import pytest

from terminalworld.sim.fidelity import compression_ratio, degenerate, fidelity, line_prf, repeated_ngrams, similarity


def test_identical_outputs_score_one_and_disjoint_ones_zero():
    f = fidelity("a.py\nb.py\n", "a.py\nb.py\n")
    assert f["exact_match"] and f["similarity"] == 1.0 and f["line_f1"] == 1.0 and f["length_ratio"] == 1.0
    g = fidelity("xyz", "abc")
    assert not g["exact_match"] and g["similarity"] == 0.0 and g["line_f1"] == 0.0
    assert fidelity("", "")["similarity"] == 1.0 and fidelity("x", "")["length_ratio"] is None


def test_similarity_is_the_normalised_indel_distance():
    # "kitten" -> "sitting": Indel distance 5 (2 substitutions as 4 edits, 1 insertion) over 13 characters.
    assert similarity("kitten", "sitting") == pytest.approx(1 - 5 / 13)


def test_line_precision_recall_f1_count_repeated_lines():
    p = line_prf("a\na\nb\nz", "a\nb\nb\nc")  # common: a, b
    assert p == pytest.approx({"line_precision": 0.5, "line_recall": 0.5, "line_f1": 0.5})
    assert line_prf("a\nb", "a\nb\nc\nd")["line_recall"] == 0.5 and line_prf("", "")["line_f1"] == 1.0


def test_degeneration_is_over_800_characters_and_below_0_08_compression():
    loop = "ab" * 401  # 802 characters, compresses far below 0.08
    assert len(loop) > 800 and compression_ratio(loop) < 0.08 and degenerate(loop)
    assert not degenerate(loop[:800])  # 800 characters is not "over 800"
    assert compression_ratio(loop) == len(zlib.compress(loop.encode())) / len(loop.encode())
    varied = "".join(f"line {i}: value {i * 7919 % 1000}\n" for i in range(60))
    assert len(varied) > 800 and not degenerate(varied)


def test_repeated_ngrams_share():
    assert repeated_ngrams("a b c d a b c d") == pytest.approx(1 / 5)  # "a b c d" again, of 5 4-grams
    assert repeated_ngrams("one two three") == 0.0 and repeated_ngrams("x " * 100) == pytest.approx(96 / 97)
