"""Real source trees available offline: the pure-Python distributions installed beside us that
`code_trees.txt` lists (a fixed list, so a new tool in the environment never changes a corpus).

Each distribution becomes one repository, `pypi/<name>`: its importable files copied into a fresh
git repository with one commit whose author, dates and file times are fixed, so the same
distribution always gives the same tree, hashes and listings. The uv lock pins the versions.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from terminalworld.errors import InputError

FIXED_EPOCH = 1704067200  # 2024-01-01T00:00:00Z: every file time in a recorded tree
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "terminalworld",
    "GIT_AUTHOR_EMAIL": "terminalworld@example.invalid",
    "GIT_COMMITTER_NAME": "terminalworld",
    "GIT_COMMITTER_EMAIL": "terminalworld@example.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "LC_ALL": "C",
    "TZ": "UTC",
}
_SKIP_PARTS = ("__pycache__", ".dist-info", ".egg-info", ".data")
_TEXT_SUFFIXES = (".py", ".pyi", ".txt", ".md", ".rst", ".cfg", ".toml", ".json", ".ini", ".typed", ".yaml", ".yml")


@dataclass(frozen=True)
class CodeTree:
    """One installed distribution as a repository: its name `pypi/<name>`, its version, and its
    files, sorted by path inside the repo."""

    repo: str
    version: str
    files: tuple[tuple[Path, str], ...]  # (source path, path inside the repo)

    @property
    def py_files(self) -> list[str]:
        """Paths inside the repo of the tree's `.py` files, in the tree's sorted order."""
        return [rel for _, rel in self.files if rel.endswith(".py")]


def allowed_code_trees() -> list[str]:
    """The distribution names listed in `code_trees.txt` beside this module."""
    text = (Path(__file__).parent / "code_trees.txt").read_text()
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def discover_code_trees(min_py_files: int = 3, max_files: int = 400, max_bytes: int = 4 << 20) -> list[CodeTree]:
    """The listed pure-Python distributions of this environment (no compiled extension), sorted by
    name; raises `InputError` when a listed one is missing, since the corpus would differ. Found once
    per process (reading every package's metadata takes seconds, and a pipeline's recorder, task
    makers, probes and grounders each ask), as a process's installed packages do not change."""
    return list(_discover(min_py_files, max_files, max_bytes))


@cache
def _discover(min_py_files: int, max_files: int, max_bytes: int) -> tuple[CodeTree, ...]:
    allowed = allowed_code_trees()
    wanted = set(allowed)
    trees: dict[str, CodeTree] = {}
    for dist in md.distributions():
        name = dist.metadata["Name"]
        if not name:
            continue
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key not in wanted or key in trees:
            continue
        # Read a distribution's file list only when it is wanted, and once: `dist.files` parses its
        # RECORD and stats every file each time (seconds, over all of an environment's packages).
        listed = dist.files
        if listed is None or any(str(f).endswith((".so", ".pyd", ".dylib")) for f in listed):
            continue
        files = []
        size = 0
        for f in listed:
            rel = str(f)
            if rel.startswith("..") or any(p in rel for p in _SKIP_PARTS) or not rel.endswith(_TEXT_SUFFIXES):
                continue
            src = Path(dist.locate_file(f))
            if src.is_file():
                files.append((src, rel))
                size += src.stat().st_size
        if (
            sum(rel.endswith(".py") for _, rel in files) >= min_py_files
            and len(files) <= max_files
            and size <= max_bytes
        ):
            trees[key] = CodeTree(f"pypi/{key}", dist.version, tuple(sorted(files, key=lambda x: x[1])))
    missing = [k for k in allowed if k not in trees]
    if missing:
        raise InputError(
            f"code trees {', '.join(missing)} are not installed as pure-Python distributions; "
            "run `uv sync` (the recorded corpus depends on every listed tree)"
        )
    return tuple(trees[k] for k in sorted(allowed))


def git(repo_dir: str | Path, *args: str) -> str:
    """Run `git ARGS` in `repo_dir` with fixed identity, dates, locale and no system or global
    config; returns stdout. Raises `subprocess.CalledProcessError` on a non-zero exit."""
    return subprocess.run(
        ["git", *args], cwd=repo_dir, env={**os.environ, **_GIT_ENV}, check=True, capture_output=True, text=True
    ).stdout


def normalize_times(root: str | Path) -> None:
    """Set every file time under `root` to FIXED_EPOCH, so listings do not depend on the clock."""
    for folder, _dirs, files in os.walk(root):
        for name in files:
            p = os.path.join(folder, name)
            if not os.path.islink(p):
                os.utime(p, (FIXED_EPOCH, FIXED_EPOCH))
        os.utime(folder, (FIXED_EPOCH, FIXED_EPOCH))


def materialized_bytes(tree: CodeTree) -> int:
    """At least what `materialize` writes, as a disk cap counts it: the working tree and git's copy of
    it, each name a page, plus git's own few files."""
    return 2 * sum(os.path.getsize(src) + 4096 for src, _ in tree.files) + (1 << 20)


def materialize(tree: CodeTree, dest: str | Path) -> Path:
    """Copy `tree` into `dest` as a git repository with one fixed commit. Files are created in
    sorted order so directory listings of order-preserving file systems are reproducible."""
    dest = Path(dest)
    dest.mkdir(parents=True)
    for src, rel in tree.files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", f"Import {tree.repo.split('/', 1)[1]} {tree.version}")
    normalize_times(dest)
    return dest


def module_name(rel: str) -> str | None:
    """The importable name of repository file `rel` (`a/b/__init__.py` → `a.b`), or None."""
    parts = rel[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) if parts and all(p.isidentifier() for p in parts) else None
