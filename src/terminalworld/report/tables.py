"""A report as data: its tables, headings and paragraphs (`Block`s), and the one renderer that writes
them as Markdown at any heading level, for a report's own `.md` file and the docs site alike, so a
table is defined once and no page edits another's Markdown."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Table:
    """A table: its column headers, its rows (each cell shown through `cell`) and one `l`/`r`
    alignment per column (left where not given)."""

    columns: Sequence[str]
    rows: Sequence[Sequence[Any]]
    align: str = ""

    def labels(self) -> list[str]:
        """The first column's cells as shown: what a reader finds each row by."""
        return [cell(r[0]) for r in self.rows]


@dataclass(frozen=True)
class Heading:
    """A heading `depth` levels below the level the blocks are rendered at."""

    title: str
    depth: int = 0


Block = Table | Heading | str  # a str is a paragraph (or a list) of the project's own Markdown


def section(title: str, blocks: Iterable[Block]) -> list[Block]:
    """`blocks` under a heading `title`: their own headings one level down."""
    return [Heading(title), *(Heading(b.title, b.depth + 1) if isinstance(b, Heading) else b for b in blocks)]


def markdown_lines(blocks: Iterable[Block], level: int = 1) -> list[str]:
    """The blocks as Markdown lines, a heading of depth d at level `level + d`, each block followed by
    a blank line."""
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f"{'#' * (level + b.depth)} {b.title}")
        elif isinstance(b, Table):
            out.append(table_markdown(b))
        else:
            out.append(b)
        out.append("")
    return out


def table_markdown(table: Table) -> str:
    """One table as Markdown lines (no blank line after it)."""
    rule = "|".join("---:" if a == "r" else "---" for a in table.align.ljust(len(table.columns), "l"))
    head = [f"| {' | '.join(table.columns)} |", f"|{rule}|"]
    return "\n".join(head + [f"| {' | '.join(cell(c) for c in row)} |" for row in table.rows])


def to_markdown(blocks: Iterable[Block], level: int = 1) -> str:
    """The blocks as one Markdown text (`markdown_lines`), ending in one newline."""
    return "\n".join(markdown_lines(blocks, level)).rstrip() + "\n"


# What could make corpus or model text in a cell into live markup or break its row, each written as
# an HTML entity (which no backslash before it can undo, and which the table's row splitter does not
# see): a cell break (`|`, and `\` which would escape the next character, `\|` included), an
# attribute list (`{onclick=...}` after an element or at the cell's end), HTML (`<`, and `&` so that
# a typed entity shows as typed), a backtick that opens no code span in the cell (it would pair with
# one in another cell and merge the two), and a link or image (`[x](javascript:...)`, `[x][ref]`) at
# its `](` or `][`.
_ENTITY = {"\\": "&#92;", "|": "&#124;", "{": "&#123;", "}": "&#125;", "<": "&lt;", "&": "&amp;", "`": "&#96;"}
_PLAIN = re.compile(r"[\\|{}<&`]")
_LINK = re.compile(r"\](\s*)([(\[])")
_TICKS = re.compile(r"`+")


def cell(value: Any) -> str:
    """A value as a Markdown table cell: floats to 4 significant digits (big ones grouped), one line,
    and inert: outside its code spans (`_code_spans`) no HTML, cell break, attribute list, link or
    image (`_ENTITY`, `_LINK`); inside them text, as in any code span. A repository or model text
    shows as typed and never as markup, in exactly one cell."""
    text = (f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}") if isinstance(value, float) else str(value)
    text = text.replace("\r", " ").replace("\n", " ")
    out, at = [], 0
    for start, end in _code_spans(text):
        out += [_plain(text[at:start]), text[start:end]]
        at = end
    return "".join([*out, _plain(text[at:])])


def _plain(text: str) -> str:
    text = _PLAIN.sub(lambda m: _ENTITY[m.group()], text)
    return _LINK.sub(lambda m: "]" + m.group(1) + ("&#40;" if m.group(2) == "(" else "&#91;"), text)


def _code_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each code span of `text`: a run of backticks up to the next run of the same
    length, as both Python-Markdown's inline code and its table row splitter pair them. A span
    whose text has a backslash before a backtick (its last one included) is left out, since the row
    splitter reads that backtick as escaped and would pair the rest differently."""
    runs = [(m.start(), m.end()) for m in _TICKS.finditer(text)]
    following: list[int | None] = [None] * len(runs)  # the next run of the same length, by run
    last: dict[int, int] = {}
    for k in range(len(runs) - 1, -1, -1):
        size = runs[k][1] - runs[k][0]
        following[k], last[size] = last.get(size), k
    spans, i = [], 0
    while i < len(runs):
        close = following[i]
        if close is None:
            i += 1
            continue
        start, end = runs[i][0], runs[close][1]
        if "\\`" not in text[start:end]:
            spans.append((start, end))
        i = close + 1
    return spans


def fixed(x: float | None, digits: int = 2) -> str:
    """A number to `digits` decimals; "—" for an absent one."""
    return "—" if x is None else f"{x:.{digits}f}"


def pct(x: float | None) -> str:
    """A share as a whole percentage; "—" for an absent one."""
    return "—" if x is None else f"{x:.0%}"


def of(k: int | None, n: int) -> str:
    """A count out of `n` ("k of n"); "—" for an absent one."""
    return "—" if k is None else f"{k} of {n}"
