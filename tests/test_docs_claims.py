"""The hand-written pages tell the truth about the miniature: every sentence of `docs/*.md` that says
what "the miniature" does is registered here with a check against the committed snapshot of the
demo's report (or, for what the demo's graph is, against the experiment files), so a new snapshot or
a changed demo that contradicts a page fails this test until the page is rewritten."""

import json
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest

from tests.paths import REPO_ROOT

DOCS = REPO_ROOT / "docs"
SNAPSHOT = DOCS / "snapshots" / "local-demo"
RECORD = ".artifact.json"


@cache
def _manifest() -> dict:
    return json.loads((SNAPSHOT / "snapshot.json").read_text())


def _report_dir(name: str) -> Path:
    ident = next(r for r in _manifest()["reports"] if r.startswith(f"terminalworld/reports/{name}@"))
    return SNAPSHOT / ident.replace("@", "/")


def _json(name: str, file: str) -> dict:
    return json.loads((_report_dir(name) / file).read_text())


def _config(dep: str) -> dict:
    """The recorded config of an upstream step of the snapshot, by `name@version`."""
    return json.loads((SNAPSHOT / dep.replace("@", "/") / RECORD).read_text())["config"]


def _deps(name: str) -> list[str]:
    deps, todo = [], [json.loads((_report_dir(name) / RECORD).read_text())]
    while todo:
        for dep in todo.pop().get("deps", []):
            if dep not in deps and (SNAPSHOT / dep.replace("@", "/") / RECORD).exists():
                deps.append(dep)
                todo.append(json.loads((SNAPSHOT / dep.replace("@", "/") / RECORD).read_text()))
    return deps


def _steps(prefix: str) -> list[str]:
    return [d for d in dict.fromkeys(_deps("world-model-probe") + _deps("echo-miniature")) if d.startswith(prefix)]


def _models() -> list[str]:
    return [a["arm"] for a in _json("world-model-probe", "report.json")["arms"]]


def tiny_models() -> bool:
    (base,) = _steps("checkpoints/terminalworld/base-")
    shape = _config(base)["recipe"]["tiny"]
    arms = [_config(c) for c in _steps("checkpoints/terminalworld/") if c != base]
    text = _config(next(d for d in _steps("terminalworld/tokenized/pretrain-")))
    pretrain_rows = int(re.search(r"subset-(\d+)", text["subset"][1]).group(1)) - text["skip"]
    return (
        (shape["num_layers"], shape["hidden_dim"], pretrain_rows) == (2, 32, 60)
        and len(arms) == 3
        and all(base.split("@")[0] in c["init_from"][0] and c["recipe"].get("tiny") is None for c in arms)
    )


def one_scale() -> bool:
    data = [_config(d) for d in _steps("terminalworld/tokenized/") if "pretrain-" not in d]
    names = {d.split("@")[0].rsplit("-", 1)[1] for d in _steps("terminalworld/tokenized/")}
    return names == {"demo"} and all(c["subset"][1] == "subset-40.jsonl.gz" and c["skip"] == 0 for c in data)


def agent_grade() -> bool:
    report = _json("world-model-probe", "report.json")
    grades = _steps("agent-eval/")
    (tasks,) = {_config(g)["tasks"] for g in grades}
    task_step = next(d for d in _steps("terminalworld/tasks/heldout@"))
    return (
        report["agent"]["tasks"] == 4
        and len(grades) == len(_models())
        and all(a["scored_trials"] == 4 for a in report["arms"])
        and tasks.endswith(task_step.replace("@", "/"))
        and _config(task_step)["exclude_from"] is not None  # repositories unseen in training
    )


def no_solve() -> bool:
    return all(
        a["solved_trials"] == 0 and a["pass_at_1"] == 0 for a in _json("world-model-probe", "report.json")["arms"]
    )


def sim_tiers() -> bool:
    tiers = _json("world-model-probe", "report.json")["sim"]["tiers"]
    return tiers == {m: [1, 2, 3] if m == "full" else [1, 2] for m in _models()}


def sim_weak() -> bool:
    sim = _json("world-model-probe", "metrics.json")["sim"]["checkpoints"]
    free = [row[t] for row in sim.values() for t in ("tier1", "tier2") if t in row]
    return len(free) == 2 * len(_models()) and all(r["similarity"] < 0.5 for r in free)


def degeneration_unmeasured() -> bool:
    sim = _json("world-model-probe", "metrics.json")["sim"]["checkpoints"]
    caps = {_config(d)["decoding"]["max_new_tokens"] for d in _steps("sim-eval/")}
    return caps == {128} and all(
        row[t]["degenerate_rate_long"] is None for row in sim.values() for t in ("tier1", "tier2")
    )


def echo_without_signal() -> bool:
    arms = _json("echo-miniature", "echo_report.json")["arms"]
    policies = {_config(d)["policy"][0] for d in _steps("terminalworld/echo/")}
    return (
        set(arms) == {"grpo", "echo", "env-only"}
        and all(len(a["reward_per_step"]) == 5 and not any(a["reward_per_step"]) for a in arms.values())
        and len(policies) == 1
        and "/checkpoints/terminalworld/full-demo/" in policies.pop()
    )


def local_processes() -> bool:
    """Every step of the demo's and ECHO miniature's graphs runs as a local process, and none uses
    vLLM (the HF backends score, serve and simulate)."""
    from marin.experiment.cli import graph_handles

    from terminalworld.pipeline.step import describe_resources
    from tests.conftest import load_experiment

    demo, echo = load_experiment("local_demo"), load_experiment("echo_local")
    graph = demo.build()
    handles = graph_handles([t.step for t in (graph.report, graph.eval_sets, echo.build())])
    configs = json.dumps([_config(d) for d in _steps("")])
    return all(describe_resources(h) == "local process" for h in handles) and "vllm" not in configs


# (a phrase of the registered sentence, its check)
CLAIMS: list[tuple[str, Callable[[], bool]]] = [
    (
        "The miniature's models are a Qwen3 of 2 layers and hidden width 32, pretrained for minutes on 60 trajectories",
        tiny_models,
    ),
    ("The miniature trains each arm at one scale, on 40 trajectories", one_scale),
    ("The miniature grades every model as an agent with real Harbor", agent_grade),
    ("on 4 bug-fix tasks from repositories unseen in training, and no model solves any of them", no_solve),
    (
        "The miniature grades every model as a simulator in tiers 1 and 2 and the full-transcript model in the closed loop (tier 3)",
        sim_tiers,
    ),
    ("the free-running similarity of every model stays below 0.5", sim_weak),
    (
        "The miniature does not measure degeneration: no generated output reaches the write-up's 800 characters at its 128-token cap",
        degeneration_unmeasured,
    ),
    (
        "The miniature runs ECHO's three arms (GRPO, ECHO, env-only) for 5 steps from the demo's full-transcript checkpoint, and no rollout of any arm solves a task",
        echo_without_signal,
    ),
    ("The miniature runs every step as a local process: no TPU, no GPU, no vLLM, no Daytona", local_processes),
]


def sentences(page: Path) -> list[str]:
    """The page's prose sentences (headings and code blocks left out), whitespace collapsed."""
    text, fenced = [], False
    for line in page.read_text().splitlines():
        fenced ^= line.lstrip().startswith("```")
        if not fenced and not line.lstrip().startswith(("#", "```", "|")):
            text.append(line.strip().removeprefix("- "))
    prose = re.sub(r"\s+", " ", " ".join(text))
    return re.split(r"(?<=[.!?])\s+(?=[A-Z*\[(`])", prose)


PAGES = sorted(DOCS.glob("*.md"))
CLAIMED = [(p, s) for p in PAGES for s in sentences(p) if re.search(r"\bthe miniature\b", s, re.I)]


def test_every_claim_about_the_miniature_is_registered():
    unregistered = [f"{p.name}: {s}" for p, s in CLAIMED if not any(phrase in s for phrase, _ in CLAIMS)]
    assert not unregistered, "register each with a check in CLAIMS, or rewrite it:\n" + "\n".join(unregistered)
    unused = [phrase for phrase, _ in CLAIMS if not any(phrase in s for _, s in CLAIMED)]
    assert not unused, f"registered claims no page makes any more: {unused}"


@pytest.mark.parametrize("phrase,check", CLAIMS, ids=[c.__name__ for _, c in CLAIMS])
def test_each_claim_holds_for_the_demos_report(phrase, check):
    assert check(), (
        f"the demo's snapshot contradicts: {phrase!r} ({', '.join(sorted({p.name for p, s in CLAIMED if phrase in s}))})"
    )


def test_the_finder_sees_a_claim_and_a_registered_one(tmp_path):
    page = tmp_path / "x.md"
    page.write_text(
        "# The miniature\n\nIntro. The miniature trains each arm at one scale, on 40 trajectories.\n```\nthe miniature\n```\n"
    )
    assert [s for s in sentences(page) if "miniature" in s] == [
        "The miniature trains each arm at one scale, on 40 trajectories."
    ]
