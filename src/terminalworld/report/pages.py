"""What the docs site is built from: report artifacts as read, generated pages being written, and
one renderer per report type (`REPORT_TYPES`): the world-model probe's page, with the agent grade
beside it when the report has one, ECHO's miniature, and the pilot's scale axis."""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsspec.core import url_to_fs as _fs

from terminalworld.core.records import exists, read_json
from terminalworld.errors import InputError
from terminalworld.pipeline import artifacts
from terminalworld.report.tables import Block, Heading, Table, markdown_lines


@dataclass
class Artifact:
    """A report artifact as read: where it was read from, its record, and the prefix it sits in."""

    path: str
    record: dict[str, Any]
    root: str | None  # the prefix it was read from, where its upstream records may lie too
    ident: str  # name@version

    def files(self) -> list[str]:
        """The artifact's top-level file names, dotfiles (records, runner state) left out."""
        fs, p = _fs(self.path)
        return sorted(n for n in (posixpath.basename(f) for f in fs.ls(p, detail=False)) if not n.startswith("."))


@dataclass
class Page:
    """A generated page being written: its Markdown, and its tables' first-column labels."""

    out: str
    relpath: str  # of the .md file under `out`
    lines: list[str] = field(default_factory=list)
    tables: list[list[str]] = field(default_factory=list)
    assets: dict[str, str] = field(default_factory=dict)  # destination (relative to the page) -> source

    def add(self, *lines: str) -> None:
        """Append Markdown lines."""
        self.lines.extend(lines)

    def put(self, *blocks: Block, level: int = 3) -> None:
        """Append a report's blocks (`report.tables`), headings from `level`, noting each table's
        first-column labels."""
        self.add(*markdown_lines(blocks, level))
        self.tables += [b.labels() for b in blocks if isinstance(b, Table)]

    def image(self, src: str, dest: str, caption: str) -> None:
        """Show the image `src` (any fsspec path), copied to `dest` (relative to the page) on `write`."""
        self.assets[dest] = src
        self.add(f"![{caption}]({dest})", "")

    def write(self) -> None:
        """Write the page and copy its images."""
        path = Path(self.out, self.relpath)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(self.lines).rstrip() + "\n")
        for dest, src in self.assets.items():
            (path.parent / dest).parent.mkdir(parents=True, exist_ok=True)
            _fs(src)[0].get(_fs(src)[1], str(path.parent / dest))


@dataclass(frozen=True)
class ReportType:
    """A kind of report artifact, its page (`results/{slug}.md`, beside the hand-written `{slug}.md`
    that says what it measures), and the function rendering one artifact onto it."""

    artifact: str
    slug: str
    title: str
    render: Callable[[Artifact, Page, str], None]  # (artifact, page, assets folder relative to the page)
    empty: str | None = None  # what the page says when no artifact of this type was given


# Every report type with a page, by artifact name; `probe_page` shows how one is added.
REPORT_TYPES: dict[str, ReportType] = {}


def read_json_at(*parts: str) -> Any:
    """The JSON document at the joined path (local or any fsspec URL)."""
    return read_json(posixpath.join(*parts))


_PLOTS = {
    "scale_curves.png": "Read + predict token-weighted PPL against SFT scale, per arm and seed (95 % intervals)",
    "ppl_distribution.png": "Per-trajectory env-token PPL of each model (log scale)",
    "paired_vs_base.png": "Per-trajectory PPL against the base model's (below the diagonal: better than base)",
    "depth_curves.png": "Token-weighted env-token PPL by observation depth",
    "agent_vs_world_model.png": "pass@1 (with its standard error) against median env-token PPL",
    "sim_similarity_by_family.png": "Free-running similarity to the real output by command family",
    "sim_degeneration.png": "Share of generated outputs flagged degenerate (zlib rule), per checkpoint",
    "sim_divergence.png": "The turn where each closed-loop episode first diverged from its real shadow",
}


def probe_page(report: Artifact, page: Page, assets: str, shown: tuple[str, ...] = ()) -> None:
    """The probe's tables (`probe.probe_blocks` of `metrics.json`, as in its `report.md`) and plots
    (but those the page has `shown` already)."""
    from terminalworld.report.probe import probe_blocks

    page.put(*probe_blocks(read_json_at(report.path, "metrics.json")))
    for name in sorted(report.files(), key=lambda n: list(_PLOTS).index(n) if n in _PLOTS else len(_PLOTS)):
        if name.endswith(".png") and name not in shown:
            page.image(posixpath.join(report.path, name), f"{assets}/{name}", _PLOTS.get(name, name))


PROBE = ReportType(artifacts.REPORT, "world-model-probe", "World-model probe: results", probe_page)
REPORT_TYPES[PROBE.artifact] = PROBE


def echo_page(report: Artifact, page: Page, assets: str) -> None:
    """ECHO's miniature: the report's tables (`echo.echo_blocks` of `echo_report.json`, as in its
    `echo_report.md`) and its plots."""
    from terminalworld.report.echo import PLOTS, REPORT_FILE, echo_blocks

    t = read_json_at(report.path, REPORT_FILE)
    page.put(*echo_blocks(t))
    for name in t.get("plots", []):
        page.image(posixpath.join(report.path, name), f"{assets}/{name}", PLOTS.get(name, name))


ECHO = ReportType(artifacts.ECHO_REPORT, "echo", "ECHO: results", echo_page)
REPORT_TYPES[ECHO.artifact] = ECHO


def pilot_page(report: Artifact, page: Page, assets: str) -> None:
    """The pilot: over seeds where the run had them (`report.seeds`: the findings' verdicts, the probe per
    seed, the ladder's paired tests and the opposite-directions table), the write-up's findings checked, the scale axis, the paired sign tests and the
    agent grade's steps of a fix (from `pilot.json`), the depth curve, the departures from the
    write-up, then the probe page's tables, agent and simulator grades and plots."""
    from terminalworld.report.depth import depth_blocks
    from terminalworld.report.pilot import SCALE_PLOT, seeds_blocks, walltime_blocks
    from terminalworld.report.scale import scale_blocks

    doc = read_json_at(report.path, "pilot.json")
    shown = (SCALE_PLOT,) if SCALE_PLOT in report.files() else ()
    if over_seeds := doc.get("seeds"):
        page.put(*seeds_blocks(over_seeds))
        for name in shown:
            page.image(posixpath.join(report.path, name), f"{assets}/{name}", _PLOTS[name])
    page.put(*scale_blocks(doc["scale_axis"], [] if over_seeds else doc["findings"], doc["process"]))
    if curve := doc.get("depth_curve"):
        page.put(*depth_blocks(curve, doc.get("depth_scope"), doc.get("depth_composition")))
    if walltime := doc.get("walltime"):
        page.put(*walltime_blocks(walltime))
    page.put(Heading("Departures from the write-up"), "\n".join(f"- {d}" for d in doc["departures"]))
    page.put(Heading("The probe, agent and simulator tables"))
    probe_page(report, page, assets, shown)


PILOT = ReportType(
    artifacts.PILOT_REPORT,
    "pilot",
    "Pilot: results",
    pilot_page,
    empty="No pilot snapshot exists yet: the pilot's results land here with the committed snapshot of its "
    "rows, and no figure is shown before then. [Running it](../manual/running.md#the-pilot) gives the command "
    "that runs it.",
)
REPORT_TYPES[PILOT.artifact] = PILOT


RECORD = ".artifact.json"


LOGICAL_PREFIX = "{MARIN_PREFIX}"  # how a page names a local prefix


def prefix_of(path: str, record: dict[str, Any]) -> str | None:
    """The prefix an artifact folder sits in (`{prefix}/{name}/{version}`), if it does."""
    suffix = f"/{record.get('name')}/{record.get('version')}"
    return path.rstrip("/")[: -len(suffix)] if path.rstrip("/").endswith(suffix) else None


def is_local(path: str) -> bool:
    """Whether `path` is a local folder (no URL scheme, or `file://`)."""
    return "://" not in path or path.startswith("file://")


def read_artifact(path: str) -> Artifact:
    """The artifact at `path`; raises `InputError` when it has no `.artifact.json` record."""
    path = path.rstrip("/")
    if not exists(posixpath.join(path, RECORD)):
        raise InputError(f"{path}: no {RECORD} here: not a finished Marin artifact")
    record = read_json_at(path, RECORD)
    return Artifact(path, record, prefix_of(path, record), f"{record.get('name')}@{record.get('version')}")


def upstream(report: Artifact) -> list[tuple[str, str, dict[str, Any] | None]]:
    """Every step the report depends on, transitively, as `(name@version, path, record or None)`; a
    record is looked for at its recorded path, in the prefix the report was read from, then built in."""
    seen: dict[str, tuple[str, str, dict[str, Any] | None]] = {}
    todo = [report.record]
    while todo:
        rec = todo.pop(0)
        roots = (report.root, prefix_of(rec.get("output_path", ""), rec))  # read from, built in
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
