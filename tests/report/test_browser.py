"""The built docs site in a real browser: Debian's chromium driven by Playwright, over HTTP on
127.0.0.1. Every page: no console error, nothing fetched from elsewhere, every link resolving,
every image loaded, every results table with the expected rows, every Reproduce commit in the
history, no path of the machine that built the pages or the snapshot. A failure leaves a screenshot of each page in the artifacts folder."""

import functools
import json
import os
import re
import shutil
import subprocess
import threading
import urllib.error
import urllib.request
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urldefrag, urlparse

import pytest

from terminalworld.pipeline.artifacts import PILOT_REPORT
from terminalworld.report.site import TABLES
from tests.paths import REPO_ROOT
from tests.report.conftest import SNAPSHOT

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
# An absolute path of a machine's own folders (the sandbox's /testbed or /logs are the project's).
MACHINE_PATH = re.compile(r"(?<![\w.~{}-])/(?:home|root|tmp|work|Users|mnt|private|var/folders|opt|srv)/[^\s`'\")]*")
# Where screenshots go on failure (CI may point it at a folder it keeps).
ARTIFACTS = Path(os.environ.get("TERMINALWORLD_TEST_ARTIFACTS", REPO_ROOT / "tmp" / "artifacts")) / "docs-site"


def _browser() -> str:
    """Debian's chromium (Playwright's own browser download is never used). In CI, where
    `.ci/run` installs it, a missing browser is a failure; elsewhere the test is skipped."""
    found = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if found:
        return found
    message = "no chromium on PATH: install it with `apt-get install -y chromium` (.ci/run does)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def server(built_site):
    """The built site served over HTTP on 127.0.0.1; yields its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(built_site.site))
    httpd = _QuietServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        pass  # the browser leaving a page mid-transfer is not a failure of the site


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def _in_history(commit: str) -> bool:
    command = ["git", "-C", str(REPO_ROOT), "cat-file", "-e", f"{commit}^{{commit}}"]
    return subprocess.run(command, capture_output=True).returncode == 0


def _machine_paths(text: str, local: list[str]) -> list[str]:
    return sorted({*MACHINE_PATH.findall(text), *(p for p in local if p in text)})


def test_machine_path_finder_sees_the_paths_a_page_must_not_show():
    built_from = "/srv/checkout/local-prefix/terminalworld/reports/world-model-probe/2026.12.03"  # as pages once said
    assert _machine_paths(f"From `{built_from}`.", []) == [built_from]
    assert _machine_paths("MARIN_PREFIX=/home/me/local-prefix uv run", []) == ["/home/me/local-prefix"]
    assert _machine_paths("x at /srv/ci/checkout", ["/srv/ci"]) == ["/srv/ci", "/srv/ci/checkout"]
    shown = "`{MARIN_PREFIX}/terminalworld/reports/x/1`, /testbed, /logs/verifier/reward.txt, gs://b/tmp/x"
    assert _machine_paths(shown, []) == []


def test_every_page_in_a_real_browser(built_site, server):
    from playwright.sync_api import sync_playwright

    executable = _browser()
    pages = sorted(p.relative_to(built_site.site).as_posix() for p in built_site.site.rglob("*.html"))
    tables = json.loads((built_site.site / TABLES).read_text())
    arms = [a["arm"] for a in json.loads(next(SNAPSHOT.rglob("report.json")).read_text())["arms"]]
    problems: dict[str, list[str]] = {}
    snapshots = SNAPSHOT.parent
    local = [str(REPO_ROOT), str(built_site.root)]
    origins = [f for m in snapshots.glob("*/snapshot.json") for f in json.loads(m.read_text())["from"]]
    local += [f for f in origins if not f.startswith("{MARIN_PREFIX}")]  # a logical origin is what pages show
    # A pilot page shows figures only from a committed snapshot of its rows; none is committed yet.
    pilot_committed = any(
        r.startswith(f"{PILOT_REPORT}@")
        for m in snapshots.glob("*/snapshot.json")
        for r in json.loads(m.read_text())["reports"]
    )
    checked_links: dict[str, int] = {}
    commits: set[str] = set()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        tab = browser.new_page()
        errors: list[str] = []
        tab.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
        tab.on("pageerror", lambda e: errors.append(f"page error: {e}"))
        tab.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
        tab.on("request", lambda r: None if r.url.startswith(server) else errors.append(f"fetched {r.url}"))
        for rel in pages:
            errors.clear()
            tab.goto(server + rel, wait_until="networkidle")
            found = list(errors)
            for image in tab.eval_on_selector_all("img", "els => els.map(e => [e.src, e.complete && e.naturalWidth])"):
                if not image[1]:
                    found.append(f"image not loaded: {image[0]}")
            for href in tab.eval_on_selector_all("a[href]", "els => els.map(e => e.href)"):
                url, fragment = urldefrag(href)
                if url.startswith(server):
                    if url not in checked_links:
                        checked_links[url] = _status(url)
                    if checked_links[url] != 200:
                        found.append(f"link {href}: HTTP {checked_links[url]}")
                    elif fragment and f'id="{fragment}"' not in (built_site.site / url[len(server) :]).read_text():
                        found.append(f"link {href}: no anchor #{fragment}")
                elif m := re.search(r"/(?:tree|blob)/([0-9a-f]{7,40})(/|$)", urlparse(href).path):
                    commits.add(m.group(1))
                    if not _in_history(m.group(1)):
                        found.append(f"link {href}: commit {m.group(1)} is not in the repository's history")
            if paths := _machine_paths(tab.inner_text("body"), local):
                found.append(f"machine paths on the page: {paths}")
            md = rel.removesuffix(".html") + ".md"
            shown = tab.eval_on_selector_all(
                "article table", "ts => ts.map(t => [...t.tBodies[0].rows].map(r => r.cells[0].textContent.trim()))"
            )
            # The manifest holds each table's first column as Markdown; the browser shows it as text.
            expected = [[c.replace("`", "").replace("&lt;", "<") for c in t] for t in tables.get(md, [])]
            if md in tables and shown != expected:
                found.append(f"tables {shown} differ from the expected {expected}")
            if md == "results/world-model-probe.md" and (
                shown[0] != arms or "Reproduce" not in tab.inner_text("article")
            ):
                found.append(f"probe table rows {shown[0]} are not the report's arms {arms}")
            if md == "results/pilot.md":
                text = tab.inner_text("article")
                if pilot_committed and "Reproduce" not in text:
                    found.append("the pilot's committed run has no Reproduce section")
                if not pilot_committed and (shown or "No results yet" not in text):
                    found.append("the pilot's page shows figures, but no snapshot of its rows is committed")
            if found:
                problems[rel] = found
        if problems:
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            for rel in pages:
                tab.goto(server + rel, wait_until="networkidle")
                tab.screenshot(path=str(ARTIFACTS / (rel.replace("/", "__") + ".png")), full_page=True)
        browser.close()
    assert not problems, f"screenshots in {ARTIFACTS}: " + json.dumps(problems, indent=1)
    assert {"results/world-model-probe.html", "results/pilot.html"} <= set(pages) and len(pages) > 15
    assert checked_links and commits  # links were followed and Reproduce commits were seen
