"""`agent-eval --environment simulated` after Harbor's job (`sim.harbor_loop`), on a job folder laid
out as Harbor writes it: the grounding mode is in every closed-loop row and their summary; each
route's share counts the real output; `--grounding` without a simulator is refused, and so is a
simulated job whose caller did not pass the closed loop (the command line does)."""

import json
from pathlib import Path

import pytest

from terminalworld.agent.evaluate import JOB_NAME, AgentEvalConfig, agent_eval
from terminalworld.agent.harbor import runtime
from terminalworld.agent.results import trial_row
from terminalworld.cli import commands
from terminalworld.errors import InputError
from terminalworld.pipeline.artifacts import SHADOW_LOG
from terminalworld.sim.harbor_loop import write_closed_loop

# A generated turn whose capped text is short, then one the shadow served exactly; the environment
# counts each real output's tokens with the simulator's tokenizer.
TURNS = [
    {"command": "python -m pytest", "simulated": "1 passed", "real": "x" * 400, "route": "generated"},
    {"command": "cat a.py", "simulated": "y" * 40, "real": "y" * 40, "route": "exact"},
]
TURNS = [{**t, "observation_tokens": n} for t, n in zip(TURNS, (101, 11), strict=True)]


def _job(out: Path) -> Path:
    """What Harbor leaves of a simulated job: one trial, its shadow log, its result."""
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
    assert trial_row(result)["task"] == "t1"
    return trial.parent


def test_the_mode_is_in_every_row_and_the_summary(tmp_path):
    out = tmp_path / "out"
    s = write_closed_loop(_job(out), out, "hybrid")  # what agent_eval calls after a simulated job, given it
    loops = [json.loads(x) for x in (out / "closed_loop.jsonl").read_text().splitlines()]
    assert [r["grounding"] for r in loops] == ["hybrid"] and s["grounding"] == "hybrid"
    # The real output's tokens, for both routes: 101 and 11, not the generated text's 3 and 11.
    assert [t["observation_tokens"] for t in loops[0]["turns"]] == [101, 11]
    assert s["exact_token_share"] == pytest.approx(11 / 112) and s["exact_turns"] == 1


def test_grounding_without_a_simulator_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(runtime, "harbor_python", lambda: pytest.fail("Harbor must not run"))
    cfg = AgentEvalConfig(tasks=str(tmp_path), out=str(tmp_path / "out"), grounding="retrieved")
    with pytest.raises(InputError, match="--grounding retrieved needs --environment simulated"):
        agent_eval(cfg)


def test_a_simulated_job_without_its_closed_loop_is_refused_before_harbor_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(runtime, "harbor_python", lambda: pytest.fail("Harbor must not run"))
    cfg = AgentEvalConfig(tasks=str(tmp_path), out=str(tmp_path / "out"), environment="simulated", simulator="x")
    with pytest.raises(TypeError, match="needs closed_loop"):
        agent_eval(cfg)


def test_the_command_line_hands_the_closed_loop_to_the_agent_grade(tmp_path):
    # The simulator's stage sits above the agent's: the command line, which owns both, passes it in.
    _, fn = commands().parse(["agent-eval", "--tasks", str(tmp_path), "--out", str(tmp_path / "out")])
    assert fn.func is agent_eval and fn.keywords == {"closed_loop": write_closed_loop}
