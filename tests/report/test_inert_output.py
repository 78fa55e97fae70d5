"""Trajectory, corpus and model text reaches an operator's terminal and the docs site inert: on a
terminal, `show-mask` shows a trajectory's OSC 52 (clipboard), title and clear-screen sequences
escaped while its own highlight colours still work; a page cell shows a repository named like a
`javascript:` link, raw HTML or an attribute list as typed, never as markup."""

import json
import sys
from html.parser import HTMLParser

import markdown
import yaml

from terminalworld.core.terminal import for_terminal, inert
from terminalworld.eval.metrics import BUCKETS
from terminalworld.report.pages import Page
from terminalworld.report.probe import probe_blocks
from terminalworld.report.tables import Table, cell, to_markdown
from terminalworld.train.maskview import ShowMaskConfig, show_mask
from tests.paths import FIXTURES, REPO_ROOT

HOSTILE = "\x1b]52;c;ZXZpbA==\x07\x1b]0;pwned\x07\x1b[2J\x1b[3Jgone"
LINK = "[x](javascript:alert(1))"


def _trajectory(tmp_path):
    messages = json.loads((FIXTURES / "mini-swe-agent" / "local.traj.json").read_text())
    messages[3]["content"] += HOSTILE  # an observation the command printed
    messages[2]["content"] += HOSTILE  # and the model's own reply
    path = tmp_path / "hostile.traj.json"
    path.write_text(json.dumps(messages))
    return path


def test_show_mask_on_a_terminal_escapes_the_trajectorys_sequences(tmp_path, capsys, monkeypatch):
    path = _trajectory(tmp_path)
    show_mask(ShowMaskConfig(tokenizer="qwen3", inputs=[str(path)], color="never"))
    piped = capsys.readouterr().out
    assert "\x1b]52;c;" in piped  # a file or pipe gets the text as it is
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    show_mask(ShowMaskConfig(tokenizer="qwen3", inputs=[str(path)], color="auto"))
    shown = capsys.readouterr().out
    assert "\x07" not in shown and "\x1b]" not in shown and "\x1b[2J" not in shown and "\x1b[3J" not in shown
    assert "\\x1b]52;c;ZXZpbA==\\x07" in shown and "\x1b[30;43m" in shown  # escaped; the colours still there
    assert {c for c in shown if ord(c) < 32} <= {"\n", "\x1b"}


def test_one_function_makes_text_inert():
    assert inert(HOSTILE) == "\\x1b]52;c;ZXZpbA==\\x07\\x1b]0;pwned\\x07\\x1b[2J\\x1b[3Jgone"
    assert inert("tab\tand\nnewline \x9b c1") == "tab\tand\nnewline \\x9b c1"

    class Tty:
        def isatty(self):
            return True

    assert for_terminal(HOSTILE, Tty()) == inert(HOSTILE) and for_terminal(HOSTILE, sys.stdout) == HOSTILE


BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def test_bidi_controls_are_escaped_like_other_controls():
    # U+202E would show this name as "invoice-exe.pdf" (reversed after it): escaped, it reads as stored.
    assert inert("invoice-\u202efdp.exe") == "invoice-\\u202efdp.exe"
    assert inert(BIDI) == "".join(f"\\u{ord(c):04x}" for c in BIDI)
    assert inert("naïve — ok \u00e9 \u2067") == "naïve — ok \u00e9 \\u2067"  # other text is untouched


def test_show_mask_on_a_terminal_escapes_bidi_controls(tmp_path, capsys, monkeypatch):
    messages = json.loads((FIXTURES / "mini-swe-agent" / "local.traj.json").read_text())
    messages[3]["content"] += "run\u202eexe.txt" + BIDI
    path = tmp_path / "bidi.traj.json"
    path.write_text(json.dumps(messages))
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    show_mask(ShowMaskConfig(tokenizer="qwen3", inputs=[str(path)], color="never"))
    shown = capsys.readouterr().out
    assert not set(BIDI) & set(shown) and "run\\u202eexe.txt" in shown


def _html(text: str) -> str:
    """`text` rendered by Python-Markdown with the site's extensions and their settings (mkdocs.yml)."""
    listed = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text())["markdown_extensions"]
    names = [e if isinstance(e, str) else next(iter(e)) for e in listed]
    settings = {k: v for e in listed if isinstance(e, dict) for k, v in e.items() if v}
    return markdown.markdown(text, extensions=names, extension_configs=settings)


def test_page_cells_show_hostile_names_as_typed():
    page = Page(out="unused", relpath="x.md")
    names = [
        LINK,
        "<script>alert(1)</script>",
        "*x*{: onclick=alert(1) }",
        "`x`{onclick=alert(1)}",
        "a|b",
        "![i](javascript:alert(1))",
    ]
    page.put(Table(["repo", "n"], [[n, 1] for n in names]))
    html = _html("\n".join(page.lines))
    assert "<a " not in html and "<img" not in html and "<script" not in html and "<em onclick" not in html
    assert 'onclick="' not in html and html.count("<tr>") == len(names) + 1  # one row each, "a|b" one cell
    assert "[x]&#40;javascript:alert(1))" in html  # shown as typed
    assert cell(LINK) == "[x]&#40;javascript:alert(1))" and cell("[x\\](y)") == "[x&#92;]&#40;y)"
    assert cell("1768.4 [1500, 2000]") == "1768.4 [1500, 2000]" and cell("`{MARIN_PREFIX}/x`") == "`{MARIN_PREFIX}/x`"


class _Cells(HTMLParser):
    """The table body's rows as lists of (attributes, text) per cell, and every attribute seen."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.rows: list[list[tuple[list, str]]] = []
        self.attrs: list[tuple[str, str | None]] = []
        self._cell: list | None = None

    def handle_starttag(self, tag, attrs):
        self.attrs += attrs
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = [attrs, ""]
        elif self._cell is not None:
            self._cell[0] = self._cell[0] + [(tag, None)]  # markup inside a cell

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append((self._cell[0], self._cell[1]))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[1] += data


# (cell text, what the page shows, the markup inside the cell): an attribute list at a cell's end or after an element, an
# escaped pipe, a backslash at the cell's end, a typed entity, backticks that would pair across
# cells, code spans (shown as code, a pipe in one included), raw HTML. Emphasis and code stay markup.
CELL_ATTACKS = [
    ("x {onclick=alert(1)}", None),
    ("x {: onclick=alert(1) .c #i }", None),
    ("*x* {onclick=alert(1)}", "x {onclick=alert(1)}", ["em"]),
    ("x\\{onclick=alert(1)}", None),
    ("a\\|b", None),
    ("a\\\\|b", None),
    ("a|b", None),
    ("ends in a backslash\\", None),
    ("&#124; &lt;b&gt;", None),
    ("one ` tick", None),
    ("``a`", None),
    ("`a\\`|b`", None),
    ("`x`{onclick=alert(1)}", "x{onclick=alert(1)}", ["code"]),
    ("`a|b` and `{x}`", "a|b and {x}", ["code", "code"]),
    ("`x {onclick=alert(1)}`", "x {onclick=alert(1)}", ["code"]),
    ("<b onclick=alert(1)>b</b>", None),
]


def test_no_cell_text_becomes_an_attribute_list_or_splits_a_cell():
    # Each attack in the first two of three columns, so a backtick in one would pair with the other's.
    table = Table(["a", "b", "n"], [[text, text, 1] for text, *_ in CELL_ATTACKS])
    parsed = _Cells()
    parsed.feed(_html(to_markdown([table])))
    assert not [a for a in parsed.attrs if a[0].startswith("on") or a[0] in ("id", "class")]
    body = parsed.rows[1:]
    assert len(body) == len(CELL_ATTACKS) and all(len(row) == 3 for row in body)
    for (text, shown, *tags), row in zip(CELL_ATTACKS, body, strict=True):
        for attrs, content in row[:2]:
            assert content == (text if shown is None else shown), text
            assert attrs == [(t, None) for t in (tags[0] if tags else [])], text


def test_the_probe_page_shows_a_hostile_repository_as_text():
    ci = [1.0, 2.0]
    bucket = {"median_ppl": 1.5, "token_share": 0.5, "n": 1}
    checkpoint = {
        "name": "<b>cp</b>",
        "token_weighted_ppl": 1.5,
        "token_weighted_ppl_ci95": ci,
        "median_ppl": 1.5,
        "median_ppl_ci95": ci,
        "mean_ppl": 1.5,
        "n_ppl_gt_10": 0,
        "worst": {"ppl": 3.0, "repo": LINK},
        "buckets": {label: bucket for label, *_ in BUCKETS},
    }
    table = {"checkpoints": [checkpoint], "n_common": 1, "base": "cp", "reference": None}
    html = _html(to_markdown(probe_blocks(table)))
    assert "javascript:" in html and 'href="javascript:' not in html and "<a " not in html and "<b>" not in html
