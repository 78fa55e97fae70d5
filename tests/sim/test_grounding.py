"""Grounding on real code trees, real sandbox runs and the real SmolLM2 tokenizer: the retrieval's
known answers (a `cat` block is the file, a range block is the range, a search block is Python's
own search), the budget rule, the delta, the host reading a hostile copy, the three modes on real
probe rows (hybrid's served output is the recorded one byte for byte), the partition of grounded
renders, and the snapshot store built from a local git repository."""

import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from terminalworld.core.assets import load_tokenizer
from terminalworld.core.heldout import heldout_trajectory
from terminalworld.core.render import NOBODY, Renderer
from terminalworld.env.codetrees import discover_code_trees, git, materialize
from terminalworld.errors import InputError
from terminalworld.eval.scoring import observation_spans
from terminalworld.grounding import about, retrieval
from terminalworld.grounding.modes import Grounder, GroundingOptions, blocks_of
from terminalworld.grounding.snapshots import Instance, SnapshotSource, build_store
from terminalworld.grounding.state import ShadowReader, baseline_of
from terminalworld.report.grounding import edited_rows
from terminalworld.sim.probes import probe_row


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("smollm2")


@pytest.fixture(scope="module")
def tree():
    return next(t for t in discover_code_trees() if t.repo == "pypi/sniffio")


@pytest.fixture
def repo(tree, workdir):
    return materialize(tree, workdir / "repo")


def _block(repo: Path, command: str) -> list[list[str]]:
    return retrieval.blocks(ShadowReader(repo), about.items(command), baseline_of(ShadowReader(repo)))


def test_named_files_ranges_and_folders_are_the_repository_content(repo):
    text = (repo / "sniffio/_impl.py").read_text()
    lines = text.splitlines()
    [cat] = _block(repo, "cat sniffio/_impl.py")
    assert cat[0] == f"==> sniffio/_impl.py ({len(lines)} lines, {len(text.encode())} bytes) <==" and cat[1:] == lines
    [rng] = _block(repo, "sed -n '3,7p' sniffio/_impl.py")
    assert rng[1:] == lines[2:7] and "lines 3-7" in rng[0]
    [piped] = _block(repo, "nl -ba sniffio/_impl.py | sed -n '10,12p'")
    assert piped[1:] == lines[9:12]
    [tail] = _block(repo, "tail -n 4 sniffio/_impl.py")
    assert tail[1:] == lines[-4:]
    [head] = _block(repo, "cd sniffio && head -5 _impl.py")
    assert head[1:] == lines[:5]
    [folder] = _block(repo, "ls -la sniffio")
    assert f"_impl.py ({len(text.encode())} bytes)" in folder and "_tests/" in folder
    [missing] = _block(repo, "cat sniffio/nope.py")
    assert missing == ["==> sniffio/nope.py <==", "(no such file or directory)"]
    assert _block(repo, "cat /etc/passwd") == [] and _block(repo, "cat ../outside") == []


def test_search_blocks_are_pythons_own_search(repo):
    found = _block(repo, 'grep -rn "current_async_library" --include="*.py" . | head -20')
    expected = {}
    for path in sorted(repo.rglob("*.py")):
        if ".git" in path.parts:
            continue
        hits = [f"{n}:{x}" for n, x in enumerate(path.read_text().splitlines(), 1) if "current_async_library" in x]
        if hits:
            expected[str(path.relative_to(repo))] = hits
    assert {b[0].removeprefix("==> ").split(" ")[0]: b[1:] for b in found} == expected
    [alternation] = _block(repo, 'grep -n "def \\|class " sniffio/_impl.py')
    source = (repo / "sniffio/_impl.py").read_text().splitlines()
    assert alternation[1:] == [f"{n}:{x}" for n, x in enumerate(source, 1) if re.search("def |class ", x)]
    [names] = _block(repo, 'find . -name "*impl*"')
    assert names[1:] == ["sniffio/_impl.py"]


def test_budget_rule_whole_then_cut_then_named(tok):
    count = lambda t: len(tok(t, add_special_tokens=False)["input_ids"])  # noqa: E731
    parts = [["==> a <==", *[f"line a{i}" for i in range(5)]], ["==> b <==", *[f"line b{i}" for i in range(400)]]]
    parts.append(["==> c <==", "c"])
    fitted = retrieval.fit(parts, budget=300, count=count)
    assert fitted.tokens <= 300 and fitted.cut and fitted.left_out == ["c"]
    text = fitted.text.splitlines()
    assert text[0] == retrieval.HEADER and text[1:7] == parts[0]
    shown_b = [x for x in text if x.startswith("line b")]
    assert 0 < len(shown_b) < 400 and shown_b == parts[1][1 : 1 + len(shown_b)]
    assert f"[... {400 - len(shown_b)} more lines not shown]" in text and text[-1] == "[not shown: c]"
    whole = retrieval.fit(parts, budget=100_000, count=count)
    assert not whole.cut and whole.text == "\n".join([retrieval.HEADER, *("\n".join(p) for p in parts)])


def test_delta_repeats_nothing_unchanged(repo):
    seen: dict[str, str] = {}
    first = retrieval.delta(_block(repo, "cat sniffio/_impl.py"), seen)
    again = retrieval.delta(_block(repo, "cat sniffio/_impl.py"), seen)
    assert len(first[0]) > 5 and again == [[first[0][0].removesuffix(" <==") + " <== unchanged, shown above"]]
    (repo / "sniffio/_impl.py").write_text("changed\n")
    changed = retrieval.delta(_block(repo, "cat sniffio/_impl.py"), seen)
    assert changed[0][1:] == ["changed"]


def test_the_host_never_follows_a_link_out_of_the_copy(repo):
    os.symlink("/etc/passwd", repo / "sniffio/secret.py")
    os.symlink("/etc", repo / "sniffio/etc")
    reader = ShadowReader(repo)
    assert reader.read("sniffio/secret.py") is None and reader.kind("sniffio/secret.py") == "other"
    assert reader.read("sniffio/etc/passwd") is None and reader.kind("sniffio/etc/passwd") is None
    assert not any("passwd" in f for f in reader.walk("."))
    [block] = _block(repo, "cat sniffio/secret.py")
    assert block[1] == "(not a regular file)" and "root:" not in "\n".join(block)
    os.mkfifo(repo / "sniffio/fifo")
    assert reader.read("sniffio/fifo") is None  # a FIFO would block a naive reader forever


@pytest.fixture(scope="module")
def probe_rows(tree):
    from terminalworld.env.sandbox import SandboxConfig

    config = SandboxConfig(head_chars=500, tail_chars=500)
    return {
        f: probe_row(tree=tree, family=f, instance_id=f"p-{f}", seed=1, sandbox_config=config)
        for f in ("cat", "git_diff", "traceback")
    }


def _grounder(tok, mode):
    return Grounder(GroundingOptions(grounding=mode, grounding_output_chars=1000, grounding_budget=4096), tok)


def test_modes_on_real_probe_rows(tok, probe_rows):
    cat, diff, tb = probe_rows["cat"], probe_rows["git_diff"], probe_rows["traceback"]
    target = lambda row: row["target_env"].removeprefix("Observation: ")  # noqa: E731
    last = lambda row: len(row["prefix"])  # noqa: E731
    retrieved = _grounder(tok, "retrieved")
    g = retrieved.trajectory(heldout_trajectory(cat), [last(cat)])[last(cat)]
    assert g.route == "exact" and g.served is None and target(cat).rstrip("\n") in g.block  # a cat's output is its file
    before = retrieved.trajectory(heldout_trajectory(diff), [last(diff)])[last(diff)].block
    after = _grounder(tok, "replayed").trajectory(heldout_trajectory(diff), [last(diff)])[last(diff)].block
    assert "(none)" in before and "modified: " in after and "(none)" not in after  # the prefix's sed -i edit
    assert g.holds(target(cat)) and not g.holds("no such line in the file at all")  # emulation, not prediction
    assert list(edited_rows([cat, diff, tb])) == ["p-git_diff"]  # only the diff's session edits first
    hybrid = _grounder(tok, "hybrid")
    for row in (cat, diff):
        h = hybrid.trajectory(heldout_trajectory(row), [last(row)])[last(row)]
        assert h.route == "exact" and h.served == target(row) and h.block is None
    h = hybrid.trajectory(heldout_trajectory(tb), [last(tb)])[last(tb)]
    assert h.route == "generated" and h.served is None and h.block and h.family == "execution"
    none = _grounder(tok, "none").trajectory(heldout_trajectory(tb), [last(tb)])
    assert blocks_of(none) == {}


@pytest.mark.parametrize("view", ["agent", "sim"])
def test_grounded_renders_partition_and_keep_the_target_tokens(tok, probe_rows, view):
    row = probe_rows["git_diff"]
    traj = heldout_trajectory(row)
    grounder = _grounder(tok, "replayed")
    blocks = grounder.blocks(traj)
    assert len(blocks) == len(traj.turns)
    renderer = Renderer(tok, view=view)
    plain, grounded = renderer.render(traj), renderer.render(traj, blocks)
    grounded.check_partition()
    a, b, c = (grounded.mask(arm) for arm in ("assistant", "full", "user"))
    assert np.array_equal(a | c, b) and not (a & c).any()
    kinds = [m.kind for m in grounded.messages]
    for i in (i for i, k in enumerate(kinds) if k == "grounding"):
        assert not (grounded.owner == i).any()  # grounding owns nothing: never trained, never scored
    assert len(grounded.input_ids) > len(plain.input_ids) + 50
    # Every owned message keeps exactly its tokens: the trained ids per arm are those of the plain render.
    for arm in ("assistant", "full", "user"):
        assert grounded.input_ids[grounded.mask(arm)].tolist() == plain.input_ids[plain.mask(arm)].tolist()
    [p], [g] = observation_spans(plain, traj, False), observation_spans(grounded, traj, False)
    assert plain.input_ids[p.positions].tolist() == grounded.input_ids[g.positions].tolist()
    assert renderer.render(traj, {}).input_ids.tolist() == plain.input_ids.tolist()


def test_render_view_sim_with_grounding_writes_grounded_training_rows(probe_rows, tmp_path):
    from terminalworld.train.render_rows import RenderConfig, render_file

    traj = heldout_trajectory(probe_rows["cat"])
    src = tmp_path / "t.jsonl"
    src.write_text(
        json.dumps(traj.to_swe_zero_row())
        + "\n"
        + json.dumps(
            {
                "instance_id": "x",
                "repo": "gone/x",
                **{k: v for k, v in traj.to_swe_zero_row().items() if k not in ("instance_id", "repo")},
            }
        )
        + "\n"
    )
    cfg = dict(tokenizer="smollm2", inputs=[str(src)], arm="user", view="sim")
    plain = render_file(RenderConfig(out=str(tmp_path / "p.jsonl"), **cfg))
    grounded = render_file(RenderConfig(out=str(tmp_path / "g.jsonl"), grounding="retrieved", **cfg))
    assert grounded["grounding"] == "retrieved" and grounded["examples"] == 1
    assert grounded["failed"] == {"no grounding source": 1} and "gone/x" in grounded["failures"][0]["detail"]
    p, g = (json.loads((tmp_path / f).read_text().splitlines()[0]) for f in ("p.jsonl", "g.jsonl"))
    assert grounded["trained_tokens"] == sum(p["loss_weights"]) < plain["trained_tokens"] + 1
    assert len(g["input_ids"]) > len(p["input_ids"])


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def test_snapshot_store_from_a_local_git_repository(tmp_path, workdir):
    origin = tmp_path / "remote" / "owner" / "proj"
    origin.mkdir(parents=True)
    git(origin, "init", "-q", "-b", "main")
    base = _commit(origin, {"pkg/a.py": "def f():\n    return 1\n", "README.md": "proj\n"}, "first")
    _commit(origin, {"pkg/a.py": "def f():\n    return 2\n", "pkg/b.py": "x = 1\n"}, "second")
    store = str(tmp_path / "store")
    url = str(tmp_path / "remote") + "/{repo}"
    index = build_store(instances=[Instance("owner__proj-1", "owner/proj", base)], store=store, clone_url=url)
    entry = index["instances"]["owner__proj-1"]
    assert entry["base_commit"] == base and entry["files"] == 2
    archive = Path(store, entry["archive"])
    stamp = archive.stat().st_mtime_ns
    again = build_store(instances=[Instance("owner__proj-1", "owner/proj", base)], store=store, clone_url=url)
    assert again == index and archive.stat().st_mtime_ns == stamp  # resumed, not rebuilt
    source = SnapshotSource(store)
    row = {"instance_id": "owner__proj-1", "repo": "owner/proj"}
    assert source.has(row) and not source.has({"instance_id": "other"})
    source.materialize(row, workdir / "snap")
    assert (workdir / "snap/pkg/a.py").read_text() == "def f():\n    return 1\n"  # the base commit, not HEAD
    assert not (workdir / "snap/pkg/b.py").exists()
    status = subprocess.run(["git", "status", "--porcelain"], cwd=workdir / "snap", capture_output=True, text=True)
    assert status.stdout == ""
    archive.write_bytes(archive.read_bytes()[:-3] + b"xyz")
    with pytest.raises(InputError, match="does not match its digest"):
        SnapshotSource(store).materialize(row, workdir / "snap2")


def test_the_grounding_source_is_named_when_missing(tok):
    grounder = _grounder(tok, "retrieved")
    with (
        pytest.raises(InputError, match="no grounding source holds repository 'gone/x'"),
        grounder.session({"instance_id": "x", "repo": "gone/x"}),
    ):
        pass
    assert NOBODY == -1


def test_the_snapshot_step_builds_the_store_from_an_instances_file(tmp_path):
    from terminalworld.grounding.snapshots import StoreConfig, build_store_from
    from terminalworld.sim.steps import snapshot_store

    origin = tmp_path / "remote" / "o" / "p"
    origin.mkdir(parents=True)
    git(origin, "init", "-q", "-b", "main")
    base = _commit(origin, {"a.txt": "one\n"}, "first")
    instances = tmp_path / "instances.jsonl"
    instances.write_text(json.dumps({"instance_id": "o__p-1", "repo": "o/p", "base_commit": base}) + "\n")
    build_store_from(StoreConfig(str(instances), str(tmp_path / "store"), str(tmp_path / "remote") + "/{repo}"))
    assert SnapshotSource(str(tmp_path / "store")).has({"instance_id": "o__p-1"})
    planned = snapshot_store(instances=str(instances), version="2026.12.04")
    assert planned.name == "terminalworld/snapshots/swe-zero"
    instances.write_text("{not json\n")
    with pytest.raises(InputError, match=r"instances\.jsonl:1"):
        build_store_from(StoreConfig(str(instances), str(tmp_path / "s2"), ""))


def test_the_scorer_records_whether_the_target_stands_in_its_block(probe_rows, tmp_path):
    """A grounded scores row says whether its target stands in its block (the copy rule): a `cat`'s
    output does (the block is the file), a traceback does not."""
    from terminalworld.eval.scoring import ScoreConfig, score

    path, out = tmp_path / "h.jsonl", tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(probe_rows[f]) + "\n" for f in ("cat", "traceback")))
    score(ScoreConfig(model_path="smollm2", heldout=str(path), out=str(out), grounding="retrieved"))
    got = {r["instance_id"]: r for r in map(json.loads, out.read_text().splitlines()) if not r.get("_summary")}
    assert (got["p-cat"]["target_in_block"], got["p-traceback"]["target_in_block"]) == (True, False)
