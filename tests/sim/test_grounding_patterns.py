"""Grounding's search patterns are hostile input bounded on the host (`grounding.patterns`): a
catastrophic backtracking pattern, 500 nested groups and a 5,000-digit line number over a real
code tree neither hang nor raise; the translation of grep's BRE and ERE and find's globs keeps
grep's meaning, and what RE2 cannot express follows the documented literal rule."""

import subprocess
import sys

import pytest

from terminalworld.env.codetrees import discover_code_trees, materialize
from terminalworld.grounding import about, patterns, retrieval
from terminalworld.grounding.state import ShadowReader, baseline_of
from tests.paths import REPO_ROOT

CATASTROPHIC = r"grep -r '\(.*\)*QQQ' ."
NESTED_BRE = "grep -r '" + "\\(" * 500 + "def" + "\\)" * 500 + "' ."
NESTED_ERE = "grep -rE '" + "(" * 500 + "def" + ")" * 500 + "' ."


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    tree = next(t for t in discover_code_trees() if t.repo == "pypi/sniffio")
    return materialize(tree, tmp_path_factory.mktemp("patterns") / "repo")


def _blocks(repo, command: str) -> list[list[str]]:
    return retrieval.blocks(ShadowReader(repo), about.items(command), baseline_of(ShadowReader(repo)))


def test_a_catastrophic_pattern_over_a_real_tree_finishes(repo):
    # Python's `re` backtracks exponentially on every line; the child is a bound on a hang, not a
    # speed claim: RE2 answers in well under a second.
    code = (
        "import sys; from pathlib import Path; from terminalworld.grounding import about, retrieval;"
        "from terminalworld.grounding.state import ShadowReader;"
        "print(len(retrieval.blocks(ShadowReader(Path(sys.argv[1])), about.items(sys.argv[2]))))"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, str(repo), CATASTROPHIC], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the grep pattern held the process for a minute")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"  # no line holds QQQ


@pytest.mark.parametrize("command", [NESTED_BRE, NESTED_ERE])
def test_deeply_nested_groups_are_a_search_not_an_error(repo, command):
    found = _blocks(repo, command)
    expected = sorted(
        str(p.relative_to(repo))
        for p in repo.rglob("*")
        if p.is_file() and ".git" not in p.parts and b"def" in p.read_bytes()
    )
    assert [b[0].removeprefix("==> ").split(" ")[0] for b in found] == expected
    assert all("def" in line for b in found for line in b[1:])


def test_huge_line_numbers_are_past_the_end_not_an_error(repo):
    digits = "9" * 5000
    for command in (f"sed -n '{digits}p' sniffio/_impl.py", f"head -n {digits} sniffio/_impl.py", f"tail -{digits} x"):
        retrieval.blocks(ShadowReader(repo), about.items(command))
    [block] = _blocks(repo, f"sed -n '{digits},$p' sniffio/_impl.py")
    assert block[1:] == []


def test_a_backreference_follows_the_literal_rule(tmp_path):
    (tmp_path / "a.txt").write_text("abab\n(ab)\\1 as typed\n")
    # RE2 has no backreferences: the pattern is searched as the text typed, documented in
    # `grounding.patterns` (grep itself would match line 1).
    [block] = _blocks(tmp_path, r"grep -E '(ab)\1' a.txt")
    assert block[1:] == ["2:(ab)\\1 as typed"]
    assert isinstance(
        patterns.grep([r"\(ab\)\1"], fixed=False, extended=False, fold=False, words=False), patterns.Literal
    )


def test_grep_and_find_keep_their_meaning(tmp_path):
    (tmp_path / "m.py").write_text("foo\nfoobar\nFOO(1)\naa\na+b\nx{2}\n")
    (tmp_path / "Read.MD").write_text("foo\n")

    def hits(command: str) -> list[str]:
        return [line for b in _blocks(tmp_path, command) for line in b[1:]]

    assert hits(r"grep '\<foo\>' m.py") == ["1:foo"]
    assert hits("grep -w foo m.py") == ["1:foo"]
    assert hits("grep -i 'foo(' m.py") == ["3:FOO(1)"]  # BRE: a bare ( is literal
    assert hits(r"grep 'a\{2\}' m.py") == ["4:aa"]
    assert hits("grep 'a+b' m.py") == ["5:a+b"]
    assert hits("grep -E 'a+$' m.py") == ["4:aa"]
    assert hits(r"grep -E 'x\{2\}' m.py") == ["6:x{2}"]
    assert hits("grep -F 'x{2}' m.py") == ["6:x{2}"]
    assert hits("grep -e nothing -e foobar m.py") == ["2:foobar"]
    assert hits("grep -r --include='*.py' foo .") == ["1:foo", "2:foobar"]
    assert hits("find . -iname '*.md'") == ["Read.MD"]
    assert hits("find . -name '[!R]*'") == ["m.py"]
    assert hits("find . -name '[a'") == []  # an unclosed class is a literal name


def test_the_project_tree_searches_in_bounded_time():
    # Many files, long lines: the nested pattern compiles once and every line is searched.
    found = retrieval.blocks(ShadowReader(REPO_ROOT / "src"), about.items(NESTED_ERE))
    assert len(found) == retrieval.MAX_REACHED
