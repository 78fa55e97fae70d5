"""`terminalworld docs build`: the docs site's generated pages, written as plain Markdown.

Result pages come from report artifacts (read through fsspec: local or `gs://`), one page per report
type, each artifact ending in a Reproduce section built from its `.artifact.json` provenance; so do
the API reference and the benchmark figures. A report type is one renderer and its `REPORT_TYPES` entry.

With no `--results`, the pages come from the committed snapshots (`docs/snapshots/*/`), and the
command's output says so. Pages name an artifact by its logical path, `{MARIN_PREFIX}/{name}/{version}`
(or its `gs://` path), never by the folder of the machine that built it.
"""

from __future__ import annotations

import ast
import json
import os
import pkgutil
import posixpath
import shlex
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from fsspec.core import url_to_fs as _fs

import terminalworld
from terminalworld.core.records import exists
from terminalworld.errors import InputError
from terminalworld.options import option
from terminalworld.report.pages import (
    LOGICAL_PREFIX,
    RECORD,
    REPORT_TYPES,
    Artifact,
    Page,
    is_local,
    prefix_of,
    read_artifact,
    upstream,
)
from terminalworld.report.snapshot import SNAPSHOT_MANIFEST, snapshot
from terminalworld.report.tables import Heading, Table, cell

GENERATED = ("results", "reference", "benchmarks")  # folders under --out that every build replaces
SUBPACKAGES = ("core", "env", "corpus", "tasks", "train", "eval", "agent", "sim", "report", "pipeline")
SNAPSHOTS = "snapshots"  # under the docs folder: the committed snapshots a build without --results uses
TABLES = "results/tables.json"  # each generated page's tables, by first-column labels
MARKER = ".generated"  # in each generated folder: written by this command


@dataclass(frozen=True)
class DocsBuildConfig:
    """Where the generated pages come from and where they go."""

    results: list[str] = option(
        [],
        help="report artifact or prefix holding some (local, gs://); default: the committed snapshots",
    )
    out: str = option("docs", help="docs folder; its results/, reference/ and benchmarks/ are replaced")
    repo_url: str | None = option(None, help="repository of the Reproduce links (default: mkdocs.yml extra.repo_url)")
    release: bool = option(False, help="refuse dirty builds and commits missing from --checkout")
    snapshot: str | None = option(None, help="copy the results' small files into DIR; build from it")
    checkout: str = option(".", help="git checkout holding the Reproduce commits and benchmarks/results")


def shown_path(path: str | None, record: dict[str, Any] | None) -> str:
    """How a page names an artifact's folder: a remote path as it is, a local one by its logical
    path under `{MARIN_PREFIX}` (never the building machine's folder), else by `name@version`."""
    if path and not is_local(path):
        return path
    if record and path and prefix_of(path, record) is not None:
        return f"{LOGICAL_PREFIX}/{record.get('name')}/{record.get('version')}"
    return f"{record.get('name')}@{record.get('version')}" if record else "—"


def find_reports(location: str) -> list[Artifact]:
    """The report artifact at `location`, or every registered type's `{name}/{version}` under it (a
    prefix, a snapshot). Raises `InputError` when there is none, or one of a type without a page."""
    if exists(posixpath.join(location.rstrip("/"), RECORD)):
        found = [read_artifact(location)]
    else:
        fs, p = _fs(location)
        scheme = location.split("://")[0] + "://" if "://" in location else ""
        hits = sorted(h for name in REPORT_TYPES for h in fs.glob(posixpath.join(p, name, "*", RECORD)))
        found = [read_artifact(scheme + posixpath.dirname(h)) for h in hits]
    if not found:
        raise InputError(f"{location}: no report artifact here (known types: {', '.join(REPORT_TYPES)})")
    for a in found:
        if a.record.get("name") not in REPORT_TYPES:
            raise InputError(f"{a.path}: no page renders {a.record.get('name')!r} artifacts")
    return found


def _git(checkout: str, *args: str) -> str | None:
    done = subprocess.run(["git", "-C", checkout, *args], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def locked_versions(checkout: str, commit: str) -> dict[str, str]:
    """The project's direct dependencies and their versions in `uv.lock` at `commit` ({} when unreadable)."""
    packages = tomllib.loads(_git(checkout, "show", f"{commit}:uv.lock") or "").get("package", [])
    versions: dict[str, set[str]] = {}
    for p in packages:
        versions.setdefault(p["name"], set()).add(p.get("version", "?"))
    project = next((p for p in packages if p.get("source", {}).get("editable") == "."), {})
    names = sorted({d["name"] for d in project.get("dependencies", [])})
    return {n: " / ".join(sorted(versions.get(n, {"?"}))) for n in names}


def reproduce(page: Page, report: Artifact, repo_url: str, checkout: str, release: bool) -> None:
    """Append the Reproduce section of `report`. With `release`, raise `InputError` for a dirty
    tree anywhere in its graph, or a commit missing from the checkout's history."""
    rec, prov = report.record, report.record.get("provenance") or {}
    commit, graph = prov.get("base_commit", ""), upstream(report)
    dirty = [d for d, _, r in [(report.ident, "", rec), *graph] if r and (r.get("provenance") or {}).get("dirty")]
    known = bool(commit) and _git(checkout, "cat-file", "-e", f"{commit}^{{commit}}") is not None
    if release and dirty:
        raise InputError(f"{report.path}: built from a dirty tree ({', '.join(dirty)}); --release wants clean builds")
    if release and not known:
        raise InputError(f"{report.path}: commit {commit or '(none)'} is not in the history of {checkout}")
    if dirty:
        page.add('!!! warning "Built from a dirty tree"\n', f"    {', '.join(dirty)}: uncommitted changes on top of")
        page.add(f"    the commit below (tree `{prov.get('tree_hash')}`); the commit alone does not reproduce it.\n")
    if not known:
        page.add(f'!!! warning "Unknown commit"\n\n    `{commit}` is not in the history of this checkout.\n')
    argv, prefix = list(prov.get("command_line") or ["?"]), prefix_of(rec.get("output_path", ""), rec)
    # A script ran as `python x.py`, a console script by its name; both under the prefix they wrote to.
    # A local prefix is the building machine's folder: the rerun writes to the experiments' default.
    run = ["python", *argv] if argv[0].endswith(".py") else [os.path.basename(argv[0]), *argv[1:]]
    remote = prefix is not None and not is_local(prefix)
    rerun = (f"MARIN_PREFIX={shlex.quote(prefix)} " if remote else "") + shlex.join(["uv", "run", *run])
    page.add(f"""### Reproduce

Commit [`{commit}`]({repo_url}/tree/{commit}) ({"dirty" if prov.get("dirty") else "clean"} tree), built {prov.get("created_at") or "at an unrecorded time"}.
Command line as recorded: `{shlex.join(argv)}`. To run it again:

```bash
git clone {repo_url} terminalworld && cd terminalworld
git checkout {commit}
{rerun}
```

This artifact: `{report.ident}` at `{shown_path(rec.get("output_path"), rec)}` (fingerprint `{rec.get("fingerprint")}`). Upstream steps:
""")
    rows = []
    for dep, path, r in graph:
        p = (r or {}).get("provenance") or {}
        state = p.get("base_commit", "?") + (" (dirty)" if p.get("dirty") else "") if r else "record not reachable"
        rows.append([f"`{dep}`", f"`{shown_path(path, r)}`", state, f"`{(r or {}).get('fingerprint', '?')}`"])
    page.put(Table(["step@version", "output", "commit", "fingerprint"], rows), level=2)
    lock = f"[`uv.lock` at `{commit}`]({repo_url}/blob/{commit}/uv.lock)"
    page.add(f"Package versions: every package is pinned by {lock}.", "")
    if versions := locked_versions(checkout, commit):
        page.add('<details class="info" markdown="1"><summary>Direct dependencies in that uv.lock</summary>', "")
        page.put(Table(["package", "version"], [list(kv) for kv in versions.items()]), level=2)
        page.add("</details>", "")


def results_pages(reports: list[Artifact], cfg: DocsBuildConfig, repo_url: str) -> list[Page]:
    """One page per registered report type, results or not, its artifacts newest version first."""
    pages = []
    for kind in REPORT_TYPES.values():
        page = Page(cfg.out, f"results/{kind.slug}.md")
        page.add(f"# {kind.title}", "", f"Generated from report artifacts; [what it measures](../{kind.slug}.md).", "")
        mine = [r for r in reports if r.record["name"] == kind.artifact]
        if not mine:
            empty = kind.empty or f"No `{kind.artifact}` artifact was given to this build."
            page.add('!!! note "No results yet"', "", f"    {empty}", "")
        for k, report in enumerate(sorted(mine, key=lambda r: (r.record["version"], r.path), reverse=True)):
            version = report.record["version"]
            page.add(f"## {version}", "", f"From `{shown_path(report.record.get('output_path'), report.record)}`.", "")
            start = len(page.lines)
            kind.render(report, page, f"{kind.slug}/{version}" + (f"-{k}" if k else ""))
            reproduce(page, report, repo_url, cfg.checkout, cfg.release)
            page.lines[start:] = [_without_machine_paths(line, report) for line in page.lines[start:]]
        pages.append(page)
    return pages


def _without_machine_paths(line: str, report: Artifact) -> str:
    """`line` with the local prefixes the report was built in or read from named logically (a report's
    own Markdown may quote paths)."""
    recorded = prefix_of(report.record.get("output_path", ""), report.record)
    for root in sorted({r for r in (recorded, report.root) if r and is_local(r)}, key=len, reverse=True):
        line = line.replace(root.rstrip("/") + "/", LOGICAL_PREFIX + "/")
    return line


def default_results(out: str) -> list[str]:
    """The committed snapshots under `{out}/snapshots/`; `InputError` when there is none."""
    found = sorted(str(p.parent) for p in Path(out, SNAPSHOTS).glob(f"*/{SNAPSHOT_MANIFEST}"))
    if not found:
        raise InputError(
            f"no --results given and no committed snapshot in {Path(out, SNAPSHOTS)}/*/{SNAPSHOT_MANIFEST}"
        )
    return found


def _is_leaf(value: Any) -> bool:
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return not any(isinstance(x, dict | list) for x in items)


def json_tables(page: Page, data: dict[str, Any], level: int) -> None:
    """A JSON document as tables: its scalars (flat dicts dotted, flat lists joined) in one, each list
    of records in its own, each nested section recursively, all under headings of `level`."""
    rows = [[k, v] for k, v in data.items() if not isinstance(v, dict | list)]
    rows += [[k, ", ".join(map(cell, v))] for k, v in data.items() if isinstance(v, list) and _is_leaf(v)]
    rows += [[f"{k}.{k2}", v2] for k, v in data.items() if isinstance(v, dict) and _is_leaf(v) for k2, v2 in v.items()]
    if rows:
        page.put(Table(["quantity", "value"], rows, "lr"), level=level)
    for k, v in data.items():
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            cols = [c for c in dict.fromkeys(c for x in v for c in x) if all(_is_leaf([x.get(c)]) for x in v)]
            page.put(Heading(k), Table(cols, [[x.get(c, "—") for c in cols] for x in v]), level=level)
        elif isinstance(v, dict) and not _is_leaf(v):
            page.add(f"{'#' * level} {k}", "")
            json_tables(page, v, min(level + 1, 6))


def benchmarks_page(cfg: DocsBuildConfig, repo_url: str) -> Page:
    """The benchmark figures (the checkout's `benchmarks/results/*.json` and plots), each with its
    script's own description and a Reproduce section pinned to the last commit of its figures."""
    page = Page(cfg.out, "benchmarks/index.md")
    page.add("# Benchmarks", "", "Generated from `benchmarks/results/*.json`: speed and memory against the write-up's")
    page.add("methods and peers, each measured by the script named in its Reproduce section.", "")
    for result in sorted(Path(cfg.checkout, "benchmarks", "results").glob("*.json")):
        script = result.parent.parent / f"{result.stem}.py"
        doc = ast.get_docstring(ast.parse(script.read_text())) if script.exists() else None
        paras = (doc or result.stem).split("\n\n")
        # The script's own usage line (`nice` allowed before it), else its path inside the checkout.
        runs = [p.strip() for p in paras if p.strip().removeprefix("nice ").startswith("uv run")]
        usage = next(iter(runs), f"uv run python benchmarks/{script.name}")
        page.add(f"## {result.stem}: {paras[0].strip()}", "", *[p for p in paras[1:] if "uv run" not in p], "")
        json_tables(page, json.loads(result.read_text()), 3)
        if (plot := result.with_suffix(".png")).exists():
            page.image(str(plot), plot.name, f"{result.stem} benchmark")
        rel = os.path.relpath(result.resolve(), Path(cfg.checkout).resolve())
        commit = (_git(cfg.checkout, "log", "-1", "--format=%h", "--", rel) or "").strip()
        dirty = not commit or bool((_git(cfg.checkout, "status", "--porcelain", "--", rel) or "").strip())
        if cfg.release and dirty:
            raise InputError(f"{result}: uncommitted figures; --release publishes committed ones only")
        state = "uncommitted changes: not reproducible from a commit" if dirty else "clean"
        link = f"[`{rel}`]({repo_url}/blob/{commit}/{rel}) at [`{commit}`]({repo_url}/tree/{commit}) ({state})"
        page.add("### Reproduce", "", f"Figures: {link}.", "", "```bash", f"git checkout {commit}", usage, "```", "")
    return page


def reference_pages(out: str) -> list[Page]:
    """One API page per subpackage, each module through mkdocstrings' `:::` directive."""
    index = Page(out, "reference/index.md")
    index.add("# API reference", "", "Generated from the docstrings, one page per subpackage:", "")
    index.add(*(f"- [`terminalworld.{s}`]({s}.md)" for s in SUBPACKAGES), "", "::: terminalworld.errors", "")
    pages = [index]
    for sub in SUBPACKAGES:
        page = Page(out, f"reference/{sub}.md")
        page.add(f"# terminalworld.{sub}", "", f"::: terminalworld.{sub}", "    options:", "      members: false")
        page.add("      show_root_heading: false", "")  # the package's docstring under the page title
        folder = Path(terminalworld.__file__).parent / sub
        modules = pkgutil.walk_packages([str(folder)], prefix=f"terminalworld.{sub}.")  # agent.harbor.agent too
        page.add(*(f"::: {m.name}\n" for m in sorted(modules, key=lambda m: m.name) if not m.ispkg))
        pages.append(page)
    return pages


def repo_url_of(cfg: DocsBuildConfig) -> str:
    """`--repo-url`, else `extra.repo_url` of the mkdocs.yml beside the docs folder (never the git
    remote: links name where the code is published); `InputError` when neither is set."""
    config = Path(cfg.out).resolve().parent / "mkdocs.yml"
    extra = (yaml.safe_load(config.read_text()) or {}).get("extra") or {} if config.exists() else {}
    if not (url := cfg.repo_url or extra.get("repo_url")):
        raise InputError(f"no repository URL: pass --repo-url or set extra.repo_url in {config}")
    return str(url).rstrip("/")


def build_docs(cfg: DocsBuildConfig) -> dict[str, Any]:
    """Write the generated pages under `cfg.out` and `results/tables.json` (each page's tables by
    first-column labels); returns what was written. Raises `InputError` for a missing or unknown
    artifact, and with `release` for a dirty build or one whose commit this checkout lacks."""
    if not os.path.isdir(cfg.out):
        raise InputError(f"{cfg.out}: no docs folder here")
    repo_url = repo_url_of(cfg)
    results = cfg.results or default_results(cfg.out)
    reports = [r for loc in results for r in find_reports(loc)]
    if cfg.snapshot:
        reports = snapshot(reports, cfg.snapshot)
    # Every page is rendered (and every --release check passed) before anything is replaced.
    pages = [*results_pages(reports, cfg, repo_url), *reference_pages(cfg.out), benchmarks_page(cfg, repo_url)]
    for name in GENERATED:
        folder = os.path.join(cfg.out, name)
        if os.path.exists(folder) and not os.path.exists(os.path.join(folder, MARKER)):
            raise InputError(f"{folder}: refusing to replace a folder this command did not write (no {MARKER})")
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        Path(folder, MARKER).write_text("written by `terminalworld docs build`; replaced by every build\n")
    for page in pages:
        page.write()
    Path(cfg.out, TABLES).write_text(json.dumps({p.relpath: p.tables for p in pages if p.tables}, indent=2) + "\n")
    source = "the committed snapshots" if not cfg.results else "--results"
    return {
        "built_from": f"{source}: {', '.join(results)}",
        "pages": [p.relpath for p in pages],
        "reports": [r.ident for r in reports],
        "snapshot": cfg.snapshot,
    }
