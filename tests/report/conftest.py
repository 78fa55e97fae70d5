"""The docs site built once from the committed snapshots, in a copy of the docs outside the tree."""

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.paths import REPO_ROOT

SNAPSHOT = REPO_ROOT / "docs" / "snapshots" / "local-demo"
STRICT_BUILD_SECONDS = 60


@dataclass(frozen=True)
class BuiltSite:
    """A docs copy (`root/mkdocs.yml`, `root/docs`) with generated pages, and its HTML in `site`."""

    root: Path
    site: Path
    seconds: float  # generating the pages plus the strict build


def copy_docs(dest: Path) -> Path:
    """mkdocs.yml and the hand-written docs (with the snapshot) copied to `dest`; returns `dest/docs`."""
    from terminalworld.report.site import GENERATED

    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO_ROOT / "mkdocs.yml", dest)
    shutil.copytree(REPO_ROOT / "docs", dest / "docs", ignore=shutil.ignore_patterns(*GENERATED))
    return dest / "docs"


def mkdocs_build(root: Path, site: Path) -> subprocess.CompletedProcess:
    """`mkdocs build --strict` of the docs copy at `root` into `site`."""
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(root / "mkdocs.yml"), "-d", str(site)]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> BuiltSite:
    """The site as a fresh clone builds it: `docs build` with no flags (the committed snapshots), then a
    strict build."""
    from terminalworld.report.site import DocsBuildConfig, build_docs

    root = tmp_path_factory.mktemp("docs-site")
    docs = copy_docs(root)
    start = time.monotonic()
    build_docs(DocsBuildConfig(out=str(docs), checkout=str(REPO_ROOT)))
    done = mkdocs_build(root, root / "site")
    assert done.returncode == 0, done.stderr[-3000:]
    return BuiltSite(root=root, site=root / "site", seconds=time.monotonic() - start)
