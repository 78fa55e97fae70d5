"""The package's shape: no import cycle between modules, small modules, docstrings on the public API."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "terminalworld"


def _module(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """terminalworld modules imported anywhere in the file (function-level imports included)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("terminalworld"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                out.add(candidate if (SRC.parent / (candidate.replace(".", "/") + ".py")).exists() else node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("terminalworld")}
    return out


def test_no_import_cycle():
    graph = {_module(p): _imports(p) - {_module(p)} for p in SRC.rglob("*.py")}
    state: dict[str, int] = {}

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*stack[stack.index(d) :], d]))
            if d in graph and not state.get(d):
                visit(d, [*stack, d])
        state[m] = 2

    for m in sorted(graph):
        if not state.get(m):
            visit(m, [m])


def test_modules_stay_small():
    sizes = {p.relative_to(SRC).as_posix(): len(p.read_text().splitlines()) for p in SRC.rglob("*.py")}
    assert {m: n for m, n in sizes.items() if n > 450} == {}


def test_public_functions_and_classes_have_docstrings():
    missing = []

    def check(body, where: Path) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_"):
                if ast.get_docstring(node) is None:
                    missing.append(f"{where.relative_to(SRC)}:{node.lineno} {node.name}")
                if isinstance(node, ast.ClassDef):
                    check(node.body, where)

    for p in SRC.rglob("*.py"):
        check(ast.parse(p.read_text()).body, p)
    assert missing == []
