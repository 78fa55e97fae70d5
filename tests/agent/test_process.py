"""The steps of a fix on hand-made trials with known answers at every level of the ladder, and the
trial files read as hostile."""

import os

import pytest

from terminalworld.agent.process import (
    LOCALISATION,
    MAX_READ,
    STEPS,
    Bug,
    changed_lines,
    commands_and_outputs,
    read_capped,
    replies,
    trial_steps,
)

SOURCE = """def clamp(x, lo, hi):
    if x < lo:
        return lo
    if x >= hi:
        return hi
    return x
"""
CALL = ">>> from pkg.util import clamp\n>>> clamp(3, 0, 3)\n3\n"
INSTRUCTION = {  # what each level of the ladder gives (tasks.make.instruction's shape)
    "issue": f"`clamp` gives a different answer:\n{CALL}The expected result is `None`.",
    "function": f"`clamp` (defined in `pkg/util.py`) gives a different answer:\n{CALL}Expected `None`. "
    "Reproduce it with `python3 -c 'from pkg.util import clamp; print(repr(clamp(3, 0, 3)))'`.",
}
INSTRUCTION["pinpoint"] = INSTRUCTION["function"] + "\nThe bug is at line 4 of `pkg/util.py`:\nif x >= hi:\n"
OBS = "Observation: "
DIFF = (
    "diff --git a/pkg/util.py b/pkg/util.py\n--- a/pkg/util.py\n+++ b/pkg/util.py\n"
    "@@ -3,3 +3,3 @@ def clamp(x, lo, hi):\n         return lo\n-    if x >= hi:\n+    if x > hi:\n         return hi\n"
)
LEVELS = ("issue", "function", "pinpoint")


def _bug(level: str) -> Bug:
    return Bug(
        path="pkg/util.py",
        function="clamp",
        line="if x >= hi:",
        body=tuple(x.strip() for x in SOURCE.splitlines()),
        wrong_output="3",
        fix_lines=changed_lines(DIFF, "pkg/util.py"),
        instruction=INSTRUCTION[level],
    )


def _messages(*turns):
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    for command, output in turns:
        messages.append({"role": "assistant", "content": f"THOUGHT: x\n\n```bash\n{command}\n```"})
        if output is not None:
            messages.append({"role": "user", "content": OBS + output})
    return messages


def _pairs(*turns):
    return commands_and_outputs(_messages(*turns))


@pytest.mark.parametrize("level", LEVELS)
def test_an_agent_that_finds_reads_reproduces_and_fixes_reaches_every_step_its_level_leaves(level):
    pairs = _pairs(
        ("grep -rn 'def clamp' .", "./pkg/util.py:1:def clamp(x, lo, hi):"),
        ("sed -n 1,6p pkg/util.py", SOURCE),
        ("python3 -c 'from pkg.util import clamp; print(repr(clamp(3, 0, 3)))'", "3"),
        ("sed -i '4s/>=/>/' pkg/util.py", ""),
    )
    steps = trial_steps(pairs=pairs, bug=_bug(level), diff=DIFF, solved=True, replies=(4, 4))
    given = {"issue": (), "function": ("file_found",), "pinpoint": ("file_found", "line_shown")}[level]
    assert steps == dict.fromkeys(STEPS, True) | dict.fromkeys(given) | {"valid_reply_share": 1.0}


@pytest.mark.parametrize("level", LEVELS)
def test_naming_the_prompts_path_and_function_reaches_no_localisation_step(level):
    # Every command names what the instruction (or a guess) gives; no output shows anything new.
    pairs = _pairs(
        ("ls pkg/util.py", "pkg/util.py"),
        ("grep -c clamp pkg/util.py", "1"),
        ("echo 'def clamp(x, lo, hi):'; echo 'if x >= hi:'", "def clamp(x, lo, hi):\nif x >= hi:"),
        ("echo 3", "3"),
    )
    steps = trial_steps(pairs=pairs, bug=_bug(level), diff="", solved=False, replies=(5, 4))
    assert not any(steps[s] for s in LOCALISATION) and steps["reproduced"] is False
    assert [s for s in LOCALISATION if steps[s] is False] == {
        "issue": ["file_found", "body_shown", "line_shown"],
        "function": ["body_shown", "line_shown"],
        "pinpoint": ["body_shown"],
    }[level]
    assert (steps["diff"], steps["edited_file"], steps["edited_lines"], steps["valid_reply_share"]) == (
        False,
        False,
        False,
        0.8,
    )


def test_near_misses_do_not_count():
    # A listing shows the path among others; a Python run without the function prints the wrong
    # value; the function's head without most of its body; an edit of the file away from the bug.
    listing = "\n".join(f"./pkg/m{i}.py" for i in range(5)) + "\n./pkg/util.py"
    pairs = _pairs(
        ("find . -name '*.py'", listing),
        ("python3 -c 'print(3)'", "3"),
        ("head -2 pkg/util.py", "def clamp(x, lo, hi):\n    if x < lo:"),
        ("grep -n clamped other.py", "other.py:1:def clamp_all():"),
    )
    far = "diff --git a/pkg/util.py b/pkg/util.py\n@@ -6,1 +6,2 @@\n     return x\n+# note\n"
    steps = trial_steps(pairs=pairs, bug=_bug("issue"), diff=far, solved=False)
    assert {s: steps[s] for s in STEPS} == dict.fromkeys(STEPS, False) | {"edited_file": True, "diff": True}
    assert steps["valid_reply_share"] is None  # no replies known (Harbor's own agents)


def test_changed_lines_of_a_diff():
    assert changed_lines(DIFF, "pkg/util.py") == {4} and changed_lines(DIFF, "other.py") == frozenset()
    insert = "diff --git a/a.py b/a.py\n@@ -10,2 +10,3 @@\n x\n+y\n z\n"
    assert changed_lines(insert, "a.py") == {10, 11}  # the lines either side of the insertion


def test_unknown_bugs_leave_their_steps_unknown_and_valid_replies_are_counted_once():
    nothing = trial_steps(pairs=[], bug=None, diff="", solved=False)
    assert nothing == dict.fromkeys(STEPS) | {"diff": False, "solved": False, "valid_reply_share": None}
    messages = [*_messages(("ls", "a")), {"role": "assistant", "content": "```bash\nls\n```\n```bash\npwd\n```"}]
    assert replies(messages) == (2, 1) and len(commands_and_outputs(messages)) == 1


def test_a_reply_without_one_bash_block_ran_nothing():
    messages = [{"role": "assistant", "content": "no block"}, {"role": "user", "content": "warning"}]
    assert commands_and_outputs(messages) == []


def test_trial_files_are_read_as_hostile(tmp_path):
    (tmp_path / "secret").write_text("host secret")
    os.symlink(tmp_path / "secret", tmp_path / "link")
    assert read_capped(tmp_path / "link") is None
    os.mkfifo(tmp_path / "fifo")
    assert read_capped(tmp_path / "fifo") is None  # opened without blocking, then refused
    (tmp_path / "big").write_bytes(b"x" * (MAX_READ + 1))
    assert read_capped(tmp_path / "big") is None
    (tmp_path / "bad").write_bytes(b"ok \xff")
    assert read_capped(tmp_path / "bad") == "ok \ufffd"
    assert read_capped(tmp_path / "absent") is None
