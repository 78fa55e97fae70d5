"""What the docs site is built from: report artifacts as read, generated pages being written, and
one renderer per report type (`REPORT_TYPES`): the world-model probe's page, with the agent grade
beside it when the report has one, ECHO's miniature, and the pilot's scale axis."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsspec.core import url_to_fs as _fs

from terminalworld.core.records import read_json
from terminalworld.eval.metrics import BUCKET_LABELS
from terminalworld.pipeline import artifacts


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

    def table(self, header: str, rows: list[list[Any]], align: str = "") -> None:
        """Append a table (`header` columns split on `|`; `align` one `l`/`r` per column)."""
        cols = header.split("|")
        rule = "|".join("---:" if a == "r" else "---" for a in align.ljust(len(cols), "l"))
        self.add(f"| {' | '.join(cols)} |", f"|{rule}|", *(f"| {' | '.join(map(cell, r))} |" for r in rows), "")
        self.tables.append([cell(r[0]) for r in rows])

    def markdown(self, text: str) -> None:
        """Append Markdown written elsewhere (a report's own `.md`), noting its tables' first-column
        labels as `table` does."""
        lines = text.split("\n")
        for i, line in enumerate(lines):
            if line.startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
                rows = []
                for row in lines[i + 2 :]:
                    if not row.startswith("|"):
                        break
                    rows.append(row.split("|")[1].strip())
                self.tables.append(rows)
        self.add(*lines)

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


def exists(path: str) -> bool:
    """Whether `path` (local or any fsspec URL) exists."""
    return _fs(path)[0].exists(_fs(path)[1])


def read_json_at(*parts: str) -> Any:
    """The JSON document at the joined path (local or any fsspec URL)."""
    return read_json(posixpath.join(*parts))


# What could make corpus or model text in a cell into live markup, each broken with an HTML entity
# (which no backslash before it can undo): a link or image (`[x](javascript:...)`, `[x][ref]`) at its
# `](` or `][`, and an attribute list (`*x*{onclick=...}`) at a `{` right after an inline element.
_LINK = re.compile(r"\](\s*)([(\[])")
_ATTRS = re.compile(r"(?<=[*_`)\]])\{")


def cell(value: Any) -> str:
    """A value as a Markdown table cell: floats to 4 significant digits (big ones grouped), one line,
    pipes escaped, and inert: no HTML (`<` escaped), no link, image or attribute list (`_LINK`,
    `_ATTRS`), so a repository or model text shows as typed and never as markup."""
    text = (f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}") if isinstance(value, float) else str(value)
    text = text.replace("|", "\\|").replace("<", "&lt;").replace("\r", " ").replace("\n", " ")
    text = _LINK.sub(lambda m: "]" + m.group(1) + ("&#40;" if m.group(2) == "(" else "&#91;"), text)
    return _ATTRS.sub(lambda m: m.group() if _opens_code(text, m.start()) else "&#123;", text)


def _opens_code(text: str, at: int) -> bool:
    """Whether the backtick before `at` opens a code span (an odd count up to it): `{` inside one is text."""
    return text[at - 1] == "`" and text[:at].count("`") % 2 == 1


_PPL = ("median_ppl", "token_weighted_ppl")  # shown with their 95% intervals
_COUNTS = ("n_ppl_gt_10", "beats_base", "degrades_vs_reference")  # per-trajectory counts, "k of n"
_PLOTS = {
    "ppl_distribution.png": "Per-trajectory env-token PPL of each model (log scale)",
    "paired_vs_base.png": "Per-trajectory PPL against the base model's (below the diagonal: better than base)",
    "depth_curves.png": "Token-weighted env-token PPL by observation depth",
    "agent_vs_world_model.png": "pass@1 (with its standard error) against median env-token PPL",
    "sim_similarity_by_family.png": "Free-running similarity to the real output by command family",
    "sim_degeneration.png": "Share of generated outputs flagged degenerate (zlib rule), per checkpoint",
    "sim_divergence.png": "The turn where each closed-loop episode first diverged from its real shadow",
}


def _num(x: float | None, ci: list[float] | None = None) -> str:
    text = "—" if x is None else f"{x:.1f}"
    return text + (f" [{_num(ci[0])}, {_num(ci[1])}]" if ci else "")


def _bucket(b: dict[str, Any] | None) -> str:
    return f"{_num(b['median_ppl'])} · {b['token_share']:.0%} · n={b['n']}" if b else "—"


def _bucket_order(label: str) -> tuple[int, str]:
    # The buckets' own order (`eval.metrics.BUCKETS`); a label it does not know goes last.
    return (BUCKET_LABELS.index(label) if label in BUCKET_LABELS else len(BUCKET_LABELS), label)


def probe_page(report: Artifact, page: Page, assets: str) -> None:
    """The probe's PPL table, its per-trajectory table, its length buckets (all from `metrics.json`)
    and its plots."""
    m = read_json_at(report.path, "metrics.json")
    n, cps = m["n_common"], m["checkpoints"]
    ref = f", reference `{m['reference']}`" if m.get("reference") else ""
    page.add(f"Env-token perplexity on the **{n}** held-out trajectories every model scored; base `{m['base']}`{ref}.")
    page.add("Lower is better; brackets hold 95% bootstrap intervals over trajectories.", "")
    rows = [[c["name"], *(_num(c[k], c.get(f"{k}_ci95")) for k in _PPL), _num(c["mean_ppl"])] for c in cps]
    page.table("model|median PPL|token-weighted PPL|mean PPL", rows, "lrrr")
    page.add("Per trajectory: the tail, the pairs against the base and the reference, and the worst case.", "")
    rows = []
    for c in cps:
        counts = ["—" if c.get(k) is None else f"{c[k]} of {n}" for k in _COUNTS]
        worst = f"{_num(c['worst']['ppl'])} ({c['worst']['repo']})" if c.get("worst") else "—"
        top5 = c.get("top5_share_of_change_vs_base")
        rows.append([c["name"], *counts, worst, "—" if top5 is None else f"{top5:.0%}"])
    page.table("model|PPL > 10|beats base|worse than reference|worst PPL (repo)|top-5 share of change", rows, "lrrrrr")
    if cps and cps[0].get("by_class"):
        class_section(page, cps)
    if labels := sorted({b for c in cps for b in c.get("buckets", {})}, key=_bucket_order):
        page.add("By target length in tokens: median PPL · the bucket's share of scored tokens · trajectories.", "")
        rows = [[c["name"], *(_bucket(c["buckets"].get(b)) for b in labels)] for c in cps]
        page.table("|".join(["model", *labels]), rows)
    if agent := m.get("agent"):
        agent_section(page, agent)
    if sim := m.get("sim"):
        from terminalworld.report.simgrade import in_model_order, sim_markdown

        sim = {**sim, "checkpoints": in_model_order(sim["checkpoints"], [c["name"] for c in cps])}
        page.markdown(sim_markdown(sim, level=3))
    for name in sorted(report.files(), key=lambda n: list(_PLOTS).index(n) if n in _PLOTS else len(_PLOTS)):
        if name.endswith(".png"):
            page.image(posixpath.join(report.path, name), f"{assets}/{name}", _PLOTS.get(name, name))


def _cls(x: dict[str, Any]) -> str:
    return f"{_num(x['token_weighted_ppl'])} / {_num(x['median_ppl'])} · n={x['n']}" if x["n"] else "— · n=0"


def class_section(page: Page, cps: list[dict[str, Any]]) -> None:
    """The probe by target class (`core.targets`): the headline on read + predict, then each class."""
    from terminalworld.core.targets import CLASSES

    page.add(
        "### By target class",
        "",
        "Token-weighted PPL / median PPL · rows. The headline pools **read** (repository content not yet in "
        "context: what grounding serves) and **predict** (errors, execution output, everything else); "
        "**copy** targets are already in the context and **sentinel** targets are fixed harness output, "
        "so neither measures prediction.",
        "",
    )
    rows = []
    for c in cps:
        head = c["headline"]
        beats = "—" if head.get("beats_base") is None else f"{head['beats_base']} of {head['n']}"
        rows.append([c["name"], _cls(head), beats, *(_cls(c["by_class"][k]) for k in CLASSES)])
    page.table(
        "|".join(["model", "headline: read + predict", "beats base", *CLASSES]), rows, "lrr" + "r" * len(CLASSES)
    )


def agent_section(page: Page, agent: dict[str, Any]) -> None:
    """The agent grade beside the world-model grade (`joint.joint_table`): pass@1 per model, the
    opposite-directions table, and the plain-words note when nothing was solved."""
    page.add("### Agent and world model", "", "pass@1 (± standard error) on the agent tasks beside env-token PPL.", "")
    rows = [
        [
            r["name"],
            "—" if r["pass_at_1"] is None else f"{r['pass_at_1']:.3f} ± {r['pass_at_1_stderr'] or 0:.3f}",
            f"{r['solved']} / {r['scored']}",
            "—" if r.get("valid_action_rate") is None else f"{r['valid_action_rate']:.0%}",
            _num(r["median_ppl"]),
            _num(r["token_weighted_ppl"]),
        ]
        for r in agent["rows"]
    ]
    page.table("model|pass@1|solved / scored|valid actions|median PPL|token-weighted PPL", rows, "lrrrrr")
    if agent["opposite_directions"]:
        page.add("The better agent against the better world model, per scale:", "")
        rows = [
            [o["scale"], o["better_agent"] or "tie", o["better_world_model"], "yes" if o["opposite"] else "no"]
            for o in agent["opposite_directions"]
        ]
        page.table("scale|better agent|better world model|opposite directions", rows)
    if agent.get("note"):
        page.add(f"*{agent['note']}*", "")


PROBE = ReportType(artifacts.REPORT, "world-model-probe", "World-model probe: results", probe_page)
REPORT_TYPES[PROBE.artifact] = PROBE


def echo_page(report: Artifact, page: Page, assets: str) -> None:
    """ECHO's miniature: the report's own Markdown (`echo_report.echo_markdown` of
    `echo_report.json`, its title left out) and its plots."""
    from terminalworld.report.echo import PLOTS, REPORT_FILE, echo_markdown

    t = read_json_at(report.path, REPORT_FILE)
    page.markdown(echo_markdown(t, title=False))
    for name in t.get("plots", []):
        page.image(posixpath.join(report.path, name), f"{assets}/{name}", PLOTS.get(name, name))


ECHO = ReportType(artifacts.ECHO_REPORT, "echo", "ECHO: results", echo_page)
REPORT_TYPES[ECHO.artifact] = ECHO


def pilot_page(report: Artifact, page: Page, assets: str) -> None:
    """The pilot: the write-up's findings checked, the scale axis, the paired sign tests and the
    agent grade's steps of a fix (from `pilot.json`), the depth curve, the departures from the
    write-up, then the probe page's tables, agent and simulator grades and plots."""
    from terminalworld.report.scale import scale_markdown

    doc = read_json_at(report.path, "pilot.json")
    page.markdown(scale_markdown(doc["scale_axis"], doc["findings"], doc["process"], level=3))
    if curve := doc.get("depth_curve"):
        depths = sorted({p["depth"] for points in curve.values() for p in points})
        scope = doc.get("depth_scope", "every observation; scores without target classes")
        page.add(
            "### Env PPL by context depth",
            "",
            f"Median PPL of the k-th observation of a row (rows scored at that depth), over {scope}.",
            "",
        )
        rows = []
        for name, points in curve.items():
            at = {p["depth"]: p for p in points}
            rows.append([name, *(f"{_num(at[d]['median_ppl'])} ({at[d]['rows']})" if d in at else "—" for d in depths)])
        if comp := doc.get("depth_composition"):
            for cls in ("read", "predict", "copy", "sentinel", "empty"):
                rows.append([f"*{cls} observations*", *(str(comp.get(str(d), {}).get(cls, 0)) for d in depths)])
        page.table("|".join(["model", *(str(d) for d in depths)]), rows, "l" + "r" * len(depths))
    page.add("### Departures from the write-up", "", *(f"- {d}" for d in doc["departures"]), "")
    page.add("### The probe, agent and simulator tables", "")
    probe_page(report, page, assets)


PILOT = ReportType(
    artifacts.PILOT_REPORT,
    "pilot",
    "Pilot: results",
    pilot_page,
    empty="No pilot snapshot exists yet: no complete pilot run has been committed. The README's pilot "
    "section gives the command that runs it.",
)
REPORT_TYPES[PILOT.artifact] = PILOT
