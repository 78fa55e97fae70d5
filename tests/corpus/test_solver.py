import gzip
import json
import subprocess
from collections import Counter

import pytest

from terminalworld.core.formats import load_trajectories
from terminalworld.core.prompts import TASK_SYSTEM_PROMPT
from terminalworld.core.trajectories import OBSERVATION_PREFIX, SUBMIT_SENTINEL, extract_command
from terminalworld.corpus.recorder import RecordConfig, record_corpus, record_solving, record_solving_shard
from terminalworld.corpus.solver import fix_command
from terminalworld.env.sandbox import SandboxConfig

BEFORE = ["def f(x):", "    if x < 0:", "        return 1", "    y = 'a' + x", "    return y", "# end"]


@pytest.mark.parametrize(
    "after",
    [
        ["def f(x):", "    if x <= 0:", "        return 1", "    y = 'a' + x", "    return y", "# end"],  # one line
        [
            "def f(x):",
            "    if x < 0:",
            "        return 1",
            "    if x == 2:",
            "        return r'\\d'",
            "    y = 'a' + x",
            "    return y",
            "# end",
        ],
        ["def f(x):", "    y = 'a' + x", "    return y", "# end"],  # a dropped branch, the other way round
        [
            "def f(x):",
            "    if x < 0:",
            "        return 1",
            "    y = 'a' + x",
            "    return y",
            "# end",
            "print('it''s')",
        ],
    ],
)
def test_the_fix_is_one_real_sed_command_that_gives_the_fixed_file(tmp_path, after):
    path = tmp_path / "m.py"
    path.write_text("\n".join(BEFORE) + "\n")
    command = fix_command("m.py", BEFORE, after)
    assert command.startswith("sed -i ")
    subprocess.run(["bash", "-c", command], cwd=tmp_path, check=True)
    assert path.read_text() == "\n".join(after) + "\n"


def test_solving_episodes_solve_every_task_in_swe_zero_shape(generated_tasks):
    tasks = sorted(p for p in generated_tasks.iterdir() if p.is_dir())
    episodes = [record_solving(t, 0, SandboxConfig()) for t in tasks]
    for task, ep in zip(tasks, episodes, strict=True):
        assert ep.metadata["reward"] == 1.0 and ep.metadata["task_id"] == task.name
        assert ep.system == TASK_SYSTEM_PROMPT and ep.task == (task / "instruction.md").read_text()
        commands = [extract_command(t.action) for t in ep.turns]
        assert commands[-1] == f"echo {SUBMIT_SENTINEL}" and any(c.startswith("sed -i ") for c in commands)
        assert sum(c.startswith("python3 -c ") for c in commands) == 2  # reproduce, then confirm
        assert all(t.observation.startswith(OBSERVATION_PREFIX) for t in ep.turns)
        repro = [t.observation for t, c in zip(ep.turns, commands, strict=True) if c.startswith("python3 -c ")]
        assert repro[0] != repro[1]  # the reproduction shows the bug, then the fix
    again = record_solving(tasks[0], 0, SandboxConfig())
    assert again.to_swe_zero_row() == episodes[0].to_swe_zero_row()


def test_the_corpus_holds_the_solving_episodes(generated_tasks, tmp_path):
    manifest = record_corpus(RecordConfig(out=str(tmp_path), trajectories=2, seed=0, tasks=str(generated_tasks)))
    solving = manifest["shards"][-1]
    assert solving["path"] == "solving.jsonl.gz" and solving["trajectories"] == solving["solved"] == 3
    with gzip.open(tmp_path / "solving.jsonl.gz", "rt") as f:
        rows = [json.loads(line) for line in f]
    assert {r["repo"] for r in rows} <= set(manifest["code_trees"]) and all(r["reward"] == 1.0 for r in rows)
    kinds = sorted(t.metadata["task_kind"] for t in load_trajectories(str(tmp_path / "*.jsonl*")))
    assert kinds.count("solve") == 3 and len(kinds) == 5


def test_the_solving_episodes_cover_the_ladder_in_stated_numbers(task_ladder, tmp_path):
    entry = record_solving_shard(str(task_ladder), tmp_path, 0, SandboxConfig(), 2)
    kinds = Counter(json.loads((task_ladder / "manifest.json").read_text())["tasks"][i]["kind"] for i in range(3))
    assert entry["trajectories"] == entry["solved"] == 9  # three bugs at three levels
    assert entry["solved_by_level"] == {"function": 3, "issue": 3, "pinpoint": 3}
    assert entry["solved_by_kind"] == {k: 3 * n for k, n in sorted(kinds.items())}
    with gzip.open(tmp_path / "solving.jsonl.gz", "rt") as f:
        rows = [json.loads(line) for line in f]
    assert len({r["instance_id"] for r in rows}) == 9
    issue = next(r for r in rows if r["level"] == "issue")
    assert issue["instance_id"].startswith("solve-issue-") and "defined in" not in json.dumps(issue["messages"][1])
