"""Recompute a committed snapshot's reports from the rows it carries: each report's recorded config,
its paths read inside the snapshot, runs the report's own function again, and every figure it wrote
(`pilot.json`, `metrics.json`: what the pages are built from) must come out the same. This is what
lets a page's number be traced to committed rows, on any machine, without the run that made them.
The report's own `report.md` is compared too, as a note: a snapshot's rendering may come from an
older layout of the same figures.

What a report reads that is not a row (the pilot's tokenized caches, the run's timed attempts) is
named and kept as written, and checked for what can be checked without it."""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from terminalworld.core import scratch
from terminalworld.errors import InputError
from terminalworld.options import option
from terminalworld.pipeline import artifacts
from terminalworld.report.pages import LOGICAL_PREFIX, RECORD
from terminalworld.report.snapshot import SNAPSHOT_MANIFEST, map_strings

# A snapshot is committed text: no decompressed row file may exceed this (a gzip bomb stops here).
MAX_ROW_BYTES = 256 << 20
# Figures are recomputed by the same code from the same rows; the tolerance only absorbs summation
# order where a library changed it.
REL_TOL = 1e-9


@dataclass(frozen=True)
class Recomputable:
    """How a report is recomputed: its config class and function, the JSON files it writes that the
    pages are built from (compared figure by figure), and the config fields whose inputs are not
    rows (set to `not_rows`' values), with the keys of its JSON (`kept`) and the `report.md`
    sections those fields alone produce."""

    config: type
    write: Callable[[Any], Any]
    outputs: tuple[str, ...]
    not_rows: dict[str, Any] = field(default_factory=dict)
    kept: tuple[str, ...] = ()
    kept_sections: tuple[str, ...] = ()
    rendering: str = "report.md"  # the run's own rendering of the figures; the pages are built from the JSON
    # What can be checked of the kept keys without their inputs: the report's stored JSON -> lines,
    # a failed check starting with `differs`.
    check_kept: Callable[[dict[str, Any]], list[str]] | None = None


def recomputable() -> dict[str, Recomputable]:
    """The reports a snapshot can carry and be recomputed from, by step name."""
    from terminalworld.report.echo import REPORT_FILE, EchoReportConfig, write_echo_report
    from terminalworld.report.grades import ReportConfig, write_report
    from terminalworld.report.pilot import PilotReportConfig, write_pilot_report

    return {
        artifacts.REPORT: Recomputable(ReportConfig, write_report, ("report.json", "metrics.json")),
        artifacts.ECHO_REPORT: Recomputable(
            EchoReportConfig, write_echo_report, (REPORT_FILE,), rendering="echo_report.md"
        ),
        artifacts.PILOT_REPORT: Recomputable(
            PilotReportConfig,
            write_pilot_report,
            ("pilot.json", "metrics.json"),
            # The tokenized caches (what each scale trained on) and the run's timed attempts are
            # not rows: `training` and `walltime` are checked apart (`pilot_kept_checks`).
            not_rows={"training": {}, "walltimes": False},
            kept=("training", "walltime"),
            kept_sections=("What each scale trained on", "Wall time per stage"),
            check_kept=pilot_kept_checks,
        ),
    }


@dataclass(frozen=True)
class VerifyConfig:
    """Recompute every report of a committed snapshot from its rows and compare each figure."""

    snapshot: str = option(help="a snapshot folder (holding snapshot.json), e.g. docs/snapshots/X")


def verify_snapshot(snapshot: str) -> list[dict[str, Any]]:
    """One result per report of the snapshot: `recomputed` (every compared file the same),
    `differs` (with the first differences) or `not recomputable` (with why), plus what was kept as
    written and what of it was checked. Raises `InputError` for a folder that is not a snapshot."""
    manifest_path = Path(snapshot, SNAPSHOT_MANIFEST)
    if not manifest_path.is_file():
        raise InputError(f"{snapshot}: not a snapshot (no {SNAPSHOT_MANIFEST})")
    manifest = json.loads(manifest_path.read_text())
    work = scratch.make_dir("tw-verify-")
    try:
        prefix = os.path.join(work, "prefix")
        restore_rows(Path(snapshot), Path(prefix))
        return [
            _verify_one(Path(snapshot), prefix, ident, os.path.join(work, "out", str(k)))
            for k, ident in enumerate(manifest.get("reports", []))
        ]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def restore_rows(snapshot: Path, prefix: Path) -> int:
    """Lay the snapshot out as a prefix under `prefix`: every regular file copied, and each gzipped
    one also decompressed beside it without `.gz` (a snapshot gzips every row, so the name a config
    reads is one of the two); links are not followed. Returns the files written."""
    n = 0
    for src in sorted(snapshot.rglob("*")):
        if src.is_symlink() or not src.is_file():
            continue
        rel = src.relative_to(snapshot)
        dst = prefix / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        n += 1
        if src.suffix == ".gz" and not (plain := dst.with_suffix("")).exists():
            plain.write_bytes(_gunzip(src))
            n += 1
    return n


def _gunzip(path: Path) -> bytes:
    """A gzipped file's bytes, refused past `MAX_ROW_BYTES`."""
    out = bytearray()
    try:
        with gzip.open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                out += chunk
                if len(out) > MAX_ROW_BYTES:
                    raise InputError(f"{path}: decompresses past {MAX_ROW_BYTES:,} bytes")
    except (OSError, EOFError) as e:
        raise InputError(f"{path}: not a readable gzip file ({e})") from None
    return bytes(out)


def _verify_one(snapshot: Path, prefix: str, ident: str, out: str) -> dict[str, Any]:
    name, _, version = ident.rpartition("@")
    here = snapshot / name / version
    result: dict[str, Any] = {"report": ident}
    how = recomputable().get(name)
    if how is None:
        return {**result, "status": "not recomputable", "why": f"no recompute is defined for {name}"}
    if absent := [f for f in how.outputs if not (here / f).is_file()]:
        return {**result, "status": "not recomputable", "why": "figures files missing: " + ", ".join(absent)}
    record = json.loads((here / RECORD).read_text())
    config = _in_prefix(_in_dep_order(record.get("config") or {}, record.get("deps") or []), prefix)
    config |= {"out": out, **how.not_rows}
    if "sims" in config:  # JSON keeps a tier as a string; the config's key is the tier itself
        config["sims"] = {m: {int(t): p for t, p in tiers.items()} for m, tiers in config["sims"].items()}
    inputs, inside = sorted(set(_paths(config, prefix))), os.path.realpath(prefix) + os.sep

    def logical(p: str) -> str:  # how a result names an input
        return LOGICAL_PREFIX + p[len(prefix) :]

    if outside := [p for p in inputs if not os.path.realpath(p).startswith(inside)]:
        return {**result, "status": "not recomputable", "why": "an input outside the snapshot: " + logical(outside[0])}
    if missing := [logical(p) for p in inputs if not os.path.exists(p)]:
        return {**result, "status": "not recomputable", "why": "inputs not in the snapshot", "missing": missing}
    known = {f.name for f in dataclasses.fields(how.config)}
    how.write(how.config(**{k: v for k, v in config.items() if k in known}))
    differences: list[str] = []
    stored = {fname: json.loads((here / fname).read_text()) for fname in how.outputs}
    for fname, doc in stored.items():
        compared = {k: v for k, v in doc.items() if k not in how.kept}
        differences += list(differ(compared, json.loads(Path(out, fname).read_text()), fname))
    rendering = None
    if (md := here / how.rendering).exists():
        changed = _text_differences(
            md.name, _without(md.read_text(), how.kept_sections), Path(out, md.name).read_text()
        )
        rendering = f"another layout of the figures ({changed[0]})" if changed else "the same"
    checked = how.check_kept(stored[how.outputs[0]]) if how.check_kept else []
    differences += [c for c in checked if c.startswith("differs")]
    status = "differs" if differences else "recomputed"
    return {
        **result,
        "status": status,
        "compared": list(how.outputs),
        "kept": list(how.kept),
        "checked": [c for c in checked if not c.startswith("differs")],
        **({"rendering": f"{how.rendering}: {rendering}"} if rendering else {}),
        **({"differences": differences[:20]} if differences else {}),
    }


def _in_prefix(value: Any, prefix: str) -> Any:
    """A recorded config with its logical prefix read as `prefix`."""
    return map_strings(value, lambda s: s.replace(LOGICAL_PREFIX, prefix))


def _in_dep_order(config: dict[str, Any], deps: list[str]) -> dict[str, Any]:
    """A recorded config with each mapping of names to inputs back in the order the step listed its
    dependencies: the record sorts a config's keys, and a report lists its models in input order."""
    places = [f"/{d.replace('@', '/')}/" for d in deps]

    def rank(value: Any) -> int:
        first = value if isinstance(value, str) else next(iter(_strings(value)), "")
        return next((i for i, p in enumerate(places) if p in first + "/"), len(places))

    def ordered(value: Any) -> Any:
        if isinstance(value, dict) and value and all(isinstance(v, (str, dict)) for v in value.values()):
            return {k: ordered(v) for k, v in sorted(value.items(), key=lambda kv: rank(kv[1]))}
        return value

    return {k: ordered(v) for k, v in config.items()}


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


def _paths(config: Any, prefix: str) -> list[str]:
    """Every string of a config that names something under `prefix` (its inputs)."""
    return [s for s in _strings(config) if s.startswith(prefix + "/")]


def differ(a: Any, b: Any, where: str) -> Iterator[str]:
    """Where two JSON values differ, as `file:key.key[i]` with both values; floats within `REL_TOL`."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                yield f"{where}.{k}: only in the {'stored' if k in a else 'recomputed'} one"
            else:
                yield from differ(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            yield f"{where}: {len(a)} items stored, {len(b)} recomputed"
        else:
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                yield from differ(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        if not (math.isclose(a, b, rel_tol=REL_TOL, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b))):
            yield f"{where}: {a!r} stored, {b!r} recomputed"
    elif a != b:
        yield f"{where}: {_short(a)} stored, {_short(b)} recomputed"


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _without(markdown: str, titles: tuple[str, ...]) -> str:
    """`markdown` without the level-2 sections titled `titles` (the parts from inputs that are not rows)."""
    parts = markdown.split("\n## ")
    kept = [parts[0], *(p for p in parts[1:] if p.split("\n", 1)[0].strip() not in titles)]
    return "\n## ".join(kept)


def _text_differences(fname: str, stored: str, again: str) -> list[str]:
    a, b = stored.splitlines(), again.splitlines()
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return [f"{fname}:{i + 1}: {_short(x)} stored, {_short(y)} recomputed"]
    return [] if len(a) == len(b) else [f"{fname}: {len(a)} lines stored, {len(b)} recomputed"]


def pilot_kept_checks(doc: dict[str, Any]) -> list[str]:
    """What can be checked of a `pilot.json`'s figures kept as written: the wall time per stage is
    the sum of its steps' (`pipeline.walltime.stage_walltimes`), and each scale's loss tokens lie
    within its real tokens. A failed check starts with `differs`."""
    from terminalworld.pipeline.walltime import stage_walltimes

    out = []
    if wall := doc.get("walltime"):
        again = stage_walltimes(wall["steps"])
        ok = not list(differ(wall["stages"], again, "walltime.stages"))
        out.append("walltime: stages are the sums of their steps" if ok else "differs: walltime.stages")
    for arm, cov in (doc.get("training") or {}).items():
        for scale, c in cov["scales"].items():
            if not 0 <= c["loss_tokens"] <= c["real_tokens"]:
                out.append(f"differs: training.{arm}.{scale}: loss tokens outside 0..real tokens")
        if cov["scales"]:
            out.append(f"training.{arm}: loss tokens within real tokens at every scale")
    return out


def print_verify(cfg: VerifyConfig) -> int:
    """Print each report's result; 1 when any figure differs or a report cannot be recomputed."""
    results = verify_snapshot(cfg.snapshot)
    for r in results:
        print(f"{r['report']}: {r['status']}" + (f" ({r['why']})" if r.get("why") else ""))
        for line in [*r.get("differences", []), *r.get("missing", [])]:
            print(f"  {line}")
        if r.get("compared"):
            print(f"  compared: {', '.join(r['compared'])}")
        if r.get("kept"):
            print(f"  kept as written (not from rows): {', '.join(r['kept'])}")
        for c in r.get("checked", []):
            print(f"  checked: {c}")
        if r.get("rendering"):
            print(f"  {r['rendering']}")
    return 0 if results and all(r["status"] == "recomputed" for r in results) else 1
