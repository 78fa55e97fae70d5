"""Tier 3 through Harbor: the closed loop of an `agent-eval` job run in the simulated environment
(`sim.harbor_environment.SimulatedEnvironment`), where a simulator answered the agent's commands
and the sandbox ran them too as the shadow Harbor's verifier graded.

`agent.evaluate.agent_eval` calls `write_closed_loop` once the job is done (its caller passes it
in: this stage sits above the agent's): one row per trial in `closed_loop.jsonl` and their summary,
each with the grounding mode, as `score` and `sim-eval` record it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from terminalworld.agent.results import trial_row
from terminalworld.core.records import atomic_jsonl, dumps_row
from terminalworld.pipeline.artifacts import SHADOW_LOG
from terminalworld.sim.closed_loop import LoopEpisode, LoopTurn, loop_summary
from terminalworld.sim.fidelity import similarity


def write_closed_loop(job_dir: Path, out: Path, grounding: str) -> dict[str, Any]:
    """Write the closed-loop episodes of the Harbor job in `job_dir` to `out/closed_loop.jsonl`,
    the grounding mode in every row, and return their summary (the agent summary's `closed_loop`)."""
    episodes = harbor_loop(job_dir)
    with atomic_jsonl(str(out / "closed_loop.jsonl")) as f:
        for e in episodes:
            f.write(dumps_row({"grounding": grounding, **e.row()}))
    return {"grounding": grounding, **loop_summary(episodes, [], [])}


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
                    route=t["route"],
                    # The real output's tokens, whichever route answered (a generated turn's text is capped).
                    observation_tokens=t["observation_tokens"],
                    grounding_tokens=t["grounding_tokens"],
                )
            )
        episodes.append(
            LoopEpisode(task=row["task"], outcome=meta["outcome"], turns=turns, reward=row["reward"] or 0.0)
        )
    return episodes
