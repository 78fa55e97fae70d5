"""The steps of a fix on hand-made trials with known answers, and the trial files read as hostile."""

import os

from terminalworld.agent.process import MAX_READ, commands_and_outputs, read_capped, trial_steps

BUG = {"path": "pkg/util.py", "function": "clamp"}
OBS = "Observation: "


def _pairs(*turns):
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    for command, output in turns:
        messages.append({"role": "assistant", "content": f"THOUGHT: x\n\n```bash\n{command}\n```"})
        if output is not None:
            messages.append({"role": "user", "content": OBS + output})
    return commands_and_outputs(messages)


def test_each_step_is_read_from_the_commands_the_diff_and_the_reward():
    pairs = _pairs(
        ("grep -rn clamp .", "./pkg/util.py:3:def clamp(x, lo, hi):"),
        ("python3 -c 'from pkg.util import clamp; print(clamp(5, 0, 3))'", "5"),
        ("sed -i 's/>/>=/' pkg/util.py", ""),
    )
    diff = "diff --git a/pkg/util.py b/pkg/util.py\n--- a/pkg/util.py\n+++ b/pkg/util.py\n@@ -1 +1 @@\n-a\n+b\n"
    steps = trial_steps(pairs=pairs, bug=BUG, diff=diff, solved=True)
    assert steps == dict.fromkeys(steps, True)


def test_near_misses_do_not_count():
    # The file named only as part of a longer name, the function as part of another word, Python run
    # without the function, the diff in another file.
    pairs = _pairs(
        ("cat pkg/util.pyc; ls", "pkg/util.py\n"),  # ls's listing is not a search
        ("grep -n clamped other.py", "other.py:1:def clamp_all():"),
        ("python3 -c 'print(1)'", "1"),
    )
    diff = "diff --git a/other.py b/other.py\n"
    steps = trial_steps(pairs=pairs, bug=BUG, diff=diff, solved=False)
    assert steps == {
        "valid_action": True,
        "file_localised": False,
        "function_localised": False,
        "reproduced": False,
        "edited_file": False,
        "diff": True,
        "solved": False,
    }


def test_reading_the_function_counts_as_finding_it_and_unknowns_stay_unknown():
    pairs = _pairs(("sed -n 1,20p util.py", "def clamp(x, lo, hi):\n    return x"))
    steps = trial_steps(pairs=pairs, bug=BUG, diff=None, solved=None)
    assert steps["file_localised"] and steps["function_localised"] and not steps["reproduced"]
    assert steps["edited_file"] is None and steps["diff"] is None and steps["solved"] is None
    nothing = trial_steps(pairs=[], bug=None, diff="", solved=False)
    assert nothing == {
        "valid_action": False,
        "file_localised": None,
        "function_localised": None,
        "reproduced": None,
        "edited_file": None,
        "diff": False,
        "solved": False,
    }


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
