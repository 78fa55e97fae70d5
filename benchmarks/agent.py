"""Cost of the agent grade: making tasks, and one Harbor trial from start to verdict.

    uv run python benchmarks/agent.py [--tasks 6] [--out benchmarks/results/agent.json]

1. `make_tasks` with 2 workers: tasks per minute, and the yields of its filters (bugs whose effect
   the captured calls observe; tasks that pass validation).
2. Harbor's cost per trial, from each trial's own timings, for two agents on the same tasks:
   - scripted (the solver's fix replayed, no model): Harbor overhead against sandbox time;
   - SmolLM2-135M (in process, on loopback, 3 turns of at most 128 tokens): model generation.
   A trial's wall time (Harbor's started_at → finished_at) splits into model generation, sandbox
   commands (the agent's, the environment's start and the verifier), and Harbor's own overhead
   (the rest: trial set-up, result files, locks). The job's process start (Harbor's imports) is
   reported apart, once per job.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from terminalworld.agent.evaluate import AgentEvalConfig, agent_eval
from terminalworld.corpus.solver import plan
from terminalworld.tasks.make import MakeTasksConfig, make_tasks

HERE = Path(__file__).resolve().parent


def _split(out: Path) -> dict:
    rows = [json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines()]
    wall = [r["seconds"]["trial"] for r in rows]
    sandbox = [
        r["seconds"]["environment_setup"] + (r["seconds"]["commands"] or 0.0) + r["seconds"]["verifier"] for r in rows
    ]
    model = [r["seconds"]["generation"] or 0.0 for r in rows]
    harbor = [w - s - m for w, s, m in zip(wall, sandbox, model, strict=True)]
    med = statistics.median
    return {
        "trials": len(rows),
        "trial_wall_s": med(wall),
        "model_generation_s": med(model),
        "sandbox_s": med(sandbox),
        "harbor_overhead_s": med(harbor),
        "harbor_share": med(h / w for h, w in zip(harbor, wall, strict=True)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=6)
    ap.add_argument("--out", default=str(HERE / "results" / "agent.json"))
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tw-bench-agent-"))
    try:
        start = time.perf_counter()
        manifest = make_tasks(MakeTasksConfig(out=str(work / "tasks"), n=args.tasks, seed=0, workers=2))
        made_s = time.perf_counter() - start
        dropped = manifest["dropped"]
        tried_bugs = len(manifest["tasks"]) + sum(
            dropped.get(k, 0) for k in ("bug_not_observable", "validation_failed")
        )
        making = {
            "tasks": len(manifest["tasks"]),
            "seconds": made_s,
            "tasks_per_minute": 60 * len(manifest["tasks"]) / made_s,
            "repos_tried": manifest["repos_tried"],
            "observable_bug_yield": (tried_bugs - dropped.get("bug_not_observable", 0)) / tried_bugs,
            "validation_yield": len(manifest["tasks"]) / (len(manifest["tasks"]) + dropped.get("validation_failed", 0)),
            "dropped": dropped,
        }
        tasks = sorted(p for p in (work / "tasks").iterdir() if p.is_dir())
        script = {}
        for task in tasks:
            steps = plan(task, random.Random(0))
            fix = next(s.command for s in steps if s.command.startswith("sed -i "))
            script[task.name] = [
                f"THOUGHT: fix.\n\n```bash\n{fix}\n```",
                "```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```",
            ]
        (work / "replies.json").write_text(json.dumps(script))
        start = time.perf_counter()
        agent_eval(
            AgentEvalConfig(
                tasks=str(work / "tasks"),
                out=str(work / "scripted"),
                agent="scripted",
                replies=str(work / "replies.json"),
                n_concurrent=1,
            )
        )
        scripted_job_s = time.perf_counter() - start
        scripted = _split(work / "scripted") | {"job_wall_s": scripted_job_s}
        one = work / "one"
        shutil.copytree(tasks[0], one / tasks[0].name, symlinks=True)
        agent_eval(
            AgentEvalConfig(
                tasks=str(one),
                out=str(work / "model"),
                agent="model",
                model="smollm2",
                max_turns=3,
                max_tokens_per_turn=128,
                context_tokens=4096,
                n_concurrent=1,
            )
        )
        model = _split(work / "model")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {"making": making, "scripted_trial": scripted, "smollm2_trial": model}
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
