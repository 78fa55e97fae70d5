"""Tier 3 through Harbor: the agent grade in Harbor's simulated environment
(`sim.harbor_environment.SimulatedEnvironment`), where a simulator answers the agent's commands
and the sandbox runs them too as the shadow Harbor's verifier grades, summarised as the closed loop.

`agent_grade` is the `agent-eval` command: Harbor's job and its trial rows (`agent.evaluate`), and
in the simulated environment the closed-loop episodes of the job (`closed_loop.jsonl`, one row per
trial) with their summary under the summary's `closed_loop`. In the simulated environment the
grounding mode is recorded in every row of both files and in the summary, as `score` and
`sim-eval` record it; the other environments have no simulator, so `--grounding` is refused there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from terminalworld.agent.evaluate import JOB_NAME, AgentEvalConfig, agent_eval
from terminalworld.agent.results import trial_row
from terminalworld.core.records import atomic_jsonl, dumps_row, write_json
from terminalworld.pipeline.artifacts import SHADOW_LOG
from terminalworld.sim.closed_loop import LoopEpisode, LoopTurn, loop_summary
from terminalworld.sim.fidelity import similarity


def agent_grade(cfg: AgentEvalConfig) -> dict[str, Any]:
    """Run (or resume) the Harbor job (in the simulated environment `agent_eval` records the grounding
    mode in every trial row and the summary); there, also write its closed loop, mode in every row."""
    summary = agent_eval(cfg)
    if cfg.environment != "simulated":
        return summary
    out = Path(cfg.out).resolve()
    episodes = harbor_loop(out / "jobs" / JOB_NAME)
    with atomic_jsonl(str(out / "closed_loop.jsonl")) as f:
        for e in episodes:
            f.write(dumps_row({"grounding": cfg.grounding, **e.row()}))
    summary["closed_loop"] = {"grounding": cfg.grounding, **loop_summary(episodes, [], [])}
    write_json(str(out / "summary.json"), summary)
    return summary


def harbor_loop(job_dir: Path) -> list[LoopEpisode]:
    """The closed-loop episodes of a Harbor job run in the simulated environment: each trial's
    `agent/shadow.jsonl`, its outcome, and the reward Harbor's verifier gave its shadow repository."""
    episodes = []
    for log in sorted(job_dir.glob(f"*/agent/{SHADOW_LOG}")):
        trial = log.parent.parent
        row = trial_row(json.loads((trial / "result.json").read_text()))
        meta = json.loads((trial / "agent" / "trajectory.json").read_text())["metadata"]
        turns = []
        for line in log.read_text().splitlines():
            t = json.loads(line)
            turns.append(
                LoopTurn(
                    t["command"],
                    t["simulated"],
                    t["real"],
                    similarity(t["simulated"], t["real"]),
                    t["sim_seconds"],
                    t["sim_tokens"],
                    t["real_seconds"],
                    route=t.get("route", "generated"),
                    # The real output's tokens, whichever route answered (a generated turn's text is
                    # capped); a log written before the environment counted them: a token per 4 characters.
                    observation_tokens=t.get("observation_tokens", len(t["real"]) // 4 + 1) if "route" in t else 0,
                    grounding_tokens=t.get("grounding_tokens", 0),
                )
            )
        episodes.append(
            LoopEpisode(task=row["task"], outcome=meta["outcome"], turns=turns, reward=row["reward"] or 0.0)
        )
    return episodes
