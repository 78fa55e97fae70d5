"""What a sandboxed command can read of the host's Python sources, as `env.visible` indexes it: the
sandbox's own standard library (which every host that runs sandboxes has), and planted sources of
each kind the index reads."""

import gzip
import os
import zipfile
from pathlib import Path

from terminalworld.env import visible
from terminalworld.env.sandbox import Sandbox, SandboxConfig, system_binds

FUNCTION = """def pick(items, limit):
    kept = []
    for item in items:
        if item <= limit:
            kept.append(item)
    return kept
"""


def test_the_sandboxs_own_standard_library_is_indexed_where_the_sandbox_reads_it(workdir):
    (workdir / "repo").mkdir()
    shown = Sandbox(str(workdir / "repo"), SandboxConfig(timeout_s=60)).run(
        'python3 -c "import colorsys; print(colorsys.__file__)"'
    )
    path = shown.output.strip()
    assert shown.returncode == 0 and path.startswith(tuple(f"{r}/" for r in system_binds())), shown.output
    text = Path(path).read_text()  # the same path on the host: the sandbox binds it there
    line = next(row for row in text.splitlines() if "maxc = max(r, g, b)" in row)
    assert visible.fix_seen("rgb_to_hsv", [line]) is not None
    assert visible.fix_seen("rgb_to_hsv", ["    maxc = max(r, g, b) + 1"]) is None  # not its line
    assert visible.fix_seen("no_such_function_anywhere", [line]) is None


def test_planted_sources_of_every_kind_are_matched_on_the_fixed_lines(tmp_path):
    root = tmp_path / "usr"
    (root / "lib" / "pkg").mkdir(parents=True)
    # Another version of the same function: it differs elsewhere, and still holds the fixed line.
    nearby = FUNCTION.replace("kept = []", "kept = list()").replace("return kept", "return list(kept)")
    (root / "lib" / "pkg" / "near.py").write_text("import os\n\n\nclass A:\n    " + nearby.replace("\n", "\n    "))
    with gzip.open(root / "lib" / "doc.py.gz", "wt") as f:
        f.write(FUNCTION.replace("pick", "zipped_gz"))
    with zipfile.ZipFile(root / "lib" / "thing-1.0-py3-none-any.whl", "w") as whl:
        whl.writestr("thing/core.py", FUNCTION.replace("pick", "in_a_wheel"))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "gone.py").write_text(FUNCTION.replace("pick", "behind_a_link"))
    os.symlink(outside, root / "lib" / "link")
    roots = (str(root),)
    assert visible.fix_seen("pick", ["        if item <= limit:"], roots) == str(root / "lib/pkg/near.py")
    assert visible.fix_seen("pick", ["    if  item <=   limit:"], roots) is not None  # blanks do not hide it
    assert visible.fix_seen("pick", ["        if item < limit:"], roots) is None
    assert visible.fix_seen("zipped_gz", ["if item <= limit:"], roots) == str(root / "lib/doc.py.gz")
    assert visible.fix_seen("in_a_wheel", ["if item <= limit:"], roots).endswith("-any.whl!thing/core.py")
    assert visible.fix_seen("behind_a_link", ["if item <= limit:"], roots) is None  # outside the sandbox
    # A dropped branch: the `if` line and most of its block, wherever the function moved them.
    branch = ["        if item <= limit:", "            kept.append(item)"]
    assert visible.fix_seen("pick", branch, roots) is not None
    assert visible.fix_seen("pick", ["        if item > limit:", "            kept.append(item)"], roots) is None
    # A line of another function of the file does not count.
    assert visible.fix_seen("pick", ["import os"], roots) is None
    assert visible.sources(roots).skipped == 0
