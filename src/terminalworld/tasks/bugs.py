"""One-token bugs in real functions, as SWE-smith injects them: a flipped comparison, an off-by-one,
a wrong operator or constant, swapped arguments, a dropped branch.

Each bug is a minimal textual edit of the original source (the operator, the constant, the two
argument spans, or the lines of one `if` statement), so its diff is one or a few lines that look
like a human slip. Every edit is verified by re-parsing: the edited module must parse to exactly
the original tree with that one node changed, or the candidate is discarded.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator
from dataclasses import dataclass

KINDS = ("flip_comparison", "off_by_one", "wrong_operator", "wrong_constant", "swapped_arguments", "dropped_branch")

_FLIP = {
    ast.Lt: (ast.LtE, "<", "<="),
    ast.LtE: (ast.Lt, "<=", "<"),
    ast.Gt: (ast.GtE, ">", ">="),
    ast.GtE: (ast.Gt, ">=", ">"),
    ast.Eq: (ast.NotEq, "==", "!="),
    ast.NotEq: (ast.Eq, "!=", "=="),
    ast.In: (ast.NotIn, "in", "not in"),
    ast.NotIn: (ast.In, "not in", "in"),
    ast.Is: (ast.IsNot, "is", "is not"),
    ast.IsNot: (ast.Is, "is not", "is"),
}
_SWAP_BINOP = {
    ast.Add: (ast.Sub, "+", "-"),
    ast.Sub: (ast.Add, "-", "+"),
    ast.Mult: (ast.FloorDiv, "*", "//"),
    ast.FloorDiv: (ast.Mult, "//", "*"),
    ast.Div: (ast.FloorDiv, "/", "//"),
    ast.Mod: (ast.FloorDiv, "%", "//"),
}
_SWAP_BOOLOP = {ast.And: (ast.Or, "and", "or"), ast.Or: (ast.And, "or", "and")}


@dataclass(frozen=True)
class Bug:
    """One injected bug: its kind, the function it lives in, the first line it changes (1-based) and
    the whole module's source after the edit."""

    kind: str
    function: str
    line: int
    source: str


def _offsets(source: str) -> list[int]:
    """Character offset of the start of each line (index 0 is line 1)."""
    starts, pos = [], 0
    for line in source.splitlines(keepends=True):
        starts.append(pos)
        pos += len(line)
    return [*starts, pos]


def _span(node: ast.AST, starts: list[int]) -> tuple[int, int]:
    return starts[node.lineno - 1] + node.col_offset, starts[node.end_lineno - 1] + node.end_col_offset


def _replaced(func: ast.FunctionDef, target: ast.AST, new: ast.AST | None) -> str:
    """The dump of `func` with `target` (found by identity in a deep copy) replaced by `new`, or
    removed from its statement list when `new` is None."""
    memo: dict[int, object] = {}
    clone = copy.deepcopy(func, memo)
    twin = memo[id(target)]
    for parent in ast.walk(clone):
        for field, value in ast.iter_fields(parent):
            if value is twin:
                setattr(parent, field, new)
            elif isinstance(value, list) and any(v is twin for v in value):
                i = next(i for i, v in enumerate(value) if v is twin)
                value[i : i + 1] = [] if new is None else [new]
    return ast.dump(clone)


def _operator_edit(source: str, starts: list[int], left: ast.AST, right: ast.AST, old: str, new: str):
    """The edit that turns the operator text between `left` and `right` from `old` into `new`, or
    None when anything but brackets and blanks surrounds it there (a comment, a line break)."""
    lo, hi = _span(left, starts)[1], _span(right, starts)[0]
    gap = source[lo:hi]
    if "\n" in gap or " ".join(gap.strip(" ()").split()) != old:
        return None
    i = gap.index(old.split()[0])
    j = i + len(gap[i:].rstrip(" (")) if " " in old else i + len(old)
    return lo + i, lo + j, new


def _edits(
    func: ast.FunctionDef, source: str, starts: list[int]
) -> Iterator[tuple[str, ast.AST, ast.AST | None, list]]:
    """Every candidate bug in `func`'s body: (kind, node, replacement node, text edits)."""
    for node in (n for stmt in func.body for n in ast.walk(stmt)):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _FLIP:
            op, old, new = _FLIP[type(node.ops[0])]
            edit = _operator_edit(source, starts, node.left, node.comparators[0], old, new)
            yield "flip_comparison", node, ast.Compare(node.left, [op()], node.comparators), [edit]
        elif isinstance(node, ast.BinOp) and type(node.op) in _SWAP_BINOP:
            op, old, new = _SWAP_BINOP[type(node.op)]
            edit = _operator_edit(source, starts, node.left, node.right, old, new)
            yield "wrong_operator", node, ast.BinOp(node.left, op(), node.right), [edit]
        elif isinstance(node, ast.BoolOp) and len(node.values) == 2:
            op, old, new = _SWAP_BOOLOP[type(node.op)]
            edit = _operator_edit(source, starts, node.values[0], node.values[1], old, new)
            yield "wrong_operator", node, ast.BoolOp(op(), node.values), [edit]
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            lo, hi = _span(node, starts)
            yield "wrong_constant", node, ast.Constant(not node.value), [(lo, hi, str(not node.value))]
        elif isinstance(node, ast.Constant) and type(node.value) is int and node.lineno == node.end_lineno:
            value = node.value + 1 if node.value <= 1 else node.value - 1
            lo, hi = _span(node, starts)
            yield "off_by_one", node, ast.Constant(value), [(lo, hi, str(value))]
        elif (
            isinstance(node, ast.Call)
            and len(node.args) >= 2
            and not any(isinstance(a, ast.Starred) for a in node.args[:2])
        ):
            a, b = node.args[:2]
            (a0, a1), (b0, b1) = _span(a, starts), _span(b, starts)
            if source[a0:a1] != source[b0:b1]:
                new_call = ast.Call(node.func, [b, a, *node.args[2:]], node.keywords)
                yield "swapped_arguments", node, new_call, [(a0, a1, source[b0:b1]), (b0, b1, source[a0:a1])]
    for parent in (n for n in ast.walk(func) if hasattr(n, "body") and isinstance(n.body, list)):
        for stmt in parent.body:
            if isinstance(stmt, ast.If) and not stmt.orelse and len(parent.body) > 1:
                lo, hi = starts[stmt.lineno - 1], starts[stmt.end_lineno]
                if (
                    source[lo : lo + stmt.col_offset].strip() == ""
                    and source[_span(stmt, starts)[1] : hi].strip() == ""
                ):
                    yield "dropped_branch", stmt, None, [(lo, hi, "")]


def inject(source: str, tree: ast.Module, func: ast.FunctionDef) -> list[Bug]:
    """All verified one-edit bugs in module-level function `func` of `source` (parsed as `tree`), in
    source order: after the edit the module parses to the same statements, `func` changed in
    exactly the one node."""
    starts = _offsets(source)
    at = tree.body.index(func)
    rest = [ast.dump(n) for n in tree.body]
    bugs = []
    for kind, node, new, edits in _edits(func, source, starts):
        if any(e is None for e in edits):
            continue
        text = source
        for lo, hi, repl in sorted(edits, reverse=True):
            text = text[:lo] + repl + text[hi:]
        try:
            body = ast.parse(text).body
        except SyntaxError:
            continue
        dumps = [ast.dump(n) for n in body]
        if (
            len(dumps) == len(rest)
            and dumps[at] == _replaced(func, node, new)
            and dumps[:at] + dumps[at + 1 :] == (rest[:at] + rest[at + 1 :])
        ):
            bugs.append(Bug(kind, func.name, node.lineno, text))
    return bugs


def has_candidates(source: str, func: ast.FunctionDef) -> bool:
    """Whether `func` has any candidate edit at all (cheap: nothing is verified)."""
    return any(all(e is not None for e in edits) for *_, edits in _edits(func, source, _offsets(source)))


def fixed_lines(original: str, bug: Bug) -> list[str]:
    """The lines of `original` that `bug` changed or removed, which its fix writes back: those between
    the longest common run of leading lines and the longest of trailing ones."""
    old, new = original.splitlines(), bug.source.splitlines()
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    return old[head : len(old) - tail]
