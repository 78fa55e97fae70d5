import json
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from terminalworld.core.heldout import read_heldout
from terminalworld.core.prompts import SYSTEM_PROMPT, TASK_SYSTEM_PROMPT
from terminalworld.core.trajectories import OBSERVATION_PREFIX, extract_command
from terminalworld.corpus.actions import workspace_root
from terminalworld.env.codetrees import discover_code_trees, materialize, normalize_times
from terminalworld.env.sandbox import Sandbox
from terminalworld.errors import InputError

# In the project: from terminalworld.sim.probes import ...
from terminalworld.sim.probes import FAMILIES, TRACEBACK, ProbesConfig, make_probes

N = 12


@pytest.fixture
def probe_workdir():
    """A folder every uid may traverse (a root host runs sandboxes as an unprivileged uid, which must
    reach the repository), removed afterwards; tests/conftest.py's fixture, but on the file system the
    probes were made on (`workspace_root`), since `ls -la` prints block counts and folder sizes."""
    base = Path(tempfile.mkdtemp(prefix="tw-test-", dir=workspace_root()))
    base.chmod(0o711)
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def probe_set(tmp_path_factory) -> Path:
    """Twelve probes of seed 5: every family once, the first two twice."""
    out = tmp_path_factory.mktemp("probes") / "probes.jsonl"
    make_probes(ProbesConfig(out=str(out), n=N, seed=5, workers=4))
    return out


def test_same_seed_gives_the_same_bytes_and_another_seed_other_probes(probe_set, tmp_path):
    make_probes(ProbesConfig(out=str(tmp_path / "again.jsonl"), n=N, seed=5, workers=1))
    make_probes(ProbesConfig(out=str(tmp_path / "other.jsonl"), n=N, seed=6, workers=4))
    assert (tmp_path / "again.jsonl").read_bytes() == probe_set.read_bytes()
    assert (tmp_path / "again.jsonl.manifest.json").read_bytes() == Path(f"{probe_set}.manifest.json").read_bytes()
    other = read_heldout(str(tmp_path / "other.jsonl"))
    assert [r["target_cmd"] for r in other] != [r["target_cmd"] for r in read_heldout(str(probe_set))]


def test_every_family_is_present_round_robin(probe_set):
    rows = read_heldout(str(probe_set))
    assert [r["family"] for r in rows] == [FAMILIES[i % len(FAMILIES)] for i in range(N)]
    manifest = json.loads(Path(f"{probe_set}.manifest.json").read_text())
    assert manifest["probes"] == N and manifest["families"] == dict(Counter(r["family"] for r in rows))
    assert set(manifest["code_trees"]) == {r["repo"] for r in rows}
    assert manifest["config"]["seed"] == 5 and manifest["config"]["n"] == N


def test_rows_are_recorded_turns_with_the_family_s_output(probe_set):
    for row in read_heldout(str(probe_set)):
        family, out = row["family"], row["target_env"].removeprefix(OBSERVATION_PREFIX)
        assert 1 <= len(row["prefix"]) <= 3 and row["instance_id"].startswith("probe-5-")
        assert row["task"].startswith(f"Please solve this issue in the repository {row['repo']}.")
        assert row["system"] == (TASK_SYSTEM_PROMPT if family in ("traceback", "test_summary") else SYSTEM_PROMPT)
        for cmd, env in [*row["prefix"], [row["target_cmd"], row["target_env"]]]:
            assert cmd.startswith("THOUGHT: ") and extract_command(cmd) is not None
            assert env.startswith(OBSERVATION_PREFIX)
        assert out.strip(), row
        target = extract_command(row["target_cmd"])
        if family in ("git_status", "git_diff"):
            assert extract_command(row["prefix"][-1][0]).startswith("sed -i ")
            assert row["prefix"][-1][1] == OBSERVATION_PREFIX
            assert target == family.replace("_", " ")
        expected = {
            "git_status": "modified:",
            "git_diff": "diff --git a/",
            "missing_file": "No such file or directory",
            "traceback": TRACEBACK,
        }
        assert expected.get(family, "") in out
        if family == "test_summary":
            assert target.startswith("python3 -m unittest -v ") and "\nRan " not in out
            assert out.endswith("\nOK\n") or "\nFAILED (" in out or TRACEBACK in out  # or the loader's own error


def test_target_env_is_what_a_fresh_sandbox_prints(probe_set, probe_workdir):
    trees = {t.repo: t for t in discover_code_trees()}
    for k, row in enumerate(read_heldout(str(probe_set))):
        repo = materialize(trees[row["repo"]], probe_workdir / f"repo-{k}")
        sandbox = Sandbox(str(repo))
        for cmd, env in [*row["prefix"], [row["target_cmd"], row["target_env"]]]:
            assert OBSERVATION_PREFIX + sandbox.run(extract_command(cmd)).output == env, (row["family"], cmd)
            normalize_times(repo)


def test_an_unusable_tree_is_skipped_and_counted(tmp_path):
    # mergedeep has no undecorated public function without *args: no traceback or test probe. With two
    # trees, one of the two Python families (indices 8 and 9) starts at mergedeep and moves on.
    manifest = make_probes(
        ProbesConfig(out=str(tmp_path / "p.jsonl"), n=10, seed=0, repos=["pypi/mergedeep", "pypi/click"])
    )
    assert manifest["probes"] == 10 and manifest["skipped"] in (
        {"traceback:no_callable_function": 1},
        {"test_summary:no_callable_function": 1},
    )
    rows = read_heldout(str(tmp_path / "p.jsonl"))
    assert {r["repo"] for r in rows if r["family"] in ("traceback", "test_summary")} == {"pypi/click"}
    with pytest.raises(InputError, match="no code tree gives a 'traceback' probe"):
        make_probes(ProbesConfig(out=str(tmp_path / "q.jsonl"), n=10, seed=0, repos=["pypi/mergedeep"]))
    assert not (tmp_path / "q.jsonl").exists()


def test_probes_are_scored_per_family_by_sim_eval(probe_set, tmp_path):
    from terminalworld.core.assets import load_tokenizer
    from terminalworld.core.heldout import heldout_trajectory
    from terminalworld.core.render import Renderer
    from terminalworld.sim.backend import Simulator, stop_ids
    from terminalworld.sim.evaluate import SimEvalConfig, evaluate_file
    from tests.sim.test_sim_eval import Oracle

    rows = read_heldout(str(probe_set))
    renderer = Renderer(load_tokenizer("smollm2"))
    full = [renderer.render(heldout_trajectory(r)).input_ids.tolist() for r in rows]
    sim = Simulator(renderer, Oracle(full, stop_ids(renderer.tokenizer)), max_new_tokens=100_000)
    cfg = SimEvalConfig(
        model_path="oracle", probes=str(probe_set), out=str(tmp_path / "s.jsonl"), max_new_tokens=100_000
    )
    s = evaluate_file(cfg, sim)
    assert s["tier"] == 2 and s["n"] == N and s["exact_match"] == 1.0
    assert set(s["by_family"]) == set(FAMILIES) and s["by_family"]["ls"]["n"] == 2
    assert all(f["exact_match"] == 1.0 and f["similarity"] == 1.0 for f in s["by_family"].values())


def test_repos_of_trajectory_files_are_left_out_and_a_bad_line_is_an_error(tmp_path):
    from terminalworld.core.formats import repos_in

    good = tmp_path / "good.jsonl"
    rows = [{"instance_id": f"i{k}", "repo": repo, "messages": MESSAGES} for k, repo in enumerate(("a/x", "b/y"))]
    good.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert repos_in([str(good)]) == {"a/x", "b/y"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    with pytest.raises(InputError, match=r"bad\.jsonl:1"):
        repos_in([str(bad)])


MESSAGES = [
    {"role": "system", "content": "s"},
    {"role": "user", "content": "task"},
    {"role": "assistant", "content": "THOUGHT: look.\n\n```bash\nls\n```"},
    {"role": "user", "content": "Observation: a.py"},
]
