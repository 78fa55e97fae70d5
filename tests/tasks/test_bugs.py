import ast
import difflib

import pytest

from terminalworld.tasks.bugs import KINDS, inject

SOURCE = '''def f(a, b):
    """A docstring with 1 < 2 in it."""
    if a < b:
        return 1
    x = max(a, b) + 2 * a
    if a is not None and b:
        x -= 1
    return x >= 0 or True  # 1 + 1
'''


def _changes(before: str, after: str) -> list[str]:
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    return [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]


def test_every_kind_is_one_minimal_edit():
    tree = ast.parse(SOURCE)
    found = {(b.kind, tuple(_changes(SOURCE, b.source))) for b in inject(SOURCE, tree, tree.body[0])}
    expected = {
        ("flip_comparison", ("-    if a < b:", "+    if a <= b:")),
        ("off_by_one", ("-        return 1", "+        return 2")),
        ("wrong_operator", ("-    x = max(a, b) + 2 * a", "+    x = max(a, b) - 2 * a")),
        ("swapped_arguments", ("-    x = max(a, b) + 2 * a", "+    x = max(b, a) + 2 * a")),
        ("wrong_operator", ("-    x = max(a, b) + 2 * a", "+    x = max(a, b) + 2 // a")),
        ("off_by_one", ("-    x = max(a, b) + 2 * a", "+    x = max(a, b) + 1 * a")),
        ("wrong_operator", ("-    if a is not None and b:", "+    if a is not None or b:")),
        ("flip_comparison", ("-    if a is not None and b:", "+    if a is None and b:")),
        ("off_by_one", ("-        x -= 1", "+        x -= 2")),
        ("wrong_operator", ("-    return x >= 0 or True  # 1 + 1", "+    return x >= 0 and True  # 1 + 1")),
        ("flip_comparison", ("-    return x >= 0 or True  # 1 + 1", "+    return x > 0 or True  # 1 + 1")),
        ("wrong_constant", ("-    return x >= 0 or True  # 1 + 1", "+    return x >= 0 or False  # 1 + 1")),
        ("off_by_one", ("-    return x >= 0 or True  # 1 + 1", "+    return x >= 1 or True  # 1 + 1")),
        ("dropped_branch", ("-    if a < b:", "-        return 1")),
        ("dropped_branch", ("-    if a is not None and b:", "-        x -= 1")),
    }
    assert found == expected
    assert {kind for kind, _ in found} == set(KINDS)


@pytest.mark.parametrize(
    "source",
    [
        "def f(a, b):\n    return (a <  # odd\n        b)\n",  # a comment between the operands
        "def f(a):\n    if a:\n        return 1\n",  # the only statement: dropping it would not parse
    ],
)
def test_edits_that_cannot_be_made_minimally_are_skipped(source):
    tree = ast.parse(source)
    kinds = [b.kind for b in inject(source, tree, tree.body[0])]
    assert "flip_comparison" not in kinds and "dropped_branch" not in kinds


def test_each_bug_changes_exactly_one_node_of_the_parsed_module():
    tree = ast.parse(SOURCE)
    for bug in inject(SOURCE, tree, tree.body[0]):
        new = ast.parse(bug.source)
        before, after = list(ast.walk(tree)), list(ast.walk(new))
        assert ast.dump(new) != ast.dump(tree)
        if bug.kind != "dropped_branch":
            assert len(before) == len(after)
