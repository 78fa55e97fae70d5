"""The docs generator: result pages from artifacts with a Reproduce section true to the provenance,
the snapshot, the strict build, and the site as a Marin step."""

import gzip
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from terminalworld.errors import InputError
from terminalworld.report.pages import RECORD, upstream
from terminalworld.report.site import DocsBuildConfig, build_docs, default_results, find_reports, locked_versions
from terminalworld.report.snapshot import HOST_RECORDS, SNAPSHOT_MANIFEST
from tests.paths import FIXTURES, REPO_ROOT
from tests.report.conftest import SNAPSHOT, STRICT_BUILD_SECONDS, copy_docs, mkdocs_build
from tests.report.test_browser import _machine_paths

VERSION = json.loads((SNAPSHOT / SNAPSHOT_MANIFEST).read_text())["reports"][0].rpartition("@")[2]
REPORT = SNAPSHOT / "terminalworld" / "reports" / "world-model-probe" / VERSION
URL = "https://example.org/terminalworld"


def _build(docs: Path, results: list[str], **kw) -> str:
    """The probe's result page after `docs build` into `docs`."""
    build_docs(DocsBuildConfig(results=results, out=str(docs), checkout=str(REPO_ROOT), repo_url=URL, **kw))
    return (docs / "results" / "world-model-probe.md").read_text()


def _snapshot_copy(tmp_path: Path, **provenance) -> Path:
    """A copy of the committed snapshot whose report record's provenance has `provenance` set."""
    copy = tmp_path / "snap"
    shutil.copytree(SNAPSHOT, copy)
    record_path = copy / REPORT.relative_to(SNAPSHOT) / RECORD
    record = json.loads(record_path.read_text())
    record["provenance"].update(provenance)
    record_path.write_text(json.dumps(record))
    return copy


def test_committed_snapshot_is_small_and_complete():
    files = [p for p in SNAPSHOT.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) < 1 << 20
    assert {p.name for p in REPORT.iterdir()} >= {RECORD, "report.json", "metrics.json", "ppl_distribution.png"}
    record = json.loads((REPORT / RECORD).read_text())
    assert (
        subprocess.run(["git", "-C", str(REPO_ROOT), "cat-file", "-e", record["provenance"]["base_commit"]]).returncode
        == 0
    )
    assert all(rec is not None for _, _, rec in upstream(find_reports(str(SNAPSHOT))[0]))


def test_result_page_reproduce_section_matches_provenance(tmp_path):
    page = _build(copy_docs(tmp_path), [str(SNAPSHOT)])
    record = json.loads((REPORT / RECORD).read_text())
    prov = record["provenance"]
    commit = prov["base_commit"]
    assert f"[`{commit}`]({URL}/tree/{commit}) (clean tree)" in page
    assert f"`{' '.join(prov['command_line'])}`" in page
    assert "uv run python experiments/local_demo.py --run" in page
    # Artifacts by their logical path: the machine that built the snapshot is nowhere on the page.
    assert f"`{{MARIN_PREFIX}}/{record['name']}/{VERSION}`" in page
    assert record["output_path"].startswith("{MARIN_PREFIX}/") and "MARIN_PREFIX=/" not in page
    assert not _machine_paths(page, [])
    for dep, _, rec in upstream(find_reports(str(REPORT))[0]):
        name, version = dep.rsplit("@", 1)
        assert f"| `{dep}` | `{{MARIN_PREFIX}}/{name}/{version}` | {rec['provenance']['base_commit']} |" in page
        assert not _machine_paths(rec["output_path"], [])
    assert (
        f"sim-ppl-eval/sim_ppl_base@{VERSION}" in record["deps"]
        and f"agent-eval/heldout-tasks/base@{VERSION}" in record["deps"]
    )
    versions = locked_versions(str(REPO_ROOT), commit)
    assert f"| marin-core | {versions['marin-core']} |" in page
    assert "dirty" not in page.split("### Reproduce")[1].split("Upstream steps")[0].replace("(clean tree)", "")


def test_result_page_tables_come_from_the_artifact(tmp_path):
    docs = copy_docs(tmp_path)
    page = _build(docs, [str(REPORT)])
    arms = [a["arm"] for a in json.loads((REPORT / "report.json").read_text())["arms"]]
    tables = json.loads((docs / "results" / "tables.json").read_text())["results/world-model-probe.md"]
    assert tables[:3] == [arms, arms, arms]  # PPL, per-trajectory counts, length buckets
    # One order of models in every table, the simulator's included (metrics.json sorts their keys).
    by_model = [t for t in tables if set(t) == set(arms)]
    assert len(by_model) >= 8 and all(t == arms for t in by_model), by_model
    metrics = json.loads((REPORT / "metrics.json").read_text())
    assert f"**{metrics['n_common']}** held-out trajectories" in page
    median = next(c for c in metrics["checkpoints"] if c["name"] == "assistant")["median_ppl"]
    assert f"| assistant | {median:.1f} [" in page
    for png in ("ppl_distribution.png", "paired_vs_base.png", "agent_vs_world_model.png"):
        assert f"(world-model-probe/{VERSION}/{png})" in page
        assert (docs / "results" / "world-model-probe" / VERSION / png).read_bytes() == (REPORT / png).read_bytes()
    # The agent grade beside the world model: pass@1 per model, and the note when nothing was solved.
    agent = metrics["agent"]
    full = next(r for r in agent["rows"] if r["name"] == "full")
    assert (
        f"| full | {full['pass_at_1']:.3f} ± {full['pass_at_1_stderr']:.3f} | {full['solved']} / {full['scored']} |"
        in page
    )
    assert agent["note"] and agent["note"] in page


def test_dirty_tree_is_shown_and_release_refuses_it(tmp_path):
    snap = _snapshot_copy(tmp_path, dirty=True, tree_hash="abc1234")
    page = _build(copy_docs(tmp_path / "a"), [str(snap)])
    assert "(dirty tree)" in page and '!!! warning "Built from a dirty tree"' in page and "`abc1234`" in page
    docs = copy_docs(tmp_path / "b")
    with pytest.raises(InputError, match="dirty tree") as e:
        _build(docs, [str(snap)], release=True)
    assert "\n" not in str(e.value)
    assert not (docs / "results").exists()  # nothing is replaced when a check fails


def test_release_refuses_a_commit_missing_from_the_history(tmp_path):
    snap = _snapshot_copy(tmp_path, base_commit="0000000")
    assert '!!! warning "Unknown commit"' in _build(copy_docs(tmp_path / "a"), [str(snap)])
    with pytest.raises(InputError, match="0000000 is not in the history"):
        _build(copy_docs(tmp_path / "b"), [str(snap)], release=True)


def test_release_accepts_the_clean_committed_snapshot(tmp_path):
    # A clean clone: --release also refuses benchmark figures with uncommitted changes.
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--shared", str(REPO_ROOT), str(clone)], check=True)
    docs = copy_docs(tmp_path / "site")
    build_docs(DocsBuildConfig(results=[str(SNAPSHOT)], out=str(docs), checkout=str(clone), repo_url=URL, release=True))
    assert "### Reproduce" in (docs / "results" / "world-model-probe.md").read_text()


def test_snapshot_copies_the_report_and_its_upstream_records(tmp_path):
    docs = copy_docs(tmp_path)
    dest = docs / "snapshots" / "demo"
    page = _build(docs, [str(REPORT)], snapshot=str(dest))
    copied = dest / REPORT.relative_to(SNAPSHOT)
    assert sorted(p.name for p in copied.iterdir()) == sorted(p.name for p in REPORT.iterdir())
    records = sorted(p.parent.relative_to(dest).as_posix() for p in dest.rglob(RECORD))
    assert len(records) == 1 + len(upstream(find_reports(str(REPORT))[0])) == 32
    assert json.loads((dest / SNAPSHOT_MANIFEST).read_text())["reports"] == [
        f"terminalworld/reports/world-model-probe@{VERSION}"
    ]
    origin = json.loads((SNAPSHOT / SNAPSHOT_MANIFEST).read_text())["from"][0]
    assert (
        not _machine_paths(origin, [])
        and f"`{{MARIN_PREFIX}}/terminalworld/reports/world-model-probe/{VERSION}`" in page
    )
    _build(docs, [str(REPORT)], snapshot=str(dest))  # a snapshot replaces an earlier one
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="cannot be taken from itself"):
        _build(docs, [str(dest)], snapshot=str(dest))
    with pytest.raises(InputError, match="not a snapshot"):
        _build(docs, [str(REPORT)], snapshot=str(tmp_path / "other"))


def test_artifacts_are_read_through_fsspec(tmp_path):
    import fsspec

    fs = fsspec.filesystem("memory")
    for path in SNAPSHOT.rglob("*"):
        if path.is_file():
            fs.pipe(f"/prefix/{path.relative_to(SNAPSHOT).as_posix()}", path.read_bytes())
    local = _build(copy_docs(tmp_path / "a"), [str(SNAPSHOT)])
    remote = _build(copy_docs(tmp_path / "b"), ["memory://prefix"])
    assert remote == local  # a page shows the provenance's paths, not where the artifact was read from
    fs.rm("/prefix", recursive=True)


def test_every_report_type_has_a_page_without_results(tmp_path):
    docs = copy_docs(tmp_path)
    _build(docs, [str(REPORT)])
    assert '!!! note "No results yet"' in (docs / "results" / "echo.md").read_text()
    assert "No pilot snapshot exists yet" in (docs / "results" / "pilot.md").read_text()
    assert {p.name for p in (docs / "reference").glob("*.md")} == {
        f"{s}.md"
        for s in ("index", "core", "env", "corpus", "tasks", "train", "eval", "agent", "sim", "report", "pipeline")
    }
    assert "::: terminalworld.agent.harbor.environment" in (docs / "reference" / "agent.md").read_text()
    assert "::: terminalworld.core.render" in (docs / "reference" / "core.md").read_text()


def test_benchmarks_page_has_every_figure_with_its_commit(tmp_path):
    docs = copy_docs(tmp_path)
    _build(docs, [])
    page = (docs / "benchmarks" / "index.md").read_text()
    for result in sorted((REPO_ROOT / "benchmarks" / "results").glob("*.json")):
        assert f"## {result.stem}: " in page
        assert f"[`benchmarks/results/{result.name}`]({URL}/blob/" in page
    render = json.loads((REPO_ROOT / "benchmarks" / "results" / "render.json").read_text())
    tables = json.loads((docs / "results" / "tables.json").read_text())["benchmarks/index.md"]
    assert [str(p["turns"]) for p in render["points"]] in tables
    assert (docs / "benchmarks" / "render.png").exists()


def test_inputs_users_get_wrong_are_one_line_errors(tmp_path):
    docs = copy_docs(tmp_path)
    with pytest.raises(InputError, match="no report artifact here"):
        _build(docs, [str(tmp_path)])
    other = tmp_path / "x" / "1"
    other.mkdir(parents=True)
    (other / RECORD).write_text(json.dumps({"name": "terminalworld/reports/phase0", "version": "1"}))
    with pytest.raises(InputError, match="no page renders 'terminalworld/reports/phase0'"):
        _build(docs, [str(other)])
    (docs / "results").mkdir()
    with pytest.raises(InputError, match="did not write"):
        _build(docs, [])


def test_without_results_the_pages_come_from_the_committed_snapshot(tmp_path):
    docs = copy_docs(tmp_path)
    built = build_docs(DocsBuildConfig(out=str(docs), checkout=str(REPO_ROOT), repo_url=URL))
    committed = [str(docs / "snapshots" / name) for name in ("local-demo",)]
    assert built["built_from"] == f"the committed snapshots: {', '.join(committed)}"
    assert default_results(str(docs)) == committed
    for slug, version in (("world-model-probe", VERSION), ("echo", VERSION)):
        page = (docs / "results" / f"{slug}.md").read_text()
        assert "No results yet" not in page and "### Reproduce" in page and f"## {version}" in page
    # No pilot snapshot is committed yet: its page says so, and shows no figure.
    pilot = (docs / "results" / "pilot.md").read_text()
    assert "No pilot snapshot exists yet" in pilot and "## 20" not in pilot and "### Reproduce" not in pilot
    shutil.rmtree(docs / "snapshots")
    with pytest.raises(InputError, match="no --results given and no committed snapshot") as e:
        build_docs(DocsBuildConfig(out=str(docs), checkout=str(REPO_ROOT), repo_url=URL))
    assert "\n" not in str(e.value)


def test_strict_build_before_docs_build_names_the_command(tmp_path):
    docs = copy_docs(tmp_path)
    done = mkdocs_build(tmp_path, tmp_path / "site")
    assert done.returncode != 0
    assert "run `uv run terminalworld docs build` first" in done.stderr
    assert not (tmp_path / "site" / "index.html").exists()
    assert docs.is_dir()


def test_repo_url_comes_from_the_flag_or_mkdocs_yml(tmp_path):
    docs = copy_docs(tmp_path)
    build_docs(DocsBuildConfig(results=[str(SNAPSHOT)], out=str(docs), checkout=str(REPO_ROOT)))
    import yaml

    configured = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text())["extra"]["repo_url"]
    assert f"]({configured}/tree/" in (docs / "results" / "world-model-probe.md").read_text()
    (tmp_path / "mkdocs.yml").write_text("site_name: x\n")
    with pytest.raises(InputError, match="no repository URL"):
        build_docs(DocsBuildConfig(results=[], out=str(docs), checkout=str(REPO_ROOT)))


def test_cli_builds_the_pages_and_reports_errors_in_one_line(tmp_path, capsys):
    from terminalworld.cli import main

    docs = copy_docs(tmp_path)
    args = ["docs", "build", "--out", str(docs), "--checkout", str(REPO_ROOT), "--repo-url", URL]
    assert main([*args, "--results", str(SNAPSHOT)]) == 0
    assert "results/world-model-probe.md" in json.loads(capsys.readouterr().out)["pages"]
    assert main([*args, "--results", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no report artifact here" in err
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["built_from"].startswith("the committed snapshots: ")


def test_site_builds_strictly_from_the_snapshot_in_under_a_minute(built_site):
    assert built_site.seconds < STRICT_BUILD_SECONDS
    html = (built_site.site / "results" / "world-model-probe.html").read_text()
    assert "Reproduce" in html and "ppl_distribution.png" in html
    assert (built_site.site / "reference" / "core.html").exists()
    assert not (built_site.site / "snapshots").exists()


def test_strict_build_fails_on_a_broken_link_or_a_missing_image(tmp_path, built_site):
    for broken in ("![plot](results/missing.png)", "[page](nowhere.md)"):
        root = tmp_path / broken[:5]
        shutil.copytree(built_site.root, root, ignore=shutil.ignore_patterns("site"))
        (root / "docs" / "risks.md").write_text((root / "docs" / "risks.md").read_text() + f"\n{broken}\n")
        done = mkdocs_build(root, root / "site")
        assert done.returncode != 0 and broken.split("(")[1].rstrip(")") in done.stderr


def test_no_external_fetch_in_the_built_site(built_site):
    for page in built_site.site.rglob("*.html"):
        text = page.read_text()
        assert not re.search(r'<(script|link)[^>]+(src|href)="(https?:)?//', text), page
    assert "fonts.googleapis" not in "".join(p.read_text() for p in built_site.site.rglob("*.css"))


class _PageText(HTMLParser):
    """A page's text as a reader sees it (markup, scripts and styles left out), entities decoded."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag, attrs) -> None:
        self._hidden += tag in ("script", "style")

    def handle_endtag(self, tag) -> None:
        self._hidden -= tag in ("script", "style") and self._hidden > 0

    def handle_data(self, data) -> None:
        if not self._hidden:
            self.parts.append(data)


def test_no_page_shows_a_machine_path_without_a_browser(built_site):
    """The browser test's machine-path check on every generated page's text and on the search index
    (what the search box shows), read from the files: it runs where chromium is missing, where the
    browser test is skipped."""
    origins = json.loads((SNAPSHOT / SNAPSHOT_MANIFEST).read_text())["from"]
    local = [str(REPO_ROOT), str(built_site.root), *(o for o in origins if not o.startswith("{MARIN_PREFIX}"))]
    pages = sorted(built_site.site.rglob("*.html"))
    found = {}
    for page in pages:
        parser = _PageText()
        parser.feed(page.read_text())
        if paths := _machine_paths(" ".join(parser.parts), local):
            found[str(page.relative_to(built_site.site))] = paths
    indexes = list(built_site.site.rglob("search_index.json"))
    for index in indexes:
        docs = json.loads(index.read_text())["docs"]
        if paths := _machine_paths(" ".join(d["title"] + " " + d["text"] for d in docs), local):
            found[str(index.relative_to(built_site.site))] = paths
    assert not found, json.dumps(found, indent=1)
    assert len(pages) > 15 and (built_site.site / "results" / "world-model-probe.html") in pages and indexes


def test_the_page_text_reader_sees_a_path_in_text_not_in_markup():
    parser = _PageText()
    parser.feed('<p class="a">From <code>/home/me/x</code> &amp; <a href="/srv/y">z</a></p><script>"/tmp/q"</script>')
    assert _machine_paths(" ".join(parser.parts), []) == ["/home/me/x"]


def test_loss_mask_example_is_the_current_show_mask_output(capsys):
    from terminalworld.train.maskview import ShowMaskConfig, show_mask

    page = (REPO_ROOT / "docs" / "loss-masks.md").read_text()
    show_mask(
        ShowMaskConfig(tokenizer="qwen3", inputs=[str(FIXTURES / "mini-swe-agent" / "local.traj.json")], color="never")
    )
    parts = re.split(r"^=== (.*) ===$", capsys.readouterr().out, flags=re.M)
    bodies = [body.strip("\n") for body in parts[2::2]]
    for body in bodies[:3]:  # the three arms, each shown in a tab (indented by four spaces)
        assert "\n".join(("    " + line).rstrip() for line in body.splitlines()) in page
    assert bodies[3] in page  # the coverage table
    show_mask(
        ShowMaskConfig(
            tokenizer="qwen3",
            inputs=[str(FIXTURES / "adp_swe-zero-12m" / "sample_raw.json")],
            color="never",
            arm="user",
            max_chars=200,
        )
    )
    assert capsys.readouterr().out.split("===\n")[-1].strip() in page


def test_docs_site_step_depends_on_its_reports_and_publishes(tmp_path, monkeypatch):
    import marin.publish.sites as sites
    from marin.execution.lazy import ArtifactStep

    from terminalworld.pipeline.artifacts import DOCS_SITE
    from terminalworld.pipeline.entry import run
    from terminalworld.pipeline.step import Report
    from terminalworld.report.steps import docs_site

    monkeypatch.setenv("MARIN_PREFIX", str(tmp_path / "prefix"))
    monkeypatch.setattr(sites, "PUBLIC_ROOT", str(tmp_path / "public"))
    report = Report(ArtifactStep.adopt("terminalworld/reports/world-model-probe", "2026.12.02", str(REPORT)))
    publish = {"user": "terminalworld", "slug": "docs", "title": "terminalworld"}
    site = docs_site(reports=[report], repo_url=URL, publish=publish, version="2026.12.02")
    run([site])
    out = tmp_path / "prefix" / DOCS_SITE / "2026.12.02"
    record = json.loads((out / RECORD).read_text())
    assert record["deps"] == ["terminalworld/reports/world-model-probe@2026.12.02"]
    assert record["config"]["reports"] == [str(REPORT)]
    assert "Reproduce" in (out / "site" / "results" / "world-model-probe.html").read_text()
    public = tmp_path / "public" / "terminalworld" / "docs" / "2026.12.02"
    assert (public / "index.html").exists() and json.loads((public / RECORD).read_text())[
        "name"
    ] == "sites/terminalworld/docs"
    assert json.loads((out / "published.json").read_text())["url"].endswith("/terminalworld/docs/2026.12.02/index.html")
    assert [e["name"] for e in json.loads((tmp_path / "public" / "index.json").read_text())] == [
        "sites/terminalworld/docs"
    ]


def test_docs_site_experiment_wires_the_demo_report():
    from tests.conftest import load_experiment

    site = load_experiment("docs_site").site
    assert [d.name for d in site.step.deps] == [
        "terminalworld/reports/world-model-probe",
        "terminalworld/reports/echo-miniature",
    ]


def test_snapshot_carries_the_rows_gzipped_and_names_no_machine_path(tmp_path):
    """A snapshot holds the rows of its held-out, score, agent and simulator artifacts, gzipped, and
    its records and manifest name the prefix logically."""
    import gzip

    from terminalworld.report.snapshot import ROW_ARTIFACTS, SNAPSHOT_ROWS_BUDGET

    prefix = tmp_path / "prefix"
    shutil.copytree(SNAPSHOT, prefix)
    rows = {}
    for record in prefix.rglob(RECORD):
        name = json.loads(record.read_text())["name"]
        if name.startswith(("heldout/", "sim-ppl-eval/")):
            # a session may print a path like a host's: it is kept as printed
            body = f'{{"instance_id": "{name}", "path": "{prefix}/x", "observation": "/tmp/made"}}\n'.encode()
            (record.parent / "rows.jsonl").write_bytes(body)
            (record.parent / "jobs").mkdir()
            (record.parent / "jobs" / "config.json").write_text('{"bwrap": "/srv/host/venv/bin/bwrap"}')
            rows[record.parent.relative_to(prefix)] = body
        rec = json.loads(record.read_text())
        rec["output_path"] = f"/srv/elsewhere/{rec['name']}/{rec['version']}"  # a machine that is gone
        record.write_text(json.dumps(rec))
    assert rows
    docs = copy_docs(tmp_path)
    dest = docs / "snapshots" / "demo"
    _build(docs, [str(prefix / REPORT.relative_to(SNAPSHOT))], snapshot=str(dest))
    for rel, body in rows.items():  # the rows as they were, the prefix named logically
        logical_body = body.replace(f"{prefix}/".encode(), b"{MARIN_PREFIX}/")
        assert gzip.decompress((dest / rel / "rows.jsonl.gz").read_bytes()) == logical_body != body
        # Harbor's own records of a job name no machine path at all
        assert gzip.decompress((dest / rel / "jobs" / "config.json.gz").read_bytes()) == b'{"bwrap": "{LOCAL}/bwrap"}'
    manifest = json.loads((dest / SNAPSHOT_MANIFEST).read_text())
    # The rows written here, beside those the committed snapshot already carries, and no other artifact's.
    assert {f"{rel.parent.as_posix()}@{rel.name}" for rel in rows} <= set(manifest["rows"])
    assert all(r.startswith(ROW_ARTIFACTS) for r in manifest["rows"])
    assert 0 < manifest["rows_bytes"] <= SNAPSHOT_ROWS_BUDGET
    assert manifest["from"] == [f"{{MARIN_PREFIX}}/terminalworld/reports/world-model-probe/{VERSION}"]
    for path in [*dest.rglob(RECORD), dest / SNAPSHOT_MANIFEST]:
        text = path.read_text()
        assert not _machine_paths(text, [str(tmp_path)]), path
    record = json.loads((dest / REPORT.relative_to(SNAPSHOT) / RECORD).read_text())
    assert record["output_path"] == f"{{MARIN_PREFIX}}/terminalworld/reports/world-model-probe/{VERSION}"


def test_committed_snapshots_name_no_machine_path_and_carry_their_rows():
    """Every record and manifest of every committed snapshot names paths logically, and every committed
    snapshot carries the rows its figures come from: its manifest lists row sets (and no note of rows
    not kept), and each listed set holds gzipped row files, so every figure a page quotes from it
    can be recomputed."""
    snaps = sorted(m.parent for m in SNAPSHOT.parent.glob(f"*/{SNAPSHOT_MANIFEST}"))
    assert SNAPSHOT in snaps and {p for p in SNAPSHOT.parent.iterdir() if p.is_dir()} == set(snaps)
    for snap in snaps:
        for path in [*snap.rglob(RECORD), snap / SNAPSHOT_MANIFEST]:
            assert not _machine_paths(path.read_text(), []), path
        for path in snap.rglob("*.gz"):  # the rows: Harbor's records name no machine path, session text no prefix
            text = gzip.decompress(path.read_bytes()).decode(errors="replace")
            if path.name.removesuffix(".gz") in HOST_RECORDS:
                assert not _machine_paths(text, []), path
            assert not re.search(r"/[\w./-]*local-prefix/", text), path
        manifest = json.loads((snap / SNAPSHOT_MANIFEST).read_text())
        assert manifest["rows"] and "rows_note" not in manifest and manifest["rows_bytes"] > 0, snap
        for dep in manifest["rows"]:
            assert list((snap / dep.replace("@", "/")).rglob("*.gz")), f"{snap}: no row files for {dep}"
