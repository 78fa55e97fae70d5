"""The README is the front door: it opens with the two commands (the demo and the tests, the
command CI runs), stays short, and every page it links to exists; the rest lives on the site."""

import re

from tests.paths import REPO_ROOT

README = REPO_ROOT / "README.md"


def test_the_readme_opens_with_the_two_commands_and_stays_short():
    text = README.read_text()
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.splitlines()]
    assert commands == [
        "pip install uv && uv run python experiments/local_demo.py --run",
        "pip install uv && uv run pytest",
    ]
    assert text.index("```bash") < text.index("\n## ")  # before any section
    assert len(text.splitlines()) <= 250


def test_every_page_the_readme_links_to_exists():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text())
    local = [link for link in links if not link.startswith("http")]
    assert local and [link for link in local if not (REPO_ROOT / link).is_file()] == []
