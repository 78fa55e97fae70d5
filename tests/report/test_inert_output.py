"""Trajectory, corpus and model text reaches an operator's terminal and the docs site inert: on a
terminal, `show-mask` shows a trajectory's OSC 52 (clipboard), title and clear-screen sequences
escaped while its own highlight colours still work; a page cell shows a repository named like a
`javascript:` link, raw HTML or an attribute list as typed, never as markup."""

import json
import sys

import markdown

from terminalworld.core.terminal import for_terminal, inert
from terminalworld.eval.metrics import BUCKETS
from terminalworld.report.pages import Page
from terminalworld.report.probe import probe_blocks
from terminalworld.report.tables import Table, cell, to_markdown
from terminalworld.train.maskview import ShowMaskConfig, show_mask
from tests.paths import FIXTURES

HOSTILE = "\x1b]52;c;ZXZpbA==\x07\x1b]0;pwned\x07\x1b[2J\x1b[3Jgone"
LINK = "[x](javascript:alert(1))"
SITE_EXTENSIONS = ["tables", "attr_list", "md_in_html", "admonition"]  # mkdocs.yml's, those that parse markup


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
    return markdown.markdown(text, extensions=SITE_EXTENSIONS)


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
    assert cell(LINK) == "[x]&#40;javascript:alert(1))" and cell("[x\\](y)") == "[x\\]&#40;y)"
    assert cell("1768.4 [1500, 2000]") == "1768.4 [1500, 2000]" and cell("`{MARIN_PREFIX}/x`") == "`{MARIN_PREFIX}/x`"


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
