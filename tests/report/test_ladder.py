"""The agent grade on the task ladder from agent summaries with known numbers."""

from terminalworld.report.ladder import ladder_blocks, ladder_table
from terminalworld.report.tables import to_markdown


def _summary(solves: list[int], file_found=None):
    per_task = {f"t{i:02d}": [1, s] for i, s in enumerate(solves)}
    process = {"file_found": {"rate": file_found}, "body_shown": {"rate": 0.5}, "line_shown": {"rate": 0.25}}
    return {
        "per_task": per_task,
        "solved_trials": sum(solves),
        "scored_trials": len(solves),
        "valid_action_rate": 0.75,
        "process": process,
    }


def test_per_level_pass_at_k_steps_and_paired_tests():
    a = [1] * 6 + [0] * 18  # 24 tasks: (a) solves six that (b) does not
    b = [0] * 24
    levels = {
        "issue": {"base": _summary(b, 0.1), "assistant-x1": _summary(a, 0.2), "full-x1": _summary(b, 0.3)},
        "pinpoint": {"assistant-x1": _summary(b), "full-x1": _summary(b)},
    }
    table = ladder_table(levels, ["x1", "x9"])
    issue = table["issue"]
    assert [m["name"] for m in issue["models"]] == ["base", "assistant-x1", "full-x1"]
    m = issue["models"][1]
    assert m["pass_at_k"]["1"]["value"] == 0.25 and (m["solved"], m["scored"]) == (6, 24)
    assert (m["file_found"], m["body_shown"], m["line_shown"], m["valid_reply_share"]) == (0.2, 0.5, 0.25, 0.75)
    [test] = issue["paired"]  # x9 has no grades
    assert (test["scale"], test["a_higher"], test["b_higher"], test["ties"]) == ("x1", 6, 0, 18)
    assert test["sign_p"] == 2 / 64 == test["permutation_p"]
    assert table["pinpoint"]["paired"][0]["sign_p"] == 1.0
    md = to_markdown(ladder_blocks(table), level=2)
    assert "### Level: issue" in md and "| x1 | 24 | 0.250 | 6 | 0 | 0.0312 | 0.0312 |" in md
    assert "| pinpoint" not in md and "| full-x1 | 0.000 [0.000, 0.000] | 0 / 24 | 0.750 | — | 0.500 | 0.250 |" in md
    assert ladder_blocks({}) == []
