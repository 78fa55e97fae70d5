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
import gzip
import json
import os
import pkgutil
import posixpath
import re
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
from terminalworld.errors import InputError
from terminalworld.options import option
from terminalworld.report.pages import REPORT_TYPES, Artifact, Page, exists, read_json_at
from terminalworld.report.tables import Heading, Table, cell

RECORD = ".artifact.json"
GENERATED = ("results", "reference", "benchmarks")  # folders under --out that every build replaces
SUBPACKAGES = ("core", "env", "corpus", "tasks", "train", "eval", "agent", "sim", "report", "pipeline")
SNAPSHOT_MANIFEST = "snapshot.json"
SNAPSHOTS = "snapshots"  # under the docs folder: the committed snapshots a build without --results uses
LOGICAL_PREFIX = "{MARIN_PREFIX}"  # how a page names a local prefix
SNAPSHOT_MAX_BYTES = 2 << 20  # a snapshot is committed: a report's own files are small JSON and plots
# The rows a page's numbers are computed from travel with the snapshot, gzip-compressed: the files of
# these upstream artifacts (held-out rows, per-checkpoint scores at every depth, agent trials,
# simulator rows, probe rows). Budget, stated on docs/evaluation.md: 24 MiB compressed per snapshot.
# `sim-ppl-eval/` is the scores' name in snapshots committed before the probe's artifacts were renamed.
ROW_ARTIFACTS = ("heldout/", "probe-eval/", "sim-ppl-eval/", "agent-eval/", "sim-eval/", "terminalworld/probes")
ROW_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".txt", ".log", ".diff", ".patch")
SNAPSHOT_ROWS_BUDGET = 24 << 20
# Files the host writes about a Harbor job (not session text), whose machine paths are all renamed.
HOST_RECORDS = frozenset(
    {"config.json", "lock.json", "result.json", "job_spec.json", "harbor_result.json", "harbor.log"}
)
_MACHINE_PATH = re.compile(
    r"(?<![\w.~{}-])/(?:home|root|tmp|work|Users|mnt|private|var/folders|opt|srv)/[^\s`'\",)\]]*"
)
TABLES = "results/tables.json"  # each generated page's tables, by first-column labels
MARKER = ".generated"  # in each generated folder: written by this command


@dataclass(frozen=True)
class DocsBuildConfig:
    """Where the generated pages come from and where they go."""

    results: list[str] = option(
        [],
        metavar="DIR",
        help="report artifact or prefix holding some (local, gs://); default: the committed snapshots",
    )
    out: str = option("docs", help="docs folder; its results/, reference/ and benchmarks/ are replaced")
    repo_url: str | None = option(None, help="repository of the Reproduce links (default: mkdocs.yml extra.repo_url)")
    release: bool = option(False, help="refuse dirty builds and commits missing from --checkout")
    snapshot: str | None = option(None, metavar="DIR", help="copy the results' small files into DIR; build from it")
    checkout: str = option(".", help="git checkout holding the Reproduce commits and benchmarks/results")


def _prefix_of(path: str, record: dict[str, Any]) -> str | None:
    """The prefix an artifact folder sits in (`{prefix}/{name}/{version}`), if it does."""
    suffix = f"/{record.get('name')}/{record.get('version')}"
    return path.rstrip("/")[: -len(suffix)] if path.rstrip("/").endswith(suffix) else None


def _is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def shown_path(path: str | None, record: dict[str, Any] | None) -> str:
    """How a page names an artifact's folder: a remote path as it is, a local one by its logical
    path under `{MARIN_PREFIX}` (never the building machine's folder), else by `name@version`."""
    if path and not _is_local(path):
        return path
    if record and path and _prefix_of(path, record) is not None:
        return f"{LOGICAL_PREFIX}/{record.get('name')}/{record.get('version')}"
    return f"{record.get('name')}@{record.get('version')}" if record else "—"


def read_artifact(path: str) -> Artifact:
    """The artifact at `path`; raises `InputError` when it has no `.artifact.json` record."""
    path = path.rstrip("/")
    if not exists(posixpath.join(path, RECORD)):
        raise InputError(f"{path}: no {RECORD} here: not a finished Marin artifact")
    record = read_json_at(path, RECORD)
    return Artifact(path, record, _prefix_of(path, record), f"{record.get('name')}@{record.get('version')}")


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


def upstream(report: Artifact) -> list[tuple[str, str, dict[str, Any] | None]]:
    """Every step the report depends on, transitively, as `(name@version, path, record or None)`; a
    record is looked for at its recorded path, in the prefix the report was read from, then built in."""
    seen: dict[str, tuple[str, str, dict[str, Any] | None]] = {}
    todo = [report.record]
    while todo:
        rec = todo.pop(0)
        roots = (report.root, _prefix_of(rec.get("output_path", ""), rec))  # read from, built in
        for i, dep in enumerate(rec.get("deps") or []):
            if dep in seen:
                continue
            rel = "/".join(dep.rpartition("@")[::2])
            where = (rec.get("dep_paths") or [])[i : i + 1] + [posixpath.join(r, rel) for r in roots if r]
            found = next((w for w in where if exists(posixpath.join(w, RECORD))), None)
            dep_rec = read_json_at(found, RECORD) if found else None
            seen[dep] = (dep, (dep_rec or {}).get("output_path") or (where or [rel])[-1], dep_rec)
            todo += [dep_rec] if dep_rec else []
    return list(seen.values())


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
    argv, prefix = list(prov.get("command_line") or ["?"]), _prefix_of(rec.get("output_path", ""), rec)
    # A script ran as `python x.py`, a console script by its name; both under the prefix they wrote to.
    # A local prefix is the building machine's folder: the rerun writes to the experiments' default.
    run = ["python", *argv] if argv[0].endswith(".py") else [os.path.basename(argv[0]), *argv[1:]]
    remote = prefix is not None and not _is_local(prefix)
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
    recorded = _prefix_of(report.record.get("output_path", ""), report.record)
    for root in sorted({r for r in (recorded, report.root) if r and _is_local(r)}, key=len, reverse=True):
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


def logical(value: Any, roots: list[str]) -> Any:
    """`value` (a record, any JSON) with every local prefix in `roots` named `{MARIN_PREFIX}` and any
    other absolute machine path (a home, temporary or work folder, `_MACHINE_PATH`) by its last
    component under `{LOCAL}`: a committed snapshot names no folder of the machine that built it."""
    if isinstance(value, dict):
        return {k: logical(v, roots) for k, v in value.items()}
    if isinstance(value, list):
        return [logical(v, roots) for v in value]
    if not isinstance(value, str):
        return value
    return _MACHINE_PATH.sub(lambda m: "{LOCAL}/" + posixpath.basename(m.group(0).rstrip("/")), _rooted(value, roots))


def _rooted(value: str, roots: list[str]) -> str:
    """`value` with every local prefix in `roots` named `{MARIN_PREFIX}`, and nothing else changed."""
    for root in sorted({r.rstrip("/") for r in roots if r and _is_local(r)}, key=len, reverse=True):
        value = value.replace(root + "/", LOGICAL_PREFIX + "/")
        value = LOGICAL_PREFIX if value == root else value
    return value


def _row_files(folder: str) -> list[tuple[str, int]]:
    """(relative path, size) of the row files under an artifact folder, in path order."""
    fs, p = _fs(folder)
    if not fs.isdir(p):
        return []
    out = []
    for full, info in sorted(fs.find(p, detail=True).items()):
        rel = posixpath.relpath(full, p)
        if rel != RECORD and rel.endswith(ROW_SUFFIXES) and info.get("type") == "file":
            out.append((rel, int(info.get("size") or 0)))
    return out


def copy_rows(folder: str, here: Path, roots: list[str]) -> int:
    """Copy the row files of the artifact at `folder` into `here`, each gzip-compressed (mtime 0, so
    the same rows give the same bytes), with the prefix named logically; Harbor's own records of a
    job (`HOST_RECORDS`: configs, results, logs, which name the job folder, the task's path and
    tracebacks) get every machine path named logically too (`logical`), while rows of session text
    keep every other path as the session printed it; returns the bytes written."""
    fs, _ = _fs(folder)
    written = 0
    for rel, _size in _row_files(folder):
        with fs.open(posixpath.join(_fs(folder)[1], rel), "rb") as f:
            data = f.read()
        target = here / (rel if rel.endswith(".gz") else rel + ".gz")
        target.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith(".gz"):
            data = gzip.decompress(data)
        text = data.decode("utf-8", errors="surrogateescape")
        text = (
            logical(text, roots)
            if posixpath.basename(rel).removesuffix(".gz") in HOST_RECORDS
            else _rooted(text, roots)
        )
        data = gzip.compress(text.encode("utf-8", errors="surrogateescape"), mtime=0)
        target.write_bytes(data)
        written += len(data)
    return written


def snapshot(reports: list[Artifact], dest: str) -> list[Artifact]:
    """Copy each report's files and its upstream records into `dest`, laid out as a prefix, replacing
    an earlier snapshot; with them the rows its numbers come from (`ROW_ARTIFACTS`' files, gzipped,
    within `SNAPSHOT_ROWS_BUDGET`). Every record and the manifest name paths logically (`logical`).
    Returns the copies. Raises `InputError` for big report files, rows over the budget, or a
    non-snapshot `dest`."""
    if os.path.isdir(dest) and os.listdir(dest) and not os.path.exists(os.path.join(dest, SNAPSHOT_MANIFEST)):
        raise InputError(f"{dest}: refusing to replace a folder that is not a snapshot (no {SNAPSHOT_MANIFEST})")
    if any(os.path.abspath(r.path).startswith(os.path.abspath(dest) + os.sep) for r in reports):
        raise InputError(f"{dest}: a snapshot cannot be taken from itself")
    shutil.rmtree(dest, ignore_errors=True)
    copied, rows_bytes, row_sets = [], 0, []
    for report in reports:
        roots = [r for r in (report.root, _prefix_of(report.record.get("output_path", ""), report.record)) if r]
        here = os.path.join(dest, report.record["name"], report.record["version"])
        os.makedirs(here)
        for name in report.files():
            fs, p = _fs(posixpath.join(report.path, name))
            if fs.isdir(p) or fs.size(p) > SNAPSHOT_MAX_BYTES:
                raise InputError(f"{report.path}/{name}: a snapshot holds small files only (2 MiB at most)")
            fs.get(p, os.path.join(here, name))
        Path(here, RECORD).write_text(json.dumps(logical(report.record, roots), indent=2) + "\n")
        for dep, path, rec in upstream(report):
            if not rec:
                continue
            folder = Path(dest, *dep.rpartition("@")[::2])
            folder.mkdir(parents=True, exist_ok=True)
            dep_roots = [*roots, _prefix_of(rec.get("output_path", ""), rec) or ""]
            (folder / RECORD).write_text(json.dumps(logical(rec, dep_roots), indent=2) + "\n")
            # Rows are read where the record says they were built, else from the prefix read from.
            where = [w for w in (path, report.root and posixpath.join(report.root, *dep.rpartition("@")[::2])) if w]
            src = next((w for w in where if os.path.isdir(w) or (not _is_local(w) and exists(w))), None)
            if rec.get("name", "").startswith(ROW_ARTIFACTS) and src and (n := copy_rows(src, folder, dep_roots)):
                rows_bytes += n
                row_sets.append(dep)
        copied.append(read_artifact(here))
    if rows_bytes > SNAPSHOT_ROWS_BUDGET:
        shutil.rmtree(dest, ignore_errors=True)
        raise InputError(f"{dest}: {rows_bytes:,} bytes of rows exceed the snapshot budget of {SNAPSHOT_ROWS_BUDGET:,}")
    manifest = {
        "from": [f"{LOGICAL_PREFIX}/{r.record['name']}/{r.record['version']}" for r in reports],
        "reports": [r.ident for r in reports],
        "rows": sorted(set(row_sets)),
        "rows_bytes": rows_bytes,
        "rows_budget_bytes": SNAPSHOT_ROWS_BUDGET,
    }
    Path(dest, SNAPSHOT_MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return copied


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
