import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from terminalworld.core.formats import load_trajectories
from terminalworld.core.heldout import read_heldout
from terminalworld.corpus.sampling import HeldoutConfig, SubsetsConfig, make_subsets, sample_heldout
from terminalworld.errors import InputError
from tests.paths import RECORDER_SESSIONS, REPO_ROOT


def _ids(path):
    return [json.loads(line)["instance_id"] for line in gzip.open(path, "rt")]


@pytest.fixture(scope="module")
def corpus_glob(recorded_corpus):
    return str(recorded_corpus / "*.jsonl.gz")


def test_subsets_are_nested_and_deterministic(corpus_glob, tmp_path):
    m = make_subsets(SubsetsConfig(corpus=corpus_glob, out=str(tmp_path / "a"), sizes="5,10,20", seed=42))
    assert m["scanned"] == 24 and m["malformed"] == 0
    s5, s10, s20 = (_ids(tmp_path / "a" / f"subset-{n}.jsonl.gz") for n in (5, 10, 20))
    assert (len(s5), len(s10), len(s20)) == (5, 10, 20) and len(set(s20)) == 20
    assert s10[:5] == s5 and s20[:10] == s10
    make_subsets(SubsetsConfig(corpus=corpus_glob, out=str(tmp_path / "b"), sizes="5,10,20", seed=42))
    for n in (5, 10, 20):
        assert (tmp_path / "a" / f"subset-{n}.jsonl.gz").read_bytes() == (
            tmp_path / "b" / f"subset-{n}.jsonl.gz"
        ).read_bytes()
    make_subsets(SubsetsConfig(corpus=corpus_glob, out=str(tmp_path / "c"), sizes="20", seed=7))
    assert _ids(tmp_path / "c" / "subset-20.jsonl.gz") != s20


def test_subsets_match_a_brute_force_ranking(corpus_glob, tmp_path):
    from terminalworld.core.records import iter_records
    from terminalworld.corpus.sampling import sample_key

    keys = sorted(
        (sample_key(1, r.value["instance_id"], r.file, r.line), r.value["instance_id"])
        for r in iter_records(corpus_glob)
    )
    make_subsets(SubsetsConfig(corpus=corpus_glob, out=str(tmp_path), sizes="7", seed=1))
    assert _ids(tmp_path / "subset-7.jsonl.gz") == [i for _, i in keys[:7]]


def test_heldout_has_no_training_overlap_and_the_seeds_schema(corpus_glob, tmp_path):
    make_subsets(SubsetsConfig(corpus=corpus_glob, out=str(tmp_path), sizes="12", seed=42))
    train = str(tmp_path / "subset-12.jsonl.gz")
    out = str(tmp_path / "heldout.jsonl")
    m = sample_heldout(HeldoutConfig(corpus=[corpus_glob], train=[train], out=out, n=8, context_turns=14, seed=42))
    rows = read_heldout(out)
    train_trajs = load_trajectories(train)
    corpus = {t.instance_id: t for t in load_trajectories(corpus_glob)}
    assert len(rows) == 8 and len({r["repo"] for r in rows}) == 8
    assert not {r["repo"] for r in rows} & {t.repo for t in train_trajs}
    assert not {r["instance_id"] for r in rows} & {t.instance_id for t in train_trajs}
    for r in rows:
        assert list(r) == [
            "instance_id",
            "repo",
            "system",
            "task",
            "prefix",
            "target_cmd",
            "target_env",
            "target_class",
        ]
        t = corpus[r["instance_id"]]
        assert r["prefix"] == [[x.action, x.observation] for x in t.turns[:14]]
        assert (r["target_cmd"], r["target_env"]) == (t.turns[14].action, t.turns[14].observation)
        assert (r["system"], r["task"], r["repo"]) == (t.system, t.task, t.repo)
    assert {
        k: m[k] for k in ("scanned", "malformed", "too_short", "excluded_repo", "excluded_instance", "selected")
    } == {"scanned": 24, "malformed": 0, "too_short": 0, "excluded_repo": 12, "excluded_instance": 0, "selected": 8}
    assert json.loads(Path(out + ".manifest.json").read_text())["selected"] == 8
    again = str(tmp_path / "again.jsonl")
    sample_heldout(HeldoutConfig(corpus=[corpus_glob], train=[train], out=again, n=8, context_turns=14, seed=42))
    assert Path(again).read_bytes() == Path(out).read_bytes()


def test_heldout_without_training_files_is_zero_shot_but_an_empty_file_is_refused(corpus_glob, tmp_path):
    from terminalworld.core.targets import classify_turn

    out = str(tmp_path / "zero-shot.jsonl")
    trajs = load_trajectories(corpus_glob)
    sentinel = [classify_turn(t, 14) == "sentinel" for t in trajs]  # a 15-turn session's last turn submits
    repos = {t.repo for t, s in zip(trajs, sentinel, strict=True) if not s}
    m = sample_heldout(HeldoutConfig(corpus=[corpus_glob], out=out, n=len(repos), context_turns=14, seed=42))
    assert (m["excluded_repo"], m["excluded_instance"], m["selected"]) == (0, 0, len(repos))
    assert m["sentinel_target"] == sum(sentinel)
    assert {r["repo"] for r in read_heldout(out)} == repos
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(InputError, match="no valid trajectory in 0 records"):
        sample_heldout(HeldoutConfig(corpus=[corpus_glob], train=[str(empty)], out=str(tmp_path / "h"), n=3))


def test_heldout_counts_malformed_short_and_instance_overlap(corpus_glob, recorded_corpus, tmp_path):
    trajs = load_trajectories(corpus_glob)
    rows = [t.to_swe_zero_row() for t in trajs]
    short = dict(rows[0], instance_id="short-1", repo="pypi/short", messages=rows[0]["messages"][:10])
    same_instance = dict(rows[1], repo="pypi/renamed")  # new repo, but a training instance id
    lines = [json.dumps(r) for r in rows[2:]] + [
        json.dumps(short),
        json.dumps(same_instance),
        "{broken",
        json.dumps(dict(rows[3], messages=rows[3]["messages"][:3] + rows[3]["messages"][4:])),
    ]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(("\n".join(lines) + "\n").encode() + b"\xff\xfe not utf8\n")
    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps(rows[1]) + "\n")
    m = sample_heldout(
        HeldoutConfig(corpus=[str(corpus)], train=[str(train)], out=str(tmp_path / "h.jsonl"), n=5, seed=1)
    )
    assert (m["scanned"], m["malformed"], m["too_short"], m["excluded_instance"], m["excluded_repo"]) == (
        27,
        3,
        1,
        1,
        0,
    )
    reasons = {(b["line"], b["reason"].split(":")[0]) for b in m["bad_lines"]}
    assert reasons == {(25, "invalid JSON"), (26, "roles out of order"), (27, "undecodable bytes")}
    assert all(b["file"] == str(corpus) for b in m["bad_lines"])


def _cli(*args):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=REPO_ROOT)


def test_cli_errors_are_one_line_without_traceback(corpus_glob, tmp_path):
    script = "scripts/sample_heldout_unseen_repos.py"
    r = _cli(
        script, "--corpus", str(tmp_path / "nothing*.jsonl"), "--train", corpus_glob, "--out", str(tmp_path / "h.jsonl")
    )
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "no file matches" in r.stderr
    r = _cli(script, "--corpus", corpus_glob, "--train", corpus_glob, "--n", "3", "--out", str(tmp_path / "h.jsonl"))
    assert r.returncode == 2 and "only 0 eligible repos" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "h.jsonl").exists()
    r = _cli(
        "-m",
        "terminalworld.cli",
        "corpus",
        "subsets",
        "--corpus",
        corpus_glob,
        "--sizes",
        "100",
        "--out",
        str(tmp_path),
    )
    assert r.returncode == 2 and "fewer than the largest subset" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".jsonl.zst", ".parquet"])
def test_inputs_in_every_container(corpus_glob, tmp_path, suffix):
    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    rows = [t.to_swe_zero_row() for t in load_trajectories(corpus_glob)]
    path = tmp_path / f"corpus{suffix}"
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    if suffix == ".jsonl":
        path.write_bytes(data)
    elif suffix == ".jsonl.gz":
        path.write_bytes(gzip.compress(data))
    elif suffix == ".jsonl.zst":
        path.write_bytes(zstandard.ZstdCompressor().compress(data))
    else:
        pq.write_table(pa.Table.from_pylist(rows), path)
    m = make_subsets(SubsetsConfig(corpus=str(path), out=str(tmp_path / "s"), sizes="4,24", seed=42))
    assert m["scanned"] == 24 and m["malformed"] == 0
    assert sorted(_ids(tmp_path / "s" / "subset-24.jsonl.gz")) == sorted(r["instance_id"] for r in rows)


def test_empty_glob_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="no file matches"):
        make_subsets(SubsetsConfig(corpus=str(tmp_path / "*.jsonl"), out=str(tmp_path), sizes="1"))


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        ({"target_env": None}, "'target_env' is NoneType, not a string"),
        ({"prefix": [["ls", "Observation: a"], ["cat x"]]}, "not a list of [command, observation] string pairs"),
        ({"system": 3}, "'system' is neither a string nor null"),
    ],
)
def test_malformed_heldout_rows_name_file_line_and_defect(tmp_path, bad, problem):
    from terminalworld.errors import TrajectoryError

    good = {
        "instance_id": "a",
        "repo": "r",
        "system": None,
        "task": "t",
        "prefix": [["ls", "Observation: a"]],
        "target_cmd": "cat x",
        "target_env": "Observation: x",
    }
    path = tmp_path / "heldout.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "instance_id": "b", **bad}) + "\n")
    with pytest.raises(TrajectoryError) as e:
        read_heldout(str(path))
    assert e.value.record.endswith("heldout.jsonl:2") and problem in e.value.problem
    path.write_text(json.dumps(good) + "\n")
    assert read_heldout(str(path)) == [good]


def _brute_force_heldout(corpus, train, n, context_turns, seed):
    """Instance ids of the held-out set by its definition, from the raw JSON rows: every
    eligible row's key, per repo the smallest, then the n smallest of those in key order."""
    from terminalworld.core.records import iter_records
    from terminalworld.corpus.sampling import sample_key

    train_rows = [r.value for r in iter_records(train)]
    train_repos, train_ids = {r["repo"] for r in train_rows}, {r["instance_id"] for r in train_rows}
    per_repo: dict[str, list[tuple[int, str]]] = {}
    for rec in iter_records(corpus):
        row = rec.value
        pairs = (len(row["messages"]) - 2) // 2  # system, task, then (action, observation) pairs
        if pairs < context_turns + 1 or row["repo"] in train_repos or row["instance_id"] in train_ids:
            continue
        key = sample_key(seed, row["instance_id"], rec.file, rec.line)
        per_repo.setdefault(row["repo"], []).append((key, row["instance_id"]))
    firsts = sorted(min(keys) for keys in per_repo.values())
    return [iid for _, iid in firsts[:n]], per_repo


@pytest.mark.parametrize(("seed", "n"), [(1, 4), (42, 7), (7, 6)])
def test_heldout_takes_each_repos_smallest_key_and_the_smallest_repos(corpus_glob, tmp_path, seed, n):
    """Several trajectories per repo (2 to 8), rows too short to be eligible, a training repo and a
    training instance: exactly one row per repo, its smallest-key trajectory, and the repos with
    the smallest such keys, in key order, as a brute-force ranking says."""
    rows = [t.to_swe_zero_row() for t in load_trajectories(corpus_glob)]
    assert all(len(r["messages"]) >= 2 + 2 * 4 for r in rows)
    corpus = []
    for repo, count in enumerate([2, 3, 4, 5, 6, 7, 8, 3]):
        for k in range(count):
            base = rows[(7 * repo + k) % len(rows)]
            corpus.append(dict(base, instance_id=f"org/r{repo}-{k}", repo=f"org/r{repo}"))
    corpus[5]["messages"] = corpus[5]["messages"][:6]  # two pairs: too short for 3 context turns
    corpus[20]["messages"] = corpus[20]["messages"][:8]
    corpus_path = tmp_path / "corpus.jsonl"
    corpus_path.write_text("".join(json.dumps(r) + "\n" for r in corpus))
    train_path = tmp_path / "train.jsonl"
    train = [dict(rows[0], instance_id="t-0", repo="org/r7"), dict(rows[1], instance_id="org/r6-2", repo="org/t")]
    train_path.write_text("".join(json.dumps(r) + "\n" for r in train))
    out = tmp_path / "heldout.jsonl"
    m = sample_heldout(
        HeldoutConfig(corpus=[str(corpus_path)], train=[str(train_path)], out=str(out), n=n, context_turns=3, seed=seed)
    )
    got = [r["instance_id"] for r in read_heldout(str(out))]
    want, per_repo = _brute_force_heldout(str(corpus_path), str(train_path), n, 3, seed)
    assert got == want
    repos = [iid.rsplit("-", 1)[0] for iid in got]
    assert len(set(repos)) == len(got) == n
    for repo, iid in zip(repos, got, strict=True):
        assert min(per_repo[repo])[1] == iid  # the repo's smallest key, not any of its trajectories
    # The n repos with the smallest first keys: every repo left out has a larger one.
    chosen_keys = [min(per_repo[r])[0] for r in repos]
    assert chosen_keys == sorted(chosen_keys)
    assert all(min(keys)[0] > chosen_keys[-1] for r, keys in per_repo.items() if r not in repos)
    assert (m["too_short"], m["excluded_repo"], m["excluded_instance"], m["eligible_repos"]) == (2, 3, 1, 7)


def test_heldout_never_chooses_a_sentinel_target_and_records_each_class(tmp_path):
    """Three recorder sessions at 24 context turns: requests-1's 25th turn is the submit echo, so it is
    not eligible (counted as a sentinel target); the two rows chosen carry their targets' classes."""
    from terminalworld.core.targets import classify

    out = tmp_path / "heldout.jsonl"
    m = sample_heldout(HeldoutConfig(corpus=[str(RECORDER_SESSIONS)], out=str(out), n=2, context_turns=24, seed=0))
    rows = read_heldout(str(out))
    assert m["sentinel_target"] == 1 and m["eligible_repos"] == 2
    assert sorted(r["instance_id"] for r in rows) == ["connect-python-0", "pluggy-5"]
    assert all(r["target_class"] == classify(r) != "sentinel" for r in rows)
    assert sum(m["target_classes"].values()) == 2
