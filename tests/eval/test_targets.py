"""The target-class rule on hand-classified real rows: SWE-ZERO's fixture rollouts, mini-swe-agent's
runs and sessions of this project's recorder, each held-out row built at a chosen depth."""

import pytest

from terminalworld.core.formats import load_trajectories
from terminalworld.core.heldout import heldout_row
from terminalworld.core.targets import (
    CLASSES,
    MIN_COPY_CHARS,
    class_counts,
    classify,
    copy_share,
    headline,
    is_copy,
    is_sentinel,
)
from tests.paths import FIXTURES, RECORDER_SESSIONS, SWE_ZERO

RECORDER = RECORDER_SESSIONS
MINI = FIXTURES / "mini-swe-agent" / "github_issue.traj.json"
LOCAL = FIXTURES / "mini-swe-agent" / "local.traj.json"

# (file, trajectory, target turn, class, why): classified by hand from the rows' text.
HAND = [
    (SWE_ZERO, 0, 0, "read", "find | head: a listing of the repository, nothing in context yet"),
    (SWE_ZERO, 0, 1, "copy", "the same single path the previous find printed"),
    (SWE_ZERO, 0, 3, "read", "cat of a file never shown"),
    (SWE_ZERO, 0, 8, "predict", "cat of a missing file: an error message"),
    (SWE_ZERO, 0, 11, "read", "grep -r over the repository: matching lines not yet seen"),
    (SWE_ZERO, 0, 12, "copy", "grep found nothing, so the || echo prints its own quoted text"),
    (SWE_ZERO, 1, 6, "copy", "ls -la example/ repeated verbatim from turn 2"),
    (SWE_ZERO, 2, 1, "empty", "find printed nothing: the scorer skips it"),
    (SWE_ZERO, 2, 11, "empty", "rm prints nothing"),
    (SWE_ZERO, 2, 14, "copy", "cat after two sed -i line deletions: every line was in the earlier cat"),
    (MINI, 0, 0, "predict", "cat of a path outside the sandbox: an error"),
    (MINI, 0, 3, "read", "cat of the test file, first time"),
    (MINI, 0, 6, "predict", "python runs the script: execution output"),
    (MINI, 0, 7, "predict", "python -c raises: a traceback"),
    (MINI, 0, 9, "predict", "submit echo chained with git add (an edit): the diff is printed, not the sentinel"),
    (LOCAL, 0, 0, "copy", "echo 'hello world' prints its own argument"),
    (RECORDER, 0, 1, "read", "sed -n range of a file never shown"),
    (RECORDER, 0, 7, "empty", "grep for a name that does not exist prints nothing"),
    (RECORDER, 0, 12, "read", "wc -l of two files: counted from the repository"),
    (RECORDER, 0, 16, "read", "git status of an untouched tree: served from the repository's state"),
    (RECORDER, 0, 20, "copy", "sed -n re-read right after a one-line sed -i of a range shown before"),
    (RECORDER, 0, 21, "read", "git diff after the edit: the diff lines are new text"),
    (RECORDER, 0, 23, "copy", "cat of the test file the session wrote by heredoc one turn earlier"),
    (RECORDER, 0, 25, "sentinel", "the submit echo"),
    (RECORDER, 1, 2, "copy", "tail -n 20 covers the range the sed -n before it printed"),
    (RECORDER, 1, 12, "copy", "sed -n 156,183 lies inside the tail -n 40 printed earlier"),
    (RECORDER, 1, 22, "copy", "cat of the heredoc-written test"),
    (RECORDER, 1, 24, "sentinel", "the submit echo"),
    (RECORDER, 2, 9, "predict", "cat of a file that does not exist: cat's error"),
    (RECORDER, 2, 4, "read", "cat of a whole module never shown"),
]


def _trajectories(path):
    return load_trajectories(str(path))


@pytest.mark.parametrize(
    ("path", "traj", "turn", "expected", "why"), HAND, ids=[f"{h[0].name}-{h[1]}-{h[2]}" for h in HAND]
)
def test_hand_classified_rows(path, traj, turn, expected, why):
    row = heldout_row(_trajectories(path)[traj], turn)
    assert classify(row) == expected, why


def test_every_class_occurs_among_the_hand_rows():
    assert {h[3] for h in HAND} == {*CLASSES, "empty"}


def test_sentinel_is_the_submit_echo_only():
    assert is_sentinel("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n")
    assert is_sentinel(None, "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")
    assert not is_sentinel("echo hello", "hello\n")


def test_copy_thresholds_on_known_answers():
    context = ["line one of the file\nline two of the file\n}\n"]
    assert copy_share(context, "line two of the file\n") == 1.0  # a substring
    assert copy_share(context, "line one of the file\nsomething new here..\n") == 0.5
    assert not is_copy(context, "}\n")  # too short to tell from a coincidence
    assert len("0123456789abcdef") == MIN_COPY_CHARS
    assert is_copy(["0123456789abcdef"], "0123456789abcdef")
    assert not is_copy(["0123456789abcde"], "0123456789abcdef")


def test_counts_and_headline():
    assert class_counts(["read", "copy", "read", "empty"]) == {
        "sentinel": 0,
        "copy": 1,
        "read": 2,
        "predict": 0,
        "empty": 1,
    }
    assert [c for c in CLASSES if headline(c)] == ["read", "predict"]


def test_the_samplers_sentinel_check_agrees_with_the_rule():
    from terminalworld.core.targets import classify_turn, sentinel_turn

    for path in (SWE_ZERO, MINI, LOCAL, RECORDER):
        for traj in load_trajectories(str(path)):
            for i, turn in enumerate(traj.turns):
                if turn.observation is not None:
                    assert sentinel_turn(traj, i) == (classify_turn(traj, i) == "sentinel")
