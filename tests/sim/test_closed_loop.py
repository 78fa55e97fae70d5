"""The closed loop with a real shadow on a generated task: a simulator that is itself a real sandbox
never diverges and the agent's belief agrees with the real verifier; a constant simulator diverges at
the first turn and the agent never learns it submitted; the summary's gap and costs add up; in
hybrid mode each route's share counts the real observation's tokens; a rows file is never resumed
across grounding modes."""

import json
import os
import random
import shutil
import tempfile
from pathlib import Path

import pytest

from terminalworld.agent.harness import HarnessConfig
from terminalworld.core.trajectories import extract_command
from terminalworld.corpus.actions import action_message
from terminalworld.corpus.solver import plan
from terminalworld.env.sandbox import Sandbox
from terminalworld.sim.backend import Simulated
from terminalworld.sim.closed_loop import ScriptedAgent, closed_loop_episode, loop_summary, real_episode
from terminalworld.tasks.layout import REPO_DIR


class Mirror:
    """A "simulator" that runs each command in its own real sandbox over another copy of the repo."""

    def __init__(self, task: Path):
        self.tmp = tempfile.mkdtemp(prefix="tw-mirror-")
        os.chmod(self.tmp, 0o711)
        shutil.copytree(task / REPO_DIR, f"{self.tmp}/repo", symlinks=True)
        self.box = Sandbox(f"{self.tmp}/repo")

    def simulate(self, requests):
        return [Simulated(self.box.run(extract_command(t.turns[k].action)).output, 0, False, 0) for t, k in requests]


class Constant:
    def __init__(self):
        self.grounding = []  # the grounding blocks each call was given

    def simulate(self, requests, grounding=None):
        self.grounding.append(None if grounding is None else [dict(g) for g in grounding])
        return [Simulated("nothing", 1, False, 0) for _ in requests]


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    from terminalworld.tasks.make import MakeTasksConfig, make_tasks

    root = Path(tempfile.mkdtemp(prefix="tw-loop-"))
    root.chmod(0o711)
    make_tasks(MakeTasksConfig(out=str(root / "tasks"), n=1, seed=0))
    manifest = json.loads((root / "tasks" / "manifest.json").read_text())
    yield root / "tasks" / manifest["tasks"][0]["task_id"]
    shutil.rmtree(root, ignore_errors=True)


def _solver(task):
    return ScriptedAgent([action_message(s) for s in plan(task, random.Random(0))])


HARNESS = HarnessConfig(max_turns=20, context_tokens=32768, max_tokens_per_turn=256)


def test_a_faithful_simulator_never_diverges_and_the_belief_is_right(task):
    loop = closed_loop_episode(agent=_solver(task), simulator=Mirror(task), task_dir=task, harness=HARNESS)
    assert loop.outcome == "submitted" and loop.reward == 1.0 and loop.first_divergence is None
    assert all(t.similarity == 1.0 and t.simulated == t.real for t in loop.turns) and len(loop.turns) >= 6
    reward, outcome, seconds = real_episode(agent=_solver(task), task_dir=task, harness=HARNESS)
    assert (reward, outcome) == (1.0, "submitted") and len(seconds) == len(loop.turns)
    s = loop_summary([loop], [reward], seconds)
    assert s["outcome_agreement"] == 1.0 and s["sim_to_real_gap"] == 0.0 and s["diverged_episodes"] == 0
    assert s["turns"] == len(loop.turns) and s["seconds_per_sandbox_turn"] > 0


def test_a_constant_simulator_diverges_at_once_and_the_agent_never_sees_its_submission(task):
    loop = closed_loop_episode(agent=_solver(task), simulator=Constant(), task_dir=task, harness=HARNESS)
    # The script still fixes the shadow repository (its commands are real there), but the submission's
    # echo never comes back from the simulator, so the agent does not believe it is done.
    assert loop.first_divergence == 1 and loop.outcome != "submitted" and loop.reward == 1.0
    row = loop.row()
    assert row["outcome_agrees"] is False and all(t["simulated"] == "nothing" for t in row["turns"])
    s = loop_summary([loop], [1.0], [0.1, 0.3])
    assert s["outcome_agreement"] == 0.0 and s["first_divergence"] == [1] and s["tokens_per_simulated_turn"] == 1
    assert s["seconds_per_sandbox_turn"] == pytest.approx(0.2) and s["sandbox_seconds_per_episode"] == pytest.approx(
        0.4
    )


def test_hybrid_serves_exact_routes_from_the_shadow_and_counts_their_share(task):
    from terminalworld.core.assets import load_tokenizer
    from terminalworld.core.routing import route
    from terminalworld.grounding.modes import Grounder, GroundingOptions
    from terminalworld.sim.closed_loop import route_shares

    grounder = Grounder(GroundingOptions(grounding="hybrid"), load_tokenizer("smollm2"))
    simulator = Constant()
    episode = closed_loop_episode(
        agent=_solver(task), simulator=simulator, task_dir=task, harness=HARNESS, grounder=grounder
    )
    # Each generated turn's view holds its own block and those before it (the session's context).
    assert [len(g[0]) for g in simulator.grounding] == list(range(1, len(simulator.grounding) + 1))
    routes = [t.route for t in episode.turns]
    assert "exact" in routes and "generated" in routes  # the solver reads, edits and runs the tests
    for t in episode.turns:
        assert t.route == route(t.command)
        assert (t.simulated == t.real) if t.route == "exact" else (t.simulated == "nothing" and t.grounding_tokens > 0)
    assert episode.reward == 1.0  # the shadow holds the real fix whatever the simulator said
    # Every turn counts the real observation's tokens, whichever route answered: a generated turn
    # printed "nothing" (one token), but its share is what the task really output.
    assert all(t.observation_tokens == grounder.count(t.real) for t in episode.turns)
    generated = [t for t in episode.turns if t.route == "generated"]
    assert all(t.observation_tokens > grounder.count(t.simulated) for t in generated if len(t.real) > 20)
    shares = route_shares(episode.turns)
    exact = sum(grounder.count(t.real) for t in episode.turns if t.route == "exact")
    assert shares["exact_token_share"] == exact / sum(grounder.count(t.real) for t in episode.turns)
    shown = exact / (exact + sum(grounder.count(t.simulated) for t in generated))  # counting what was printed
    assert shares["exact_token_share"] < shown
    assert shares["exact_turns"] == routes.count("exact")
    assert route_shares([]) == {} and "exact_token_share" in loop_summary([episode], [1.0], [0.1])


def test_a_closed_loop_file_under_another_grounding_mode_is_not_resumed(task, tmp_path):
    from terminalworld.errors import InputError
    from terminalworld.sim.evaluate import SimEvalConfig, loop_file

    out = tmp_path / "loop.jsonl"
    (tmp_path / "loop.jsonl.partial").write_text(json.dumps({"instance_id": task.name, "grounding": "none"}) + "\n")
    cfg = SimEvalConfig(model_path="fixture", out=str(out), tasks=str(task.parent), grounding="hybrid")
    with pytest.raises(InputError, match="--grounding none"):
        loop_file(cfg, None)  # refused before any episode runs


def test_the_confusion_table_counts_real_against_simulated_solves():
    from terminalworld.sim.closed_loop import LoopEpisode, confusion

    assert confusion([True, True, False, False], [True, False, True, False]) == dict.fromkeys(
        ("real_solved_sim_solved", "real_solved_sim_failed", "real_failed_sim_solved", "real_failed_sim_failed"), 1
    )
    episodes = [LoopEpisode("a", "submitted", reward=1.0), LoopEpisode("b", "submitted", reward=0.0)]
    episodes.append(LoopEpisode("c", "limits_exceeded", reward=0.0))
    s = loop_summary(episodes, [1.0, 0.0, 1.0], [])
    assert s["real_outcomes_both"] and s["confusion"] == {
        "real_solved_sim_solved": 1,
        "real_solved_sim_failed": 1,
        "real_failed_sim_solved": 0,
        "real_failed_sim_failed": 1,
    }
    assert s["belief_confusion"]["real_failed_sim_solved"] == 1 and s["belief_confusion"]["real_solved_sim_solved"] == 1
    assert not loop_summary(episodes[:1], [1.0], [])["real_outcomes_both"]


def test_a_solver_with_seeded_wrong_fixes_gives_both_real_outcomes(task_ladder):
    from terminalworld.corpus.solver import wrong_fix
    from terminalworld.tasks.layout import task_order

    tasks = task_order(str(task_ladder / "function"))
    seed, share = 3, 0.5
    wrong = [wrong_fix(seed, t.name, share) for t in tasks]
    episodes, real = [], []
    for t, w in zip(tasks, wrong, strict=True):
        script = [action_message(s) for s in plan(t, random.Random(seed), wrong=w)]
        episodes.append(
            closed_loop_episode(agent=ScriptedAgent(script), simulator=Mirror(t), task_dir=t, harness=HARNESS)
        )
        real.append(real_episode(agent=ScriptedAgent(script), task_dir=t, harness=HARNESS)[0])
    assert real == [0.0 if w else 1.0 for w in wrong] and 0 < sum(wrong) < len(wrong)
    s = loop_summary(episodes, real, [])
    # A faithful simulator: the solves agree with the real ones, and the agent submitted every time.
    assert s["confusion"] == {
        "real_solved_sim_solved": len(wrong) - sum(wrong),
        "real_solved_sim_failed": 0,
        "real_failed_sim_solved": 0,
        "real_failed_sim_failed": sum(wrong),
    }
    assert s["belief_confusion"]["real_failed_sim_solved"] == sum(wrong) and s["outcome_agreement"] < 1.0
