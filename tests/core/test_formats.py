import json

import pytest

from terminalworld.core.formats import iter_trajectories, load_trajectories, to_trajectory
from terminalworld.core.records import BadLine
from terminalworld.core.trajectories import (
    TrajectoryError,
    command_family,
    extract_command,
    harness_spans,
    split_observation,
)

# (file, format, [(turns, observations) per trajectory]) as documented in the fixtures' README.
EXPECTED = [
    ("adp_swe-zero-12m/sample_raw.json", "mini-swe-agent-1", [(15, 15)] * 3),
    ("adp_agenttuning_os/sample_raw.json", "agentinstruct-os", [(7, 6), (6, 5), (6, 5), (7, 6), (8, 7)]),
    ("adp_nemotron-terminal-corpus/sample_raw.json", "terminus-2", [(8, 7), (6, 5), (5, 4)]),
    (
        "adp-fork_nebius-swe-agent-trajectories/sample_raw.json",
        "swe-agent",
        [(6, 5), (14, 13), (5, 4), (8, 7), (16, 15)],
    ),
    ("adp-fork_mini-coder/sample_raw.json", "mini-swe-agent-1", [(8, 7)]),
    ("mini-swe-agent/github_issue.traj.json", "mini-swe-agent-2", [(10, 10)]),
    ("mini-swe-agent/local.traj.json", "mini-swe-agent-2", [(2, 2)]),
    ("mini-swe-agent_b6984ac5/github_issue.traj.json", "mini-swe-agent-1", [(10, 10)]),
]


@pytest.mark.parametrize("path,fmt,shape", EXPECTED)
def test_every_real_fixture_loads_with_its_documented_counts(fixtures, path, fmt, shape):
    trajs = load_trajectories(str(fixtures / path))
    assert [(len(t.turns), len(t.observed_turns)) for t in trajs] == shape
    assert {t.format for t in trajs} == {fmt}
    raw = json.loads((fixtures / path).read_text())
    records = raw if isinstance(raw, list) and isinstance(raw[0], dict) and "role" not in raw[0] else [raw]
    for traj, rec in zip(trajs, records, strict=False):
        # The conversation round-trips: same number of messages as the source.
        src = rec if isinstance(rec, list) else rec.get("messages") or rec.get("conversations") or rec.get("trajectory")
        assert len(traj.messages()) == len(src)


def test_swe_zero_fields_and_messages_round_trip(fixtures):
    raw = json.loads((fixtures / "adp_swe-zero-12m/sample_raw.json").read_text())
    trajs = load_trajectories(str(fixtures / "adp_swe-zero-12m/sample_raw.json"))
    for t, r in zip(trajs, raw, strict=False):
        assert (t.instance_id, t.repo) == ("rsteube__carapace-849", "rsteube/carapace")
        assert t.messages() == [{"role": m["role"], "content": m["content"]} for m in r["messages"]]
        assert t.metadata["exit_status"] == "incomplete"
    # The 12M JSONL copy keeps repo under metadata.
    row = {k: v for k, v in raw[0].items() if k not in ("repo", "instance_id")}
    row["metadata"] = {"repo": "rsteube/carapace", "instance_id": "x-1"}
    t = to_trajectory(row, "row")
    assert (t.repo, t.instance_id) == ("rsteube/carapace", "x-1")


def test_nebius_ai_role_and_system_prompt(fixtures):
    t = load_trajectories(str(fixtures / "adp-fork_nebius-swe-agent-trajectories/sample_raw.json"))[0]
    assert t.system.startswith("SETTING: You are an autonomous programmer")
    assert t.task.startswith("We're currently solving the following issue")
    assert t.turns[0].observation.endswith("bash-$")


def test_extract_command_v1_and_v2_fences(fixtures):
    v2 = load_trajectories(str(fixtures / "mini-swe-agent/github_issue.traj.json"))[0]
    v1 = load_trajectories(str(fixtures / "mini-swe-agent_b6984ac5/github_issue.traj.json"))[0]
    assert [extract_command(t.action) for t in v1.turns] == [
        *[extract_command(t.action) for t in v2.turns][:-1],
        extract_command(v1.turns[-1].action),
    ]
    assert extract_command(v2.turns[0].action).startswith("cat /Users/fuchur/")
    assert extract_command("THOUGHT: two\n```bash\nls\n```\n```bash\npwd\n```") is None
    assert extract_command("no block here") is None
    swe = load_trajectories(str(fixtures / "adp_swe-zero-12m/sample_raw.json"))[0]
    assert extract_command(swe.turns[0].action) == 'find . -type f -name "*.py" | head -20'


def test_split_observation_separates_harness_text():
    assert split_observation("Observation: ./a.py\n") == ("Observation: ", "./a.py\n")
    assert split_observation("Observation: ") == ("Observation: ", "")
    assert split_observation("<returncode>1</returncode>\n<output>\nboom\n</output>") == (
        "<returncode>1</returncode>\n<output>\n</output>",
        "boom\n",
    )
    warning = "Please always provide EXACTLY ONE action in triple backticks, found 2 actions.\n\n"
    obs = "Observation: " + warning + "real output"
    harness, output = split_observation(obs)
    assert harness == "Observation: " + warning and output == "real output"
    assert harness_spans("plain output with Observation: inside") == []


def test_split_observation_on_real_fixtures(fixtures):
    for t in load_trajectories(str(fixtures / "adp_nemotron-terminal-corpus/sample_raw.json")):
        for turn in t.observed_turns:
            harness, output = split_observation(turn.observation)
            assert len(harness) + len(output) == len(turn.observation)
            assert harness, turn.observation[:80]
    for t in load_trajectories(str(fixtures / "adp_swe-zero-12m/sample_raw.json")):
        for turn in t.turns:
            assert split_observation(turn.observation)[0] == "Observation: "


def test_invalid_records_raise_typed_errors_naming_the_record():
    with pytest.raises(TrajectoryError, match=r"rec-7: roles out of order: message 4 is 'user', expected 'assistant'"):
        to_trajectory(
            {
                "instance_id": "a",
                "repo": "r",
                "messages": [
                    {"role": "system", "content": "s"},
                    {"role": "user", "content": "t"},
                    {"role": "assistant", "content": "a"},
                    {"role": "user", "content": "o"},
                    {"role": "user", "content": "x"},
                ],
            },
            "rec-7",
        )
    with pytest.raises(TrajectoryError, match="missing field 'instance_id'"):
        to_trajectory({"repo": "r", "messages": [], "metadata": {"instance_id": ""}}, "r1")
    with pytest.raises(TrajectoryError, match="unknown format"):
        to_trajectory({"foo": 1}, "r2")
    with pytest.raises(TrajectoryError, match=r"not a .role, content. chat message"):
        to_trajectory({"instance_id": "a", "messages": [{"role": "user", "content": None}]}, "r3")


def test_iter_trajectories_reports_bad_records_with_file_and_line(tmp_path, fixtures):
    good = json.loads((fixtures / "adp_swe-zero-12m/sample_raw.json").read_text())[0]
    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps(good) + "\n{not json\n" + json.dumps({"instance_id": "x", "messages": "no"}) + "\n")
    items = list(iter_trajectories(str(p)))
    assert not isinstance(items[0], BadLine)
    assert [(b.line, b.reason.split(":")[0]) for b in items[1:]] == [
        (2, "invalid JSON"),
        (3, "missing field 'messages' (a list of messages)"),
    ]


@pytest.mark.parametrize(
    "cmd,family",
    [
        ("ls -la src", "ls"),
        ("find . -name x", "find"),
        ("grep -rn foo .", "grep"),
        ("cat a.py", "cat"),
        ("sed -n '1,5p' a", "sed"),
        ("git diff", "git"),
        ("sed -i 's/a/b/' f", "edit"),
        ("cat <<'EOF' > f\nx\nEOF", "edit"),
        ("echo done", "other"),
        (None, "other"),
    ],
)
def test_command_family(cmd, family):
    assert command_family(cmd) == family
