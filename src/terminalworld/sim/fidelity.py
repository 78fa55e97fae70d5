"""Free-running fidelity of one generated observation against the real one (tier 1), and the
research's degeneration rule.

- `exact_match`: the texts are equal.
- `similarity`: rapidfuzz's normalised Indel similarity, `fuzz.ratio / 100` (1 − the edit distance
  with insertions and deletions, over the summed lengths); 1.0 for two empty texts.
- `line_prf`: precision, recall and F1 of the generated lines against the real ones as multisets
  (a line counts as often as it occurs in both); both empty is a perfect 1.0.
- `length_ratio`: generated characters over real characters (None when the real output is empty).
- `degenerate`: the research's rule exactly: over 800 characters and
  `len(zlib.compress(utf8)) / len(utf8) < 0.08` at zlib's default level.
- `repeated_ngrams`: the share of the text's word 4-grams that repeat an earlier one, the
  loop-detector the write-up pairs with the zlib rule (reported beside it, never folded into it).
"""

from __future__ import annotations

import zlib
from collections import Counter
from typing import Any

DEGENERATE_MIN_CHARS = 800
DEGENERATE_MAX_RATIO = 0.08
NGRAM = 4


def similarity(generated: str, target: str) -> float:
    """Normalised Indel similarity in [0, 1] (rapidfuzz)."""
    from rapidfuzz import fuzz

    return 1.0 if not generated and not target else fuzz.ratio(generated, target) / 100


def line_prf(generated: str, target: str) -> dict[str, float]:
    """Multiset line precision, recall and F1."""
    g, t = Counter(generated.splitlines()), Counter(target.splitlines())
    if not g and not t:
        return {"line_precision": 1.0, "line_recall": 1.0, "line_f1": 1.0}
    common = sum((g & t).values())
    p = common / sum(g.values()) if g else 0.0
    r = common / sum(t.values()) if t else 0.0
    return {"line_precision": p, "line_recall": r, "line_f1": 2 * p * r / (p + r) if p + r else 0.0}


def compression_ratio(text: str) -> float:
    """zlib-compressed bytes over UTF-8 bytes (default level)."""
    data = text.encode("utf-8")
    return len(zlib.compress(data)) / len(data) if data else 1.0


def degenerate(text: str) -> bool:
    """The research's rule: more than 800 characters that compress below 0.08."""
    return len(text) > DEGENERATE_MIN_CHARS and compression_ratio(text) < DEGENERATE_MAX_RATIO


def repeated_ngrams(text: str, n: int = NGRAM) -> float:
    """The share of word n-grams that already occurred earlier in the text (0 with fewer than n words)."""
    words = text.split()
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    return (len(grams) - len(set(grams))) / len(grams) if grams else 0.0


def fidelity(generated: str, target: str) -> dict[str, Any]:
    """Every tier-1 metric of one generated observation."""
    return {
        "exact_match": generated == target,
        "similarity": similarity(generated, target),
        **line_prf(generated, target),
        "length_ratio": len(generated) / len(target) if target else None,
        "degenerate": degenerate(generated),
        "compression_ratio": compression_ratio(generated),
        "repeated_ngrams": repeated_ngrams(generated),
    }
