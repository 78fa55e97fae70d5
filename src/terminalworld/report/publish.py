"""The docs site as an artifact: the result pages of report artifacts generated into a copy of
the project's docs (`report.site`), built with `mkdocs build --strict`, and optionally published
with Marin's `publish_site`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from fsspec.core import url_to_fs

import terminalworld
from terminalworld.core.records import write_json
from terminalworld.errors import InputError
from terminalworld.report.site import GENERATED, DocsBuildConfig, build_docs


@dataclass(frozen=True)
class SiteConfig:
    """The report artifacts whose pages the site shows, the output folder, the repository URL of
    the Reproduce links, whether this is a release, and where to publish ({user, slug, title,
    version}; None: not published)."""

    reports: list[str]
    out: str
    repo_url: str | None = None
    release: bool = False
    publish: dict[str, str] | None = None


def build_site(cfg: SiteConfig) -> None:
    """Generate the result pages of the reports into a copy of the project's docs, build it with
    `mkdocs build --strict` (a broken link or a missing image fails the step) into `{out}/site`, and
    with `publish` upload it with Marin's `publish_site`, writing the published URL and location to
    `{out}/published.json`. Raises `InputError` outside a source checkout (no mkdocs.yml beside the
    package) or when the strict build fails."""
    reports, out, repo_url, release, publish = cfg.reports, cfg.out, cfg.repo_url, cfg.release, cfg.publish
    root = Path(terminalworld.__file__).resolve().parents[2]
    if not (root / "mkdocs.yml").is_file():
        raise InputError(f"the docs site builds from a source checkout: no mkdocs.yml in {root}")
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(root / "mkdocs.yml", tmp)
        shutil.copytree(root / "docs", f"{tmp}/docs", ignore=shutil.ignore_patterns(*GENERATED, "snapshots"))
        build_docs(
            DocsBuildConfig(results=reports, out=f"{tmp}/docs", repo_url=repo_url, release=release, checkout=str(root))
        )
        command = [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-q",
            "-f",
            f"{tmp}/mkdocs.yml",
            "-d",
            f"{tmp}/site",
        ]
        done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
        if done.returncode != 0:
            raise InputError(f"mkdocs build --strict failed: {done.stderr.strip().splitlines()[-1:]}")
        fs, path = url_to_fs(os.path.join(out, "site"))
        fs.put(f"{tmp}/site", path, recursive=True)
        if publish:
            from marin.publish.sites import publish_site

            site = publish_site(Path(tmp, "site"), **publish)
            write_json(os.path.join(out, "published.json"), {"url": site.url, "uri": site.uri, "version": site.version})
