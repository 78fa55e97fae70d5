"""`agent-eval --environment simulated` after Harbor's job (`sim.harbor_loop`), on a job folder laid
out as Harbor writes it: the grounding mode is in every trial row, every closed-loop row and the
summary; each route's share counts the real output; `--grounding` without a simulator is refused."""

import json
from pathlib import Path

import pytest

import terminalworld.sim.harbor_loop as harbor_loop
from terminalworld.agent.evaluate import JOB_NAME, AgentEvalConfig
from terminalworld.agent.harbor import runtime
from terminalworld.agent.results import trial_row
from terminalworld.errors import InputError
from terminalworld.pipeline.artifacts import SHADOW_LOG

TURNS = [  # a generated turn whose capped text is short, then one the shadow served exactly
    {"command": "python -m pytest", "simulated": "1 passed", "real": "x" * 400, "route": "generated"},
    {"command": "cat a.py", "simulated": "y" * 40, "real": "y" * 40, "route": "exact"},
]


def _fake_agent_eval(cfg):
    """What `agent.evaluate.agent_eval` leaves: one trial of Harbor's job, `trials.jsonl`, `summary.json`."""
    out = Path(cfg.out)
    trial = out / "jobs" / JOB_NAME / "t1__abc"
    (trial / "agent").mkdir(parents=True)
    result = {
        "task_name": "t1",
        "trial_name": "t1__abc",
        "verifier_result": {"rewards": {"reward": 1.0}},
        "agent_result": {"metadata": {"outcome": "submitted", "turns": 2}},
    }
    (trial / "result.json").write_text(json.dumps(result))
    (trial / "agent" / "trajectory.json").write_text(json.dumps({"metadata": {"outcome": "submitted"}}))
    timing = {"sim_seconds": 0.5, "sim_tokens": 3, "real_seconds": 0.1, "grounding_tokens": 0}
    (trial / "agent" / SHADOW_LOG).write_text("".join(json.dumps({**t, **timing}) + "\n" for t in TURNS))
    # agent_eval records the mode of a simulated environment in its rows and summary.
    (out / "trials.jsonl").write_text(json.dumps({**trial_row(result), "grounding": cfg.grounding}) + "\n")
    summary = {"pass_at_1": 1.0, "scored_trials": 1, "grounding": cfg.grounding}
    (out / "summary.json").write_text(json.dumps(summary))
    return summary


def test_the_mode_is_in_every_row_and_the_summary(tmp_path, monkeypatch):
    monkeypatch.setattr(harbor_loop, "agent_eval", _fake_agent_eval)
    cfg = AgentEvalConfig(tasks=str(tmp_path), out=str(tmp_path / "out"), environment="simulated", grounding="hybrid")
    s = harbor_loop.agent_grade(cfg)
    out = tmp_path / "out"
    trials = [json.loads(x) for x in (out / "trials.jsonl").read_text().splitlines()]
    loops = [json.loads(x) for x in (out / "closed_loop.jsonl").read_text().splitlines()]
    assert [r["grounding"] for r in trials + loops] == ["hybrid", "hybrid"] and trials[0]["task"] == "t1"
    assert s["grounding"] == s["closed_loop"]["grounding"] == "hybrid"
    assert json.loads((out / "summary.json").read_text()) == s
    # A token per 4 characters of the real output, for both routes: 101 and 11, not 3 and 11.
    assert [t["observation_tokens"] for t in loops[0]["turns"]] == [101, 11]
    assert s["closed_loop"]["exact_token_share"] == pytest.approx(11 / 112) and s["closed_loop"]["exact_turns"] == 1


def test_grounding_without_a_simulator_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(runtime, "harbor_python", lambda: pytest.fail("Harbor must not run"))
    cfg = AgentEvalConfig(tasks=str(tmp_path), out=str(tmp_path / "out"), grounding="retrieved")
    with pytest.raises(InputError, match="--grounding retrieved needs --environment simulated"):
        harbor_loop.agent_grade(cfg)
