"""The submission diff is the host's: computed from the copy, bounded, blind to links and floods."""

import os
import subprocess

from terminalworld.tasks import submission


def _repo(root):
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text("x = 1\ny = 2\n")
    (root / "b.txt").write_text("keep\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")


def test_the_diff_is_git_s_for_changed_and_deleted_tracked_files(tmp_path):
    original, copy = tmp_path / "o", tmp_path / "c"
    _repo(original)
    subprocess.run(["cp", "-a", str(original), str(copy)], check=True)
    assert submission.submission_diff(str(original), str(copy)) == ""
    (copy / "pkg" / "a.py").write_text("x = 1\ny = 3\n")
    (copy / "new.py").write_text("untracked, as git diff leaves it out\n")
    (copy / ".git" / "config").write_text("[diff]\nexternal = evil\n")
    diff = submission.submission_diff(str(original), str(copy))
    assert diff.startswith("diff --git a/pkg/a.py b/pkg/a.py\n--- a/pkg/a.py\n+++ b/pkg/a.py\n")
    assert "-y = 2\n+y = 3\n" in diff and "new.py" not in diff and ".git" not in diff
    # A tracked file replaced by a symlink to a host file counts as deleted; the link is not read.
    os.unlink(copy / "b.txt")
    os.symlink("/etc/passwd", copy / "b.txt")
    diff = submission.submission_diff(str(original), str(copy))
    assert "diff --git a/b.txt b/b.txt\ndeleted file\n" in diff and "root:" not in diff


def test_a_flooded_file_is_not_diffed_line_by_line(tmp_path):
    original, copy = tmp_path / "o", tmp_path / "c"
    _repo(original)
    subprocess.run(["cp", "-a", str(original), str(copy)], check=True)
    (copy / "pkg" / "a.py").write_bytes(b"z\n" * (submission.TEXT_BYTES))
    assert submission.submission_diff(str(original), str(copy)).endswith("b/pkg/a.py differ\n")
