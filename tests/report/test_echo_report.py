"""ECHO's report on arms with known numbers: paired changes and intervals, the comparison with
GRPO, the departures from the paper's recipe, and notes that say what the numbers cannot carry."""

import json

import pytest

from terminalworld.report.echo import EchoReportConfig, echo_table, write_echo_report
from terminalworld.train.echo.miniature import EchoRecipe


def _arm(arm, before, after, rewards, recipe=None):
    recipe = recipe or EchoRecipe(arm=arm, steps=2, learning_rate=1e-3)
    steps = [
        {
            "reward_mean": sum(r) / len(r),
            "solved": sum(x > 0 for x in r),
            "rollouts": len(r),
            "zero_variance_groups": 1.0 if len(set(r)) == 1 else 0.0,
            "valid_action_rate": 0.5,
            "env_loss": 1.0,
            "seconds": {"generation": 2.0, "sandbox": 1.0, "forward_backward": 3.0, "step": 6.0},
        }
        for r in rewards
    ]
    from dataclasses import asdict

    return {
        "arm": arm,
        "recipe": asdict(recipe),
        "loss": asdict(recipe.loss()),
        "steps": steps,
        "heldout": {"ids": ["a", "b", "c", "d"], "env_ce_before": before, "env_ce_after": after},
    }


BEFORE = [2.0, 3.0, 4.0, 5.0]


def _arms(rewards=((0, 0), (0, 0))):
    return {
        "grpo": _arm("grpo", BEFORE, BEFORE, rewards),
        "echo": _arm("echo", BEFORE, [1.5, 2.5, 3.5, 4.5], rewards),
        "env-only": _arm("env-only", BEFORE, [2.0, 3.1, 3.9, 5.0], rewards),
    }


def test_paired_changes_comparisons_and_departures():
    t = echo_table(_arms())
    echo, env = t["arms"]["echo"], t["arms"]["env-only"]
    assert t["arms"]["grpo"]["env_ce_change"] == {"mean": 0.0, "ci95": [0.0, 0.0], "n": 4}
    assert echo["env_ce_change"]["mean"] == pytest.approx(-0.5) and echo["env_ce_change"]["ci95"] == [-0.5, -0.5]
    assert echo["env_ce_vs_grpo"]["mean"] == pytest.approx(-0.5) and echo["lam"] == 0.05
    assert t["arms"]["grpo"]["lam"] == 0.0 and env["env_only"] is True
    lo, hi = env["env_ce_vs_grpo"]["ci95"]
    assert env["env_ce_vs_grpo"]["mean"] == pytest.approx(0.0) and lo < 0 < hi
    assert {d["field"]: (d["paper"], d["here"]) for d in t["departures_from_paper"]} == {
        "steps": (100, 2),
        "learning_rate": (1e-6, 1e-3),
    }
    assert t["arms"]["grpo"]["seconds_per_step"]["forward_backward"] == 3.0
    notes = " ".join(t["notes"])
    assert "No rollout of any arm solved a task" in notes
    assert "echo arm ends with lower held-out env CE" in notes
    assert "env-only arm's held-out env CE is not distinguishable" in notes


def test_no_solve_note_only_when_nothing_was_solved():
    t = echo_table(_arms(rewards=((1, 0), (0, 0))))
    assert t["arms"]["grpo"]["solved"] == 1 and t["arms"]["grpo"]["zero_variance_groups_per_step"] == [0.0, 1.0]
    assert not any("No rollout" in n for n in t["notes"])


def test_missing_arm_or_other_trajectories_is_an_error():
    arms = _arms()
    with pytest.raises(ValueError, match="missing env-only"):
        echo_table({k: v for k, v in arms.items() if k != "env-only"})
    arms["echo"]["heldout"]["ids"] = ["a", "b", "c", "x"]
    with pytest.raises(ValueError, match="different held-out trajectories"):
        echo_table(arms)


def test_written_report(tmp_path):
    files = {}
    for arm, doc in _arms().items():
        files[arm] = str(tmp_path / f"{arm}.json")
        (tmp_path / f"{arm}.json").write_text(json.dumps(doc))
    t = write_echo_report(EchoReportConfig(files, str(tmp_path / "out")))
    assert json.loads((tmp_path / "out" / "echo_report.json").read_text())["arms"]["echo"]["lam"] == 0.05
    assert sorted(t["plots"]) == ["env_ce.png", "reward_per_step.png", "step_seconds.png", "zero_variance_groups.png"]
    assert all((tmp_path / "out" / p).stat().st_size > 1000 for p in t["plots"])
    md = (tmp_path / "out" / "echo_report.md").read_text()
    assert (
        "| echo | 0.05 | 0 / 4 | 100% | 50% | 3.5000 | 3.0000 |" in md
        and "`learning_rate`: 1e-06 in the paper, 0.001 here" in md
    )
