"""Real Harbor (its own environment, its Job, trials and verifier) grading agents on task folders,
every command in the sandbox: the oracle scores 1, nop 0, a script exactly what it solves."""

import ast
import json
import re
import shutil
from pathlib import Path

import pytest

from terminalworld.agent.evaluate import AgentEvalConfig, agent_eval
from terminalworld.agent.process import LOCALISATION, STEPS
from terminalworld.core.trajectories import SUBMIT_SENTINEL
from terminalworld.sim.harbor_loop import write_closed_loop
from terminalworld.tasks.layout import solution_patch

COMMAND_STEPS = ("body_shown", "line_shown", "reproduced")  # reached only by what commands show
SUBMIT = f"THOUGHT: done.\n\n```bash\necho {SUBMIT_SENTINEL}\n```"
HELLO_TEST = """#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /testbed/hello.txt 2>/dev/null)" = "hello" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
"""


def _hand_task(root: Path, name: str, test_sh: str) -> None:
    """A task written by hand in Harbor's format, not by `tasks make`: no repository, no Dockerfile."""
    (root / name / "environment").mkdir(parents=True)
    (root / name / "tests").mkdir()
    (root / name / "solution").mkdir()
    (root / name / "task.toml").write_text('version = "1.0"\n\n[verifier]\ntimeout_sec = 60.0\n')
    (root / name / "instruction.md").write_text("Write hello into /testbed/hello.txt.\n")
    (root / name / "tests" / "test.sh").write_text(test_sh)
    (root / name / "solution" / "solve.sh").write_text("#!/bin/bash\necho hello > /testbed/hello.txt\n")


@pytest.fixture(scope="module")
def task_folder(generated_tasks, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("harbor-tasks")
    for task in generated_tasks.iterdir():
        if task.is_dir():
            shutil.copytree(task, root / task.name, symlinks=True)
    _hand_task(root, "hello", HELLO_TEST)
    _hand_task(root, "no-reward", "#!/bin/bash\ntrue\n")  # its verifier never writes a reward
    return root


def _run(task_folder: Path, out: Path, agent: str, **kw) -> dict:
    return agent_eval(AgentEvalConfig(tasks=str(task_folder), out=str(out), agent=agent, **kw))


def test_oracle_scores_one_and_a_verifier_without_a_reward_is_a_scored_failure(task_folder, tmp_path):
    s = _run(task_folder, tmp_path / "oracle", "oracle")
    # A verifier that writes no reward fails the submission (the code under test can cause it), so
    # the broken task costs even the oracle its trial: pass@1 is 4 of 5, and the error is counted.
    assert (s["pass_at_1"], s["scored_trials"], s["solved_trials"], s["attempted_trials"]) == (0.8, 5, 4, 5)
    assert s["errors"] == {"submission:RewardFileNotFoundError": 1} and s["agent_errors"] == 0
    assert (s["submission_errors"], s["infrastructure_errors"]) == (1, 0)
    rows = [json.loads(line) for line in (tmp_path / "oracle" / "trials.jsonl").read_text().splitlines()]
    assert {r["task"]: r["reward"] for r in rows}["no-reward"] == 0.0 and len(rows) == 5
    marin = json.loads((tmp_path / "oracle" / "harbor_result.json").read_text())
    assert marin["accuracy"] == 0.8 and marin["unscored_trials"] == 0
    # The oracle's one command runs the solution script: it reads nothing, runs nothing, and its
    # diff (the reference fix, in the bug's file) is what the verifier finds.
    # The instruction (the function level) names the file, so finding it is not counted.
    generated = [r["process"] for r in rows if r["task"] not in ("hello", "no-reward")]
    oracle = dict.fromkeys(STEPS, True) | dict.fromkeys(COMMAND_STEPS, False) | {"file_found": None}
    assert generated == [oracle | {"valid_reply_share": None}] * 3
    assert {r["task"]: r["process"] for r in rows}["hello"]["edited_file"] is None  # a task without a bug
    assert {k: v["rate"] for k, v in s["process"].items()} == {
        **dict.fromkeys(STEPS, 1.0),
        **dict.fromkeys(COMMAND_STEPS, 0.0),
        "file_found": None,
        "valid_reply_share": None,  # Harbor's oracle writes no replies
        "solved": 0.8,  # the task whose verifier writes no reward is the oracle's one failure
    }
    assert s["process"]["body_shown"]["n"] == 3 and s["process"]["solved"]["n"] == 5


def test_nop_scores_zero_and_a_rerun_resumes(task_folder, tmp_path):
    out = tmp_path / "nop"
    s = _run(task_folder, out, "nop", n_attempts=2)
    assert (s["pass_at_1"], s["scored_trials"], s["pass_at_k"]) == (0.0, 10, {"1": 0.0, "2": 0.0})
    before = sorted(p.name for p in (out / "jobs" / "agent-eval").iterdir() if p.is_dir())
    again = _run(task_folder, out, "nop", n_attempts=2)
    assert sorted(p.name for p in (out / "jobs" / "agent-eval").iterdir() if p.is_dir()) == before
    assert again == s
    # nop runs nothing and changes nothing; it has no replies, and the instruction names the file.
    assert {k for k, v in s["process"].items() if v["rate"] != 0.0} == {"file_found", "valid_reply_share"}
    assert s["process"]["file_found"]["rate"] is None and s["valid_action_rate"] is None


def test_the_steps_of_a_fix_are_what_a_scripted_agent_does(task_folder, tmp_path):
    import tomllib

    tasks = sorted(p.name for p in task_folder.iterdir() if p.name not in ("hello", "no-reward"))
    meta = {t: tomllib.loads((task_folder / t / "task.toml").read_text())["metadata"] for t in tasks}
    first = meta[tasks[0]]

    def bash(command: str) -> str:
        return f"THOUGHT: next.\n\n```bash\n{command}\n```"

    patch = solution_patch(task_folder / tasks[0])
    source = (task_folder / tasks[0] / "environment" / "repo" / first["path"]).read_text()
    node = next(n for n in ast.parse(source).body if getattr(n, "name", None) == first["function"])
    span = (node.lineno, node.end_lineno)
    repro = re.search(r"with `(python3 -c .*?)`\.", (task_folder / tasks[0] / "instruction.md").read_text()).group(1)
    script = {
        tasks[0]: [  # every step: read the function, find it, run the failing call, fix it, submit
            bash(f"sed -n '{span[0]},{span[1]}p' {first['path']}"),  # a whole file would be cut by the harness
            bash(f"grep -n 'def {first['function']}' {first['path']}"),
            bash(repro),
            bash(f"git apply - <<'EOF'\n{patch}EOF"),
            SUBMIT,
        ],
        # Names the function in a search, then edits another file and submits: it was shown the
        # definition's line only, not the function.
        tasks[1]: [
            bash(f"grep -rn 'def {meta[tasks[1]]['function']}' ."),
            bash(f"f=$(git ls-files | grep -vx '{meta[tasks[1]]['path']}' | head -n1); echo '# x' >> \"$f\""),
            SUBMIT,
        ],
        "*": ["no bash block here", SUBMIT],
    }
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps(script))
    s = _run(task_folder, tmp_path / "scripted", "scripted", replies=str(replies))
    rows = {
        r["task"]: r["process"]
        for r in map(json.loads, (tmp_path / "scripted" / "trials.jsonl").read_text().splitlines())
    }
    assert rows[tasks[0]] == dict.fromkeys(STEPS, True) | {"file_found": None, "valid_reply_share": 1.0}
    assert rows[tasks[1]] == dict.fromkeys(STEPS, False) | {
        "file_found": None,
        "diff": True,
        "valid_reply_share": 1.0,
    }
    # Only the submission ran: one of its two replies was a valid action.
    assert rows[tasks[2]] == dict.fromkeys(STEPS, False) | {"file_found": None, "valid_reply_share": 0.5}
    assert s["process"]["solved"]["rate"] == s["pass_at_1"] == 0.2  # one of the five scored trials


def test_a_scripted_agent_scores_exactly_what_its_script_solves(task_folder, tmp_path):
    tasks = sorted(p.name for p in task_folder.iterdir() if p.name not in ("hello", "no-reward"))
    patch = solution_patch(task_folder / tasks[0])
    fix = f"THOUGHT: apply the fix.\n\n```bash\ngit apply - <<'EOF'\n{patch}EOF\n```"
    script = {
        tasks[0]: [fix, SUBMIT],
        tasks[1]: ["```bash\nls\n```\n```bash\npwd\n```", SUBMIT],  # a format warning, then submits
        "hello": ["THOUGHT: write it.\n\n```bash\necho hello > hello.txt\n```", SUBMIT],
        "*": [SUBMIT],
    }
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps(script))
    s = _run(task_folder, tmp_path / "scripted", "scripted", replies=str(replies))
    assert s["solved_trials"] == 2 and s["scored_trials"] == 5 and s["pass_at_1"] == 0.4
    rows = {r["task"]: r for r in map(json.loads, (tmp_path / "scripted" / "trials.jsonl").read_text().splitlines())}
    assert rows[tasks[0]]["reward"] == 1.0 and rows["hello"]["reward"] == 1.0 and rows[tasks[1]]["reward"] == 0.0
    assert rows[tasks[1]]["turns"] == 2 and rows[tasks[2]]["turns"] == 1 and rows[tasks[1]]["format_errors"] == 1
    assert s["valid_action_rate"] == (1 + 0.5 + 1 + 1 + 1) / 5  # per trial, the share of valid replies
    assert all(rows[t]["outcome"] == "submitted" for t in (*tasks, "hello"))


def test_a_real_model_runs_whole_turns_through_harbor(generated_tasks, tmp_path):
    one = tmp_path / "one"
    task = next(p for p in sorted(generated_tasks.iterdir()) if p.is_dir())
    shutil.copytree(task, one / task.name, symlinks=True)
    s = _run(
        one, tmp_path / "model", "model", model="smollm2", max_turns=2, max_tokens_per_turn=48, context_tokens=4096
    )
    row = json.loads((tmp_path / "model" / "trials.jsonl").read_text())
    assert s["scored_trials"] == 1 and row["turns"] == 2 and row["input_tokens"] > 1000 and row["output_tokens"] > 0
    assert 0 < row["seconds"]["generation"] < row["seconds"]["agent_execution"]
    trajectory = json.loads(next((tmp_path / "model" / "jobs").rglob("trajectory.json")).read_text())
    assert [m["role"] for m in trajectory["messages"][:3]] == ["system", "user", "assistant"]
    # The server's record: two requests of one, the second turn prefilled after the first turn's
    # prompt and reply, which it reused (every prompt token is one or the other).
    serving = json.loads((tmp_path / "model" / "serving.json").read_text())
    reused, prefilled = serving["prefix_tokens_reused"], serving["prefix_tokens_prefilled"]
    assert serving["batches"] == [1, 1] and reused + prefilled == row["input_tokens"] and reused > 500


def test_a_simulated_environment_answers_the_agent_while_a_real_shadow_is_graded(task_folder, tmp_path):
    # Tier 3 through Harbor: SmolLM2 answers the agent's commands (sim framing, over the loopback
    # endpoint); the same commands run for real in the sandbox, and Harbor's verifier grades that.
    task = sorted(p.name for p in task_folder.iterdir() if p.name not in ("hello", "no-reward"))[0]
    one = tmp_path / "one"
    shutil.copytree(task_folder / task, one / task, symlinks=True)
    patch = solution_patch(one / task)
    fix = f"THOUGHT: apply the fix.\n\n```bash\ngit apply - <<'EOF'\n{patch}EOF\n```"
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps({"*": [fix, "THOUGHT: check.\n\n```bash\ngit diff --stat\n```"]}))
    out = tmp_path / "simulated"
    cfg = AgentEvalConfig(
        tasks=str(one),
        out=str(out),
        agent="scripted",
        replies=str(replies),
        environment="simulated",
        simulator="smollm2",
        simulator_tokens=8,
    )
    s = agent_eval(cfg, closed_loop=write_closed_loop)
    # The real shadow repository was fixed, so the real verifier scores 1.0 whatever the agent saw.
    assert s["scored_trials"] == 1 and s["pass_at_1"] == 1.0
    [episode] = [json.loads(x) for x in (out / "closed_loop.jsonl").read_text().splitlines()]
    assert [t["command"] for t in episode["turns"]] == [fix.split("```bash\n")[1][:-4], "git diff --stat"]
    assert episode["turns"][0]["real"] == "" and "1 file changed" in episode["turns"][1]["real"]
    assert all(t["sim_tokens"] <= 8 for t in episode["turns"]) and episode["reward"] == 1.0
    trajectory = json.loads(next((out / "jobs").rglob("trajectory.json")).read_text())
    shown = [m["content"] for m in trajectory["messages"][3::2]]
    assert shown == ["Observation: " + t["simulated"] for t in episode["turns"]]  # the agent saw the simulator
    assert s["closed_loop"]["episodes"] == 1 and s["closed_loop"]["turns"] == 2


def test_a_hybrid_simulated_environment_serves_exact_routes_from_the_shadow(task_folder, tmp_path):
    # The same episode under `--grounding hybrid`: the router sends `git apply` (an edit) and
    # `git diff --stat` (navigation) to the shadow, so the agent sees the real outputs and the
    # simulator generates nothing.
    task = sorted(p.name for p in task_folder.iterdir() if p.name not in ("hello", "no-reward"))[0]
    one = tmp_path / "one"
    shutil.copytree(task_folder / task, one / task, symlinks=True)
    fix = f"THOUGHT: apply the fix.\n\n```bash\ngit apply - <<'EOF'\n{solution_patch(one / task)}EOF\n```"
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps({"*": [fix, "THOUGHT: check.\n\n```bash\ngit diff --stat\n```"]}))
    out = tmp_path / "hybrid"
    cfg = AgentEvalConfig(
        tasks=str(one),
        out=str(out),
        agent="scripted",
        replies=str(replies),
        environment="simulated",
        simulator="smollm2",
        simulator_tokens=8,
        grounding="hybrid",
    )
    s = agent_eval(cfg, closed_loop=write_closed_loop)
    assert s["pass_at_1"] == 1.0 and s["closed_loop"]["grounding"] == s["grounding"] == "hybrid"
    assert [json.loads(x)["grounding"] for x in (out / "trials.jsonl").read_text().splitlines()] == ["hybrid"]
    [episode] = [json.loads(x) for x in (out / "closed_loop.jsonl").read_text().splitlines()]
    [trial] = [json.loads(x) for x in (out / "trials.jsonl").read_text().splitlines()]
    assert episode["grounding"] == trial["grounding"] == "hybrid"
    assert [t["route"] for t in episode["turns"]] == ["exact", "exact"]
    assert all(t["simulated"] == t["real"] and t["sim_tokens"] == 0 for t in episode["turns"])
    assert "1 file changed" in episode["turns"][1]["simulated"] and s["closed_loop"]["exact_token_share"] == 1.0


def test_an_agent_cannot_plant_its_verdict_or_drop_its_failure(task_folder, tmp_path):
    one = tmp_path / "tasks"
    shutil.copytree(task_folder / "hello", one / "hello")
    plant = (
        "THOUGHT: plant.\n\n```bash\nmkdir -p /logs/verifier/reward.txt/x && "
        "ln -s /proc/sys/kernel/ostype /logs/verifier/leak && mkfifo /logs/verifier/pipe\n```"
    )
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps({"*": [plant, SUBMIT]}))
    s = _run(one, tmp_path / "planted", "scripted", replies=str(replies))
    # Harbor's own removal of stale rewards succeeds, the verifier runs, and the failure is scored.
    assert (s["scored_trials"], s["pass_at_1"], s["errors"]) == (1, 0.0, {})
    verifier = next((tmp_path / "planted" / "jobs").rglob("verifier"))
    assert not any(p.is_symlink() or not (p.is_file() or p.is_dir()) for p in verifier.rglob("*"))


def test_a_command_cut_by_the_agent_timeout_is_gone_before_the_verifier_runs(tmp_path):
    one = tmp_path / "tasks"
    # The verifier rewards a heartbeat that still changes while it runs: a command that outlived
    # the agent's step, free to rewrite /logs/verifier/reward.txt before Harbor downloads it.
    beating = "a=$(cat /testbed/beat 2>/dev/null); sleep 1; b=$(cat /testbed/beat 2>/dev/null)\n"
    beating += (
        'mkdir -p /logs/verifier; if [ "$a" != "$b" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n'
    )
    _hand_task(one, "beat", "#!/bin/bash\n" + beating)
    (one / "beat" / "task.toml").write_text(
        'version = "1.0"\n\n[verifier]\ntimeout_sec = 60.0\n\n[agent]\ntimeout_sec = 3.0\n'
    )
    beat = "THOUGHT: beat.\n\n```bash\nwhile :; do date +%s%N > /testbed/beat; sleep 0.05; done\n```"
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps({"*": [beat, SUBMIT]}))
    s = _run(one, tmp_path / "cut", "scripted", replies=str(replies))
    assert (s["scored_trials"], s["pass_at_1"], s["errors"]) == (1, 0.0, {"agent:AgentTimeoutError": 1})


def test_a_generated_task_is_graded_on_the_host_whatever_its_code_writes(task_folder, tmp_path):
    import tomllib

    task = sorted(p.name for p in task_folder.iterdir() if p.name not in ("hello", "no-reward"))[0]
    meta = tomllib.loads((task_folder / task / "task.toml").read_text())["metadata"]
    one = tmp_path / "tasks"
    shutil.copytree(task_folder / task, one / task, symlinks=True)
    _hand_task(one, "json-reward", "#!/bin/bash\necho '{\"reward\": 7}' > /logs/verifier/reward.json\n")
    # The edited module, imported by the verifier, writes a passing reward, locks it and ends the check.
    payload = (
        "import os\\nopen('/logs/verifier/reward.txt', 'w').write('1\\\\n')\\n"
        "os.chmod('/logs/verifier/reward.txt', 0o444)\\nos._exit(0)\\n"
    )
    edit = f"THOUGHT: edit.\n\n```bash\nprintf '{payload}' | cat - {meta['path']} > x && mv x {meta['path']}\n```"
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps({task: [edit, SUBMIT], "*": [SUBMIT]}))
    s = _run(one, tmp_path / "forged", "scripted", replies=str(replies))
    rows = {r["task"]: r for r in map(json.loads, (tmp_path / "forged" / "trials.jsonl").read_text().splitlines())}
    assert rows[task]["reward"] == 0.0 and rows[task]["exception"] is None
    # Another task's reward.json (Harbor would read it first and take 7) is refused: a failed submission.
    assert (rows["json-reward"]["reward"], rows["json-reward"]["error_kind"]) == (0.0, "submission")
    assert (s["scored_trials"], s["pass_at_1"]) == (2, 0.0)


@pytest.mark.parametrize("level", ["issue", "function", "pinpoint"])
def test_at_every_level_a_fix_solves_and_naming_the_prompt_finds_nothing(task_ladder, tmp_path, level):
    """Through real Harbor at each level of the ladder: a scripted agent that applies the fix solves
    its task; one that only names the file and the function (and echoes the instruction's quoted
    line) reaches no localisation step; one that does nothing reaches none at all."""
    import tomllib

    suite = task_ladder / level
    tasks = sorted(p.name for p in suite.iterdir() if p.is_dir())
    meta = tomllib.loads((suite / tasks[1] / "task.toml").read_text())["metadata"]
    line = (suite / tasks[1] / "environment" / "repo" / meta["path"]).read_text().splitlines()[meta["line"] - 1]

    def bash(command: str) -> str:
        return f"THOUGHT: next.\n\n```bash\n{command}\n```"

    names = [
        bash(f"ls {meta['path']}; grep -c {meta['function']} {meta['path']}"),
        bash(f"echo {json.dumps(line.strip())}"),
        SUBMIT,
    ]
    fix = bash(f"git apply - <<'EOF'\n{solution_patch(suite / tasks[0])}EOF")
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps({tasks[0]: [fix, SUBMIT], tasks[1]: names, "*": [SUBMIT]}))
    s = _run(suite, tmp_path / level, "scripted", replies=str(replies))
    rows = {
        r["task"]: r["process"] for r in map(json.loads, (tmp_path / level / "trials.jsonl").read_text().splitlines())
    }
    assert s["pass_at_1"] == pytest.approx(1 / 3) and rows[tasks[0]]["solved"] and rows[tasks[0]]["edited_lines"]
    for task in tasks[1:]:
        assert not any(rows[task][k] for k in LOCALISATION) and not rows[task]["solved"]
    given = {"issue": set(), "function": {"file_found"}, "pinpoint": {"file_found", "line_shown"}}[level]
    assert {k for k in LOCALISATION if rows[tasks[1]][k] is None} == given


@pytest.mark.parametrize("agent", ["oracle", "nop", "scripted"])
def test_concurrent_trials_give_the_results_of_trials_in_turn(task_folder, tmp_path, agent):
    """Five trials at once (Harbor's n-concurrent, one model server for all in a model grade) or
    one at a time: the same rows, times and trial names aside, and the same summary."""
    kw = {}
    if agent == "scripted":
        task = sorted(p.name for p in task_folder.iterdir() if p.name not in ("hello", "no-reward"))[0]
        fix = f"THOUGHT: fix.\n\n```bash\ngit apply - <<'EOF'\n{solution_patch(task_folder / task)}EOF\n```"
        replies = tmp_path / "replies.json"
        replies.write_text(json.dumps({task: [fix, SUBMIT], "*": ["```bash\nls\n```", SUBMIT]}))
        kw["replies"] = str(replies)

    def run(n: int):
        out = tmp_path / f"{agent}-{n}"
        s = _run(task_folder, out, agent, n_concurrent=n, **kw)
        rows = [json.loads(x) for x in (out / "trials.jsonl").read_text().splitlines()]
        return s, sorted(({k: v for k, v in r.items() if k not in ("trial", "seconds")} for r in rows), key=str)

    (s1, rows1), (s5, rows5) = run(1), run(5)
    assert rows1 == rows5 and s1 == s5 and len(rows1) == 5
    assert s1["pass_at_1"] == {"oracle": 0.8, "nop": 0.0, "scripted": 0.2}[agent]


def test_command_tasks_through_harbor_oracle_one_nop_zero_and_nothing_forged(task_ladder, tmp_path):
    """The command level through real Harbor: the oracle solves every task, nop none; a scripted
    agent that runs one task's reference command solves it, and one that forges the verifier's
    files and links the answer to the tests' reference scores 0, with the host's record of its
    answer. Steps count what each did."""
    from terminalworld.agent.command_steps import COMMAND_STEPS
    from terminalworld.tasks import layout

    suite = task_ladder / "command"
    tasks = [p.name for p in layout.task_order(str(suite))]
    assert len(tasks) == 3

    def rows(out: Path) -> dict[str, dict]:
        return {r["task"]: r for r in map(json.loads, (out / "trials.jsonl").read_text().splitlines())}

    s = _run(suite, tmp_path / "oracle", "oracle")
    assert (s["pass_at_1"], s["scored_trials"], s["errors"]) == (1.0, 3, {})
    for row in rows(tmp_path / "oracle").values():
        assert set(COMMAND_STEPS) <= set(row["process"]) and "file_found" not in row["process"]
        assert row["process"]["answer_written"] and row["process"]["solved"] and row["process"]["valid_command"]
    s = _run(suite, tmp_path / "nop", "nop")
    assert (s["pass_at_1"], s["scored_trials"]) == (0.0, 3)
    assert s["process"]["answer_written"] == {"rate": 0.0, "n": 3}

    def bash(command: str) -> str:
        return f"THOUGHT: next.\n\n```bash\n{command}\n```"

    solve = (suite / tasks[0] / "solution" / "solve.sh").read_text().splitlines()[-1]
    answer = layout.command_spec(suite / tasks[1]).get("file", "answer.txt")
    forge = (
        "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt && "
        "echo '{\"written\": true}' > /logs/verifier/command.json"
    )
    replies = tmp_path / "replies.json"
    replies.write_text(
        json.dumps(
            {
                tasks[0]: [bash(solve), SUBMIT],
                tasks[1]: [bash(forge), bash(f"ln -s /tests/{layout.EXPECTED} /testbed/{answer}"), SUBMIT],
                "*": [SUBMIT],
            }
        )
    )
    out = tmp_path / "scripted"
    s = _run(suite, out, "scripted", replies=str(replies))
    got = rows(out)
    assert s["pass_at_1"] == pytest.approx(1 / 3) and s["scored_trials"] == 3
    assert {t: r["reward"] for t, r in got.items()} == {tasks[0]: 1.0, tasks[1]: 0.0, tasks[2]: 0.0}
    assert got[tasks[0]]["process"]["family_tool"] and got[tasks[0]]["process"]["valid_reply_share"] == 1.0
    assert got[tasks[1]]["process"]["answer_written"] is False  # the host's record, not the forged one
    records = {
        json.loads((p.parent.parent / "result.json").read_text())["task_name"]: json.loads(p.read_text())
        for p in (out / "jobs").rglob("verifier/command.json")
    }
    assert records == {tasks[0]: {"written": True}, tasks[1]: {"written": False}, tasks[2]: {"written": False}}
