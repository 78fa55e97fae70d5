"""Search patterns a command names (grep's BRE, ERE and fixed strings, find's name globs), compiled
for matching on the host, where they are hostile input: a model or a trajectory wrote them.

They are compiled with RE2 (`google-re2`), whose matching time is linear in the text searched and
whose compiled program is capped in memory (`MAX_MEM`), never with Python's backtracking `re`
(`\\(.*\\)*QQQ` over one ordinary line runs for ages; 500 nested groups overflow its parser's stack).

Translation, stated once:
- BRE: `\\( \\) \\{ \\} \\| \\+ \\?` are operators and their bare forms literal (GNU grep's BRE);
  ERE is taken as RE2 syntax; `-F` is literal; `\\<` and `\\>` become `\\b`; `-i` folds case;
  `-w` wraps the pattern in `\\b`.
- What RE2 cannot express or refuses (backreferences `\\1`, a program over `MAX_MEM`, a leading
  `*` it reads as an operator) and any pattern longer than `MAX_PATTERN` characters is searched
  as a literal string (its text as typed), the same rule as for a pattern that is not a regular
  expression at all. Matching is then a substring test: bounded, and usually no match, where grep
  would have matched by backreference: the block is then missing or partial, never wrong content.
- A `find -name` glob: `*`, `?` and bracket classes (`[!...]` negated) over the whole name; a glob
  RE2 refuses is compared as a literal name.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import re2

MAX_PATTERN = 4096  # characters: a longer pattern is searched literally
MAX_MEM = 8 << 20  # bytes RE2 may use for one compiled pattern and its matching caches


class Matcher(Protocol):
    """What retrieval asks of a compiled pattern."""

    def search(self, text: str) -> object:
        """Truthy when the pattern matches somewhere in `text`."""

    def fullmatch(self, text: str) -> object:
        """Truthy when the pattern matches the whole of `text`."""


@dataclass(frozen=True)
class Literal:
    """Patterns taken as their text: any one a substring (`search`) or the whole text (`fullmatch`)."""

    texts: tuple[str, ...]
    fold: bool = False

    def _f(self, s: str) -> str:
        return s.casefold() if self.fold else s

    def search(self, text: str) -> bool:
        """Whether any of the texts occurs in `text`."""
        return any(self._f(t) in self._f(text) for t in self.texts)

    def fullmatch(self, text: str) -> bool:
        """Whether `text` is one of the texts."""
        return any(self._f(t) == self._f(text) for t in self.texts)


def _options(fold: bool) -> re2.Options:
    o = re2.Options()
    o.max_mem = MAX_MEM
    o.case_sensitive = not fold
    o.log_errors = False
    o.never_capture = True  # no submatches are read: less memory, the DFA more often
    o.dot_nl = True
    return o


def matching_lines(m: Matcher, text: str) -> Iterator[tuple[int, str]]:
    """(number, line) of each line of `text` (lines end at a newline, as grep's) that `m` matches,
    taken lazily. The text is scanned from one hit to the next by RE2 (over its UTF-8 bytes, which
    RE2 would otherwise re-encode at each call) or `str.find`, so the cost is linear in the text and
    the hits taken, not a Python step per line; a case-folded literal whose folding changes the
    text's length is searched line by line."""
    if isinstance(m, Literal):
        folded = m._f(text)
        if len(folded) != len(text):
            yield from ((n, x) for n, x in enumerate(_lines(text).split("\n"), 1) if m.search(x))
            return
        needles = [m._f(t) for t in m.texts if "\n" not in t]
        yield from _scan(
            text, lambda pos, end: min((i for t in needles if (i := folded.find(t, pos, end)) >= 0), default=-1)
        )
        return
    options = _options(not m.options.case_sensitive)
    options.never_nl, options.dot_nl = True, False  # no match runs across a line's end
    try:
        program = re2.compile(("(?m)" + m.pattern).encode(), options)  # ^ and $ at each line's ends
    except re2.error:
        yield from ((n, x) for n, x in enumerate(_lines(text).split("\n"), 1) if m.search(x))
        return
    data = text.encode()

    def find(pos: int, end: int) -> int:
        hit = program.search(data, pos, end)
        return -1 if hit is None else hit.start()

    for n, line in _scan(data, find):
        yield n, line.decode()


def _lines(text: str) -> str:
    return text[: len(text) - text.endswith("\n")]  # no line after the last newline


def _scan(text, find):
    """(number, line) of each line of `text` (str or bytes) holding a hit of `find(pos, end)`."""
    nl = "\n" if isinstance(text, str) else b"\n"
    end = len(text) - text.endswith(nl)
    pos, n, counted = 0, 1, 0
    while pos <= end:
        hit = find(pos, end)
        if hit < 0:
            return
        start = text.rfind(nl, 0, hit) + 1
        stop = text.find(nl, hit, end)
        stop = end if stop < 0 else stop
        n += text.count(nl, counted, start)
        counted = start
        yield n, text[start:stop]
        pos = stop + 1


def _compile(source: str, literal: tuple[str, ...], fold: bool) -> Matcher:
    """RE2 over `source`, else the literal rule over `literal`."""
    if len(source) > MAX_PATTERN:
        return Literal(literal, fold)
    try:
        return re2.compile(source, _options(fold))
    except re2.error:
        return Literal(literal, fold)


def _bre(pattern: str) -> str:
    """A POSIX basic regular expression (GNU grep's) in RE2's syntax."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            n = pattern[i + 1]
            out.append(n if n in "|(){}+?" else _word_edge(n))
            i += 2
            continue
        out.append("\\" + c if c in "|(){}+?" else c)
        i += 1
    return "".join(out)


def _ere(pattern: str) -> str:
    out, i = [], 0
    while i < len(pattern):
        if pattern[i] == "\\" and i + 1 < len(pattern):
            out.append(_word_edge(pattern[i + 1]))
            i += 2
            continue
        out.append(pattern[i])
        i += 1
    return "".join(out)


def _word_edge(escaped: str) -> str:
    return "\\b" if escaped in "<>" else "\\" + escaped


def grep(patterns: list[str], *, fixed: bool, extended: bool, fold: bool, words: bool) -> Matcher:
    """The matcher of grep's `-e` patterns (any one matching) under its -F, -E, -i and -w flags."""
    if fixed and not words:
        return Literal(tuple(patterns), fold)
    sources = [re2.escape(p) if fixed else _ere(p) if extended else _bre(p) for p in patterns]
    if words:
        sources = [rf"\b(?:{s})\b" for s in sources]
    return _compile("|".join(f"(?:{s})" for s in sources), tuple(patterns), fold)


def glob(pattern: str, *, fold: bool = False) -> Matcher:
    """The matcher of a `find -name` glob over a whole file name."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[":
            j = i + (i < n and pattern[i] in "!^")
            j += j < n and pattern[j] == "]"
            end = pattern.find("]", j)
            if end < 0:
                out.append(re2.escape("["))
                continue
            body = pattern[i:end]
            body = "^" + body[1:] if body[:1] in "!^" else body
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        elif c == "\\" and i < n:
            out.append(re2.escape(pattern[i]))
            i += 1
        else:
            out.append(re2.escape(c))
    return _compile("".join(out), (pattern,), fold)
