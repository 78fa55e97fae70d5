"""The project needs nothing beside its clone: every path the tests and benchmarks build from their
own location stays inside the repository, and the fixtures there are the files their README names."""

import ast
import hashlib
import re
from pathlib import Path

import pytest

from tests.paths import FIXTURES, REPO_ROOT

SOURCES = sorted(
    p for folder in ("tests", "benchmarks", "scripts", "experiments") for p in (REPO_ROOT / folder).rglob("*.py")
)


def _file_relative_paths(path: Path) -> list[tuple[int, Path]]:
    """Every path `path`'s code derives from its own location (`Path(__file__)`, `.resolve()`,
    `.parent`, `.parents[k]`, `/ "name"`, and module names bound to such paths), resolved."""
    tree = ast.parse(path.read_text())
    names: dict[str, Path] = {}
    found: list[tuple[int, Path]] = []

    def value(node: ast.AST) -> Path | None:
        match node:
            case ast.Call(func=ast.Name(id="Path"), args=[ast.Name(id="__file__")]):
                return path
            case ast.Call(func=ast.Attribute(attr="resolve" | "absolute", value=inner), args=[]):
                return value(inner)
            case ast.Attribute(attr="parent", value=inner):
                base = value(inner)
                return None if base is None else base.parent
            case ast.Subscript(value=ast.Attribute(attr="parents", value=inner), slice=ast.Constant(value=int(k))):
                base = value(inner)
                return None if base is None else base.parents[k]
            case ast.BinOp(op=ast.Div(), left=left, right=ast.Constant(value=str(part))):
                base = value(left)
                return None if base is None else base / part
            case ast.Name(id=name):
                return names.get(name)
        return None

    for node in ast.walk(tree):
        single = isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        if single and (p := value(node.value)) is not None:
            names[node.targets[0].id] = p
    for node in ast.walk(tree):
        if isinstance(node, ast.expr) and not isinstance(node, ast.Name) and (p := value(node)) is not None:
            found.append((node.lineno, p))
    return found


def _outside(p: Path) -> bool:
    return not Path(*p.parts).resolve().is_relative_to(REPO_ROOT)


def test_the_path_resolver_sees_a_path_outside_the_repository(tmp_path):
    src = tmp_path / "tests" / "probe.py"
    src.parent.mkdir()
    src.write_text(
        'from pathlib import Path\nHERE = Path(__file__).resolve().parent\nX = HERE.parent.parent / "shared"\n'
    )
    resolved = [p for _, p in _file_relative_paths(src)]
    assert tmp_path.parent / "shared" in resolved


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_no_path_leaves_the_repository(source):
    outside = [f"line {n}: {p}" for n, p in _file_relative_paths(source) if _outside(p)]
    assert not outside, f"{source.relative_to(REPO_ROOT)} reaches outside the repository: {outside}"
    text = source.read_text()
    assert not re.search(r"""["']\.\./""", text), f"{source.relative_to(REPO_ROOT)}: a path starting with ../"
    assert not re.search(r"""["']/work/""", text), f"{source.relative_to(REPO_ROOT)}: an absolute machine path"


def test_the_fixtures_are_the_files_their_readme_names():
    """Each file is listed with its size and SHA-256, both matching the file byte for byte; where the
    README gives a blob, git's hash of the file matches too."""
    readme = (FIXTURES / "README.md").read_text()
    # A row without a well-formed sha256 cell does not match, so its file counts as unlisted below.
    row = r"^\| `([^`]+)` \| ([\d,]+) \| `([0-9a-f]{64})` \|(.*)$"
    rows = {m[0]: m[1:] for m in re.findall(row, readme, flags=re.M)}
    files = sorted(
        str(p.relative_to(FIXTURES)) for p in FIXTURES.rglob("*") if p.is_file() and p != FIXTURES / "README.md"
    )
    assert sorted(rows) == files, "every data file needs a row: | `file` | bytes | `sha256` | ..."
    for name, (size, sha256, rest) in rows.items():
        data = (FIXTURES / name).read_bytes()
        assert len(data) == int(size.replace(",", "")), name
        assert hashlib.sha256(data).hexdigest() == sha256, name
        blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        for prefix in re.findall(r"blob `([0-9a-f]{8,40})", rest):
            assert blob.startswith(prefix), name
