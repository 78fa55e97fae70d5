"""Hostile grep patterns through a real Harbor job whose simulated environment grounds every
command (`--grounding retrieved`): a catastrophic backtracking pattern and 500 nested groups over
a generated task's repository leave the trial on time and scored, within a short agent timeout."""

import concurrent.futures
import json
import re
import shutil

import pytest

from terminalworld.agent.evaluate import AgentEvalConfig, agent_eval
from terminalworld.core.trajectories import SUBMIT_SENTINEL
from terminalworld.pipeline.artifacts import SHADOW_LOG
from terminalworld.sim.harbor_loop import write_closed_loop

AGENT_TIMEOUT_S = 300.0  # short beside a stall that never ends; room for a loaded CPU's simulator
COMMANDS = [r"grep -rn '\(.*\)*QQQ' .", "grep -rnE '" + "(" * 500 + "def" + ")" * 500 + "' ."]


@pytest.mark.slow_ci
def test_hostile_patterns_leave_a_grounded_trial_on_time_and_scored(generated_tasks, tmp_path):
    task = sorted(p for p in generated_tasks.iterdir() if p.is_dir())[0]
    one = tmp_path / "tasks"
    shutil.copytree(task, one / task.name, symlinks=True)
    toml = one / task.name / "task.toml"
    toml.write_text(re.sub(r"(\[agent\]\ntimeout_sec = )[\d.]+", rf"\g<1>{AGENT_TIMEOUT_S}", toml.read_text()))
    replies = [f"THOUGHT: search.\n\n```bash\n{c}\n```" for c in COMMANDS]
    replies.append(f"THOUGHT: done.\n\n```bash\necho {SUBMIT_SENTINEL}\n```")
    (tmp_path / "replies.json").write_text(json.dumps({"*": replies}))
    cfg = AgentEvalConfig(
        tasks=str(one),
        out=str(tmp_path / "out"),
        agent="scripted",
        replies=str(tmp_path / "replies.json"),
        environment="simulated",
        simulator="smollm2",
        simulator_tokens=1,
        grounding="retrieved",
        grounding_budget=64,  # the simulator reads a short block: its prefill is most of the trial's time
    )
    # A stuck job would hold this test forever: the bound is a failure, not a speed claim.
    pool = concurrent.futures.ThreadPoolExecutor(1)
    job = pool.submit(agent_eval, cfg, write_closed_loop)
    pool.shutdown(wait=False)
    try:
        s = job.result(timeout=600)
    except concurrent.futures.TimeoutError:
        pytest.fail("the grounded job did not end within 10 minutes")
    # The agent was not cut by its timeout, the trial is scored (0: nothing was fixed), no error.
    assert (s["scored_trials"], s["pass_at_1"], s["errors"]) == (1, 0.0, {})
    rows = [json.loads(x) for x in next((tmp_path / "out" / "jobs").rglob(SHADOW_LOG)).read_text().splitlines()]
    assert [r["command"] for r in rows] == [*COMMANDS, f"echo {SUBMIT_SENTINEL}"][: len(rows)]
    # No line holds QQQ (no block); the nested pattern reached the repository's `def` lines.
    assert rows[0]["grounding_tokens"] == 0 and rows[1]["grounding_tokens"] > 0
