"""The scorer against an independent full-logits implementation of the span rule, on SmolLM2."""

import dataclasses
import json
import math
import os

import numpy as np
import pytest

from terminalworld.core.assets import load_hf_model, load_tokenizer, local_model_path, tiny_qwen3
from terminalworld.core.formats import load_trajectories
from terminalworld.core.heldout import heldout_row, heldout_trajectory
from terminalworld.core.targets import classify
from terminalworld.core.trajectories import extract_command
from terminalworld.core.views import SIM_SYSTEM_PROMPT
from terminalworld.eval.scoring import HFScorer, ScoreConfig, score


@pytest.fixture(scope="module")
def heldout(fixtures, tmp_path_factory):
    """Short real held-out rows (SWE-ZERO and mini-swe-agent), so a CPU forward takes a second:
    context observations are cut to their first 400 characters."""
    rows = []
    for k, t in enumerate(load_trajectories(str(fixtures / "adp_swe-zero-12m/sample_raw.json"))[1:]):
        row = heldout_row(t, 3 + k)
        row["prefix"] = [[c, e[:400]] for c, e in row["prefix"]]
        rows.append(dict(row, instance_id=f"{row['instance_id']}#{k}"))
    gh = load_trajectories(str(fixtures / "mini-swe-agent_b6984ac5/github_issue.traj.json"))[0]
    gh_row = heldout_row(gh, 5)
    gh_row["prefix"] = [[c, e[:400]] for c, e in gh_row["prefix"]]
    rows.append(dict(gh_row, instance_id="github_issue", repo="SWE-agent/test-repo"))
    path = tmp_path_factory.mktemp("heldout") / "heldout.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, rows


@pytest.fixture(scope="module")
def smollm2():
    """SmolLM2-135M. With TERMINALWORLD_TINY_SCORING_MODEL set (the mutation runs, where every
    mutant reruns these tests), a tiny random Qwen3 over SmolLM2's vocabulary stands in: every test
    compares the scorer with an independent computation on the same weights, true for any weights."""
    if not os.environ.get("TERMINALWORLD_TINY_SCORING_MODEL"):
        return load_hf_model(local_model_path("smollm2"), "float32")
    return tiny_qwen3(len(load_tokenizer("smollm2"))).eval()


@dataclasses.dataclass(frozen=True)
class DefaultRun:
    lines: list  # every line of the output, the summary last
    summary: dict  # what `score` returned
    text: str  # the output file's text
    forwards: list  # each row the model scored: ((token ids, span positions), the log-probabilities it gave)


@pytest.fixture(scope="module")
def default_run(heldout, smollm2, tmp_path_factory) -> DefaultRun:
    """The held-out rows scored once for the module in the default mode (agent, float32 on CPU, one
    row a forward). Each forward of SmolLM2 over these rows takes seconds on a CPU, so the tests
    that compare another run with this one, resume it, or compare a forward with it share it."""
    import terminalworld.eval.scoring as scoring

    path, _ = heldout
    out = tmp_path_factory.mktemp("default") / "agent.jsonl"
    forwards = []
    real = HFScorer.batch_logprobs

    def recorded(self, items):
        got = real(self, items)
        forwards.extend(zip(items, got, strict=True))
        return got

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scoring, "load_hf_model", lambda p, d: smollm2)
        mp.setattr(HFScorer, "batch_logprobs", recorded)
        summary = score(ScoreConfig(model_path="smollm2", heldout=str(path), out=str(out), dtype="float32"))
    text = out.read_text()
    return DefaultRun([json.loads(x) for x in text.splitlines()], summary, text, forwards)


@pytest.fixture(scope="module")
def next_token_nll(smollm2):
    """The reference NLL of each token given the ones before it (`[k]` is token k + 1's), from the
    model's full logits in float32 log-softmax; one forward per sequence for the module: the agent
    mode's reference of a row and the reference of every depth of that row read the same forward
    of the same whole render."""
    import torch

    cache = {}

    def nll(ids):
        key = tuple(ids)
        if key not in cache:
            with torch.inference_mode():
                logp = torch.log_softmax(smollm2(torch.tensor([ids])).logits[0].float(), dim=-1)
                cache[key] = (-logp[:-1].gather(-1, torch.tensor(ids[1:])[:, None])[:, 0]).tolist()
        return cache[key]

    return nll


def scored_rows(path):
    """A scorer output's rows, without the summary row."""
    return [json.loads(x) for x in path.read_text().splitlines()][:-1]


def reference_messages(row, mode):
    if mode == "agent":
        msgs = [{"role": "system", "content": row["system"]}, {"role": "user", "content": row["task"]}]
        for c, e in [*row["prefix"], [row["target_cmd"], row["target_env"]]]:
            msgs += [{"role": "assistant", "content": c}, {"role": "user", "content": e}]
        return msgs
    pairs = [*row["prefix"], [row["target_cmd"], row["target_env"]]]
    msgs = [{"role": "system", "content": SIM_SYSTEM_PROMPT}]
    for k, (c, e) in enumerate(pairs):
        cmd = extract_command(c) or c
        text = f"Task context:\n{row['task']}\n\nCommand:\n{cmd}" if k == 0 else f"Command:\n{cmd}"
        msgs += [{"role": "user", "content": text}, {"role": "assistant", "content": e}]
    return msgs


def reference_span(tok, row, mode):
    """The whole render's token ids and the target span's positions, by plain string search and
    the last-character rule (no code of the renderer or the scorer)."""
    msgs = reference_messages(row, mode)
    text = tok.apply_chat_template(msgs, tokenize=False)
    start = 0
    for m in msgs:
        start = text.index(m["content"], start) + len(m["content"])
    target = msgs[-1]["content"]
    cs = start - len(target) + (len("Observation: ") if target.startswith("Observation: ") else 0)
    ce = start
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    span = [i for i, (s, e) in enumerate(enc["offset_mapping"]) if cs <= e - 1 < ce]
    span.append(next(i for i, (s, e) in enumerate(enc["offset_mapping"]) if s >= ce))
    return enc["input_ids"], span


def reference_score(next_token_nll, tok, row, mode):
    """Full logits at every position, float32 log-softmax, span by the last-character rule."""
    ids, span = reference_span(tok, row, mode)
    nll = next_token_nll(ids)
    return len(span), float(np.mean([nll[p - 1] for p in span])), [ids[p] for p in span]


def cut_to_depth(row, depth):
    """The held-out row whose target is observation `depth` (1-based): the first depth - 1 pairs
    as prefix."""
    pairs = [*row["prefix"], [row["target_cmd"], row["target_env"]]]
    cmd, env = pairs[depth - 1]
    return dict(row, prefix=pairs[: depth - 1], target_cmd=cmd, target_env=env)


def reference_depths(next_token_nll, tok, row):
    """(n, mean NLL) of the span of every depth: the span found on the row cut to that depth, the
    NLL read from one full-logits forward of the whole row (causal, and each cut render is a token
    prefix of the whole render, which is asserted)."""
    ids, _ = reference_span(tok, row, "agent")
    nll = next_token_nll(ids)
    out = []
    for depth in range(1, len(row["prefix"]) + 2):
        cut_ids, span = reference_span(tok, cut_to_depth(row, depth), "agent")
        assert ids[: len(cut_ids)] == cut_ids
        out.append((len(span), float(np.mean([nll[p - 1] for p in span]))))
    return out


def assert_summary_by_hand(summary, rows):
    """The summary row recomputed from the scored rows with the standard library."""
    import math
    import statistics

    scored = [r for r in rows if "skipped" not in r]
    ppls = [r["ppl"] for r in scored]
    tokens = sum(r["n_target_tokens"] for r in scored)
    nll = math.fsum(r["sum_nll"] for r in scored)
    assert summary["n_scored"] == len(scored) and summary["n_skipped"] == len(rows) - len(scored)
    assert summary["tokens"] == tokens
    assert summary["sum_nll"] == pytest.approx(nll, rel=1e-12)
    assert summary["token_weighted_ppl"] == pytest.approx(math.exp(nll / tokens), rel=1e-12)
    assert summary["median_ppl"] == pytest.approx(statistics.median(ppls), rel=1e-12)
    assert summary["mean_ppl"] == pytest.approx(statistics.fmean(ppls), rel=1e-12)
    assert summary["n_ppl_gt_10"] == sum(p > 10 for p in ppls)
    worst = scored[ppls.index(max(ppls))]
    assert summary["worst"] == {k: worst[k] for k in ("instance_id", "repo", "ppl", "n_target_tokens")}
    assert summary["skipped"] == [
        {"instance_id": r["instance_id"], "reason": r["skipped"]} for r in rows if r not in scored
    ]


@pytest.mark.parametrize("mode", ["agent", "sim"])
def test_scores_match_an_independent_full_logits_implementation(
    heldout, smollm2, default_run, next_token_nll, tmp_path, mode, monkeypatch
):
    path, rows = heldout
    import terminalworld.eval.scoring as scoring

    if mode == "agent":  # the default mode: the module's one run of it
        lines, summary = default_run.lines, default_run.summary
    else:
        monkeypatch.setattr(scoring, "load_hf_model", lambda p, d: smollm2)
        out = tmp_path / f"{mode}.jsonl"
        summary = score(ScoreConfig(model_path="smollm2", heldout=str(path), out=str(out), mode=mode, dtype="float32"))
        lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines[-1] == summary and summary["n_scored"] == len(rows) == 3
    tok = load_tokenizer("smollm2")
    total_n, total_nll = 0, 0.0
    for got, row in zip(lines[:-1], rows, strict=False):
        n, mean, _ = reference_score(next_token_nll, tok, row, mode)
        assert got["instance_id"] == row["instance_id"] and got["n_target_tokens"] == n
        env = row["target_env"]
        assert got["repo"] == row["repo"] and got["target_chars"] == len(env.removeprefix("Observation: ")) > 0
        # Both are float32 on CPU: they differ only by summation order (about 1e-6).
        assert abs(got["mean_nll"] - mean) < 1e-4, (got["mean_nll"], mean)
        total_n, total_nll = total_n + n, total_nll + n * mean
    assert (
        abs(summary["token_weighted_ppl"] - float(np.exp(total_nll / total_n))) < 1e-4 * summary["token_weighted_ppl"]
    )
    assert summary["tokens"] == total_n
    # Named after the model path's last part when no --model-name is given.
    assert (summary["model_name"], summary["model_path"], summary["mode"]) == ("smollm2", "smollm2", mode)
    assert_summary_by_hand(summary, lines[:-1])


def test_a_model_without_a_context_length_is_scored_without_a_cap(smollm2, monkeypatch):
    monkeypatch.delattr(type(smollm2.config), "max_position_embeddings", raising=False)
    monkeypatch.delattr(smollm2.config, "max_position_embeddings", raising=False)
    assert not hasattr(smollm2.config, "max_position_embeddings") and HFScorer(smollm2).max_len is None


def test_summary_statistics_by_hand():
    """Crafted rows where the median and mean PPL differ, a tie-free worst row, PPLs on both sides
    of 10 and a skipped row."""
    import math

    from terminalworld.eval.scoring import summarize

    nlls = {"a": (10, 0.5), "b": (3, 3.0), "c": (40, 1.0), "d": (7, 2.5)}
    rows = [
        {"instance_id": i, "repo": f"r/{i}", "n_target_tokens": n, "sum_nll": n * m, "mean_nll": m, "ppl": math.exp(m)}
        for i, (n, m) in nlls.items()
    ]
    rows.insert(2, {"instance_id": "long", "repo": "r/long", "full_len": 9000, "skipped": "too long"})
    cfg = ScoreConfig(model_path="m", heldout="h.jsonl", out="o.jsonl")
    summary = summarize(rows, cfg, "m")
    assert_summary_by_hand(summary, rows)
    # The same values written out, so that the check above cannot share a mistake with this data.
    assert summary["median_ppl"] == pytest.approx((math.exp(1.0) + math.exp(2.5)) / 2)
    assert summary["mean_ppl"] == pytest.approx((math.exp(0.5) + math.exp(3.0) + math.exp(1.0) + math.exp(2.5)) / 4)
    assert summary["token_weighted_ppl"] == pytest.approx(math.exp((5 + 9 + 40 + 17.5) / 60))
    assert summary["n_ppl_gt_10"] == 2 and summary["worst"]["instance_id"] == "b" and summary["n_skipped"] == 1


def test_agent_and_sim_share_the_target_tokens(heldout):
    _, rows = heldout
    tok = load_tokenizer("smollm2")
    for row in rows:
        agent = scorer_target_ids(tok, row, "agent")
        sim = scorer_target_ids(tok, row, "sim")
        assert agent == sim and len(agent) > 1
        for mode in ("agent", "sim"):
            ids, span = reference_span(tok, row, mode)
            assert [ids[p] for p in span] == agent


def scorer_target_ids(tok, row, mode):
    """The scorer's target span (renderer and `observation_spans`), as token ids."""
    from terminalworld.core.render import Renderer
    from terminalworld.eval.scoring import observation_spans

    traj = heldout_trajectory(row)
    r = Renderer(tok, view=mode).render(traj)
    (span,) = observation_spans(r, traj, all_depths=False)
    return r.input_ids[span.positions].tolist()


def test_prefix_subtraction_shifts_the_window_with_qwen3(heldout):
    """The seeds' bug, shown on the real Qwen3 template: rendering the prefix (ending on the target
    command) inserts an empty think block, so `len(prefix)` lands past the true span start."""
    _, rows = heldout
    tok = load_tokenizer("qwen3")
    row = rows[0]
    msgs = reference_messages(row, "agent")
    full = tok.apply_chat_template(msgs, tokenize=True, return_dict=False)
    prefix = tok.apply_chat_template(msgs[:-1], tokenize=True, return_dict=False)
    full = full["input_ids"] if isinstance(full, dict) else full
    prefix = prefix["input_ids"] if isinstance(prefix, dict) else prefix
    ours = scorer_target_ids(tok, row, "agent")
    ref_ids, ref_span = reference_span(tok, row, "agent")
    assert ref_ids == full and [full[p] for p in ref_span] == ours
    # Where the target observation's header starts, and what the prefix render adds before it.
    header = len(full) - 1 - full[::-1].index(tok.convert_tokens_to_ids("<|im_start|>"))
    think = tok("<think>\n\n</think>\n\n", add_special_tokens=False)["input_ids"]
    lead = tok("<|im_start|>user\nObservation:", add_special_tokens=False)["input_ids"]
    assert (len(think), len(lead)) == (4, 6)
    at = next(i for i in range(len(prefix)) if prefix[i : i + len(think)] == think)
    assert tok.decode(prefix[at - 3 : at]) == "<|im_start|>assistant\n"  # the target command's turn
    assert prefix[:at] + prefix[at + len(think) :] == full[:header] and len(prefix) == header + len(think)
    # Our span: the content after "Observation:" up to and including <|im_end|>, not the newline after it.
    assert ours == full[header + len(lead) : -1] and tok.convert_ids_to_tokens(ours[-1]) == "<|im_end|>"
    # The seeds' window starts len(think) tokens into the header: it scores "ation" and ":" (2 tokens
    # of harness text) and the trailing newline, and nothing else differs.
    seeds_window = full[len(prefix) :]
    assert seeds_window == full[header + len(think) :]
    assert tok.convert_ids_to_tokens(seeds_window[:2]) == ["ation", ":"] and seeds_window[2:-1] == ours
    assert len(seeds_window) == len(ours) + 3 == 606


def test_resume_scores_only_unfinished_rows(heldout, smollm2, default_run, tmp_path, monkeypatch):
    path, _rows = heldout
    import terminalworld.eval.scoring as scoring

    monkeypatch.setattr(scoring, "load_hf_model", lambda p, d: smollm2)
    calls = []
    real = HFScorer.batch_logprobs
    monkeypatch.setattr(HFScorer, "batch_logprobs", lambda self, items: calls.extend(items) or real(self, items))
    out = tmp_path / "agent.jsonl"
    # The uninterrupted run: the module's default run (same rows, same config), every row scored.
    first = default_run.summary
    assert len(default_run.forwards) == 3
    finished = default_run.text.splitlines()
    # An interrupted run: one row done and a torn second line, no final file.
    (tmp_path / "agent.jsonl.partial").write_text(finished[0] + "\n" + finished[1][:20])
    calls.clear()
    second = score(ScoreConfig(model_path="smollm2", heldout=str(path), out=str(out), dtype="float32"))
    assert len(calls) == 2 and second == first
    assert out.read_text().splitlines() == finished and not (tmp_path / "agent.jsonl.partial").exists()
    calls.clear()
    score(ScoreConfig(model_path="smollm2", heldout=str(path), out=str(out), dtype="float32"))  # all done: rebuild only
    assert calls == []


def test_all_depths_and_skipped_rows(heldout, smollm2, next_token_nll, tmp_path, monkeypatch):
    path, rows = heldout
    import terminalworld.eval.scoring as scoring

    monkeypatch.setattr(scoring, "load_hf_model", lambda p, d: smollm2)
    # 2500 tokens: the shorter SWE-ZERO row (2406 tokens, "Observation: " at every depth) and the
    # mini-swe-agent row (1855, no such prefix) are scored, the longer SWE-ZERO row (2655) skipped.
    monkeypatch.setattr(smollm2.config, "max_position_embeddings", 2500)
    out = tmp_path / "d.jsonl"
    summary = score(
        ScoreConfig(model_path="smollm2", heldout=str(path), out=str(out), all_depths=True, dtype="float32")
    )
    lines = scored_rows(out)
    skipped = [x for x in lines if "skipped" in x]
    assert [x["instance_id"] for x in skipped] == ["rsteube__carapace-849#1"]
    assert summary["n_skipped"] == len(skipped) and "exceed the model's 2500" in skipped[0]["skipped"]
    assert_summary_by_hand(summary, lines)
    families = {
        "rsteube__carapace-849#0": ["find", "find", "ls", "ls"],
        "github_issue": ["cat", "ls", "ls", "cat", "edit", "cat"],
    }
    tok = load_tokenizer("smollm2")
    checked = 0
    for got, row in zip(lines, rows, strict=True):
        assert got["instance_id"] == row["instance_id"]
        if "skipped" in got:
            continue
        assert [d["depth"] for d in got["depths"]] == list(range(1, len(row["prefix"]) + 2))
        assert [d["family"] for d in got["depths"]] == families[row["instance_id"]]
        assert got["target_family"] == families[row["instance_id"]][-1]
        last = got["depths"][-1]
        assert (last["n_target_tokens"], last["sum_nll"]) == (got["n_target_tokens"], got["sum_nll"])
        # Every depth against the reference on the row cut to that depth: same tokens, same NLL.
        for d, (n, mean) in zip(got["depths"], reference_depths(next_token_nll, tok, row), strict=True):
            assert (d["n_target_tokens"], d["mean_nll"]) == (n, pytest.approx(mean, abs=1e-4)), d["depth"]
            checked += 1
    assert checked == 4 + 6


def test_unknown_model_is_a_clear_error(heldout, tmp_path):
    import subprocess
    import sys

    path, _ = heldout
    r = subprocess.run(
        [
            sys.executable,
            "scripts/sim_ppl_eval_hf.py",
            "--model-path",
            "nobody/no-such-model",
            "--mode",
            "agent",
            "--heldout",
            str(path),
            "--out-path",
            str(tmp_path / "x.jsonl"),
        ],
        capture_output=True,
        text=True,
        cwd=str(__import__("tests.conftest").conftest.REPO_ROOT),
    )
    assert r.returncode == 2 and "not a local folder, a URL, or an HF id in the local cache" in r.stderr
    assert "Traceback" not in r.stderr


def test_right_padded_batches_equal_single_rows(heldout, smollm2, default_run):
    """Two rows of different lengths in one padded forward against each alone: the default run's
    forwards of those rows (one row each on CPU), which are this very call on these very items."""
    from terminalworld.core.render import Renderer
    from terminalworld.eval.scoring import observation_spans

    _, rows = heldout
    scorer = HFScorer(smollm2)
    items = []
    for row in rows[1:]:
        traj = heldout_trajectory(row)
        r = Renderer(load_tokenizer("smollm2")).render(traj)
        (span,) = observation_spans(r, traj, all_depths=False)
        items.append((r.input_ids, span.positions))
    assert len(items[0][0]) != len(items[1][0])
    together = scorer.batch_logprobs(items)
    for item, got, ((ids, positions), alone) in zip(items, together, default_run.forwards[1:], strict=True):
        assert np.array_equal(ids, item[0]) and np.array_equal(positions, item[1])  # the same single-row call
        assert np.allclose(alone, got, atol=1e-4)


def test_vllm_logprobs_are_read_at_the_observed_token_not_rank_1():
    """The seeds' vLLM attempt read the rank-1 entry; the observed token is often not the argmax."""
    from collections import namedtuple

    from terminalworld.eval.scoring import observed_logprobs

    Logprob = namedtuple("Logprob", "logprob rank decoded_token")  # the fields of vllm.sequence.Logprob
    ids = np.array([11, 7, 5])
    prompt_logprobs = [None, {3: Logprob(-0.1, 1, "a"), 7: Logprob(-2.5, 4, "b")}, {5: Logprob(-0.2, 1, "c")}]
    assert observed_logprobs(prompt_logprobs, ids, np.array([1, 2])).tolist() == [-2.5, -0.2]


def _installed(module):
    import importlib.util

    return importlib.util.find_spec(module) is not None


@pytest.mark.skipif(_installed("vllm"), reason="vllm is installed: the backend runs instead of failing")
def test_vllm_backend_without_the_extra_is_a_clear_error(heldout, tmp_path):
    import subprocess
    import sys

    from tests.paths import REPO_ROOT

    path, _ = heldout
    r = subprocess.run(
        [
            sys.executable,
            "scripts/sim_ppl_eval_hf.py",
            "--model-path",
            "smollm2",
            "--mode",
            "agent",
            "--backend",
            "vllm",
            "--heldout",
            str(path),
            "--out-path",
            str(tmp_path / "v.jsonl"),
        ],
        capture_output=True,
        text=True,
        cwd=str(REPO_ROOT),
    )
    assert r.returncode == 2 and "uv sync --extra gpu" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "v.jsonl").exists()


def _gpu():
    import torch

    return torch.cuda.is_available()


@pytest.fixture(scope="module")
def cpu_scores(default_run):
    """The float32 HF rows on CPU, the reference for the GPU backends."""
    return default_run.lines[:-1]


def _assert_rows_agree(got_path, reference, tol):
    got = scored_rows(got_path)
    for g, ref in zip(got, reference, strict=True):
        assert g["instance_id"] == ref["instance_id"] and g["n_target_tokens"] == ref["n_target_tokens"]
        assert abs(g["mean_nll"] - ref["mean_nll"]) < tol, (g["instance_id"], g["mean_nll"], ref["mean_nll"])


@pytest.mark.skipif(not _gpu(), reason="needs a CUDA device")
def test_cuda_length_sorted_batches_agree_with_cpu_float32(heldout, cpu_scores, tmp_path):
    path, _ = heldout
    out = tmp_path / "cuda.jsonl"
    score(
        ScoreConfig(
            model_path="smollm2", heldout=str(path), out=str(out), device="cuda", batch_tokens=8192, dtype="float32"
        )
    )
    _assert_rows_agree(out, cpu_scores, 1e-3)


@pytest.mark.skipif(not (_gpu() and _installed("vllm")), reason="needs a CUDA device and the gpu extra (vllm)")
def test_vllm_prompt_logprobs_agree_with_hf_float32(heldout, cpu_scores, tmp_path):
    path, _ = heldout
    out = tmp_path / "vllm.jsonl"
    score(ScoreConfig(model_path="smollm2", heldout=str(path), out=str(out), backend="vllm", dtype="float32"))
    _assert_rows_agree(out, cpu_scores, 1e-3)


def test_remote_checkpoint_is_fetched_once_through_fsspec(tmp_path, monkeypatch):
    """gs:// folders go through fsspec; the in-memory filesystem exercises the same path."""
    import os
    import uuid

    import fsspec

    from terminalworld.core.assets import hf_folder
    from terminalworld.errors import InputError

    src = hf_folder("smollm2", "tokenizer")
    files = sorted(n for n in os.listdir(src) if not n.startswith("."))
    fs = fsspec.filesystem("memory")
    root = f"/ckpt-{uuid.uuid4().hex}"
    for name in files:
        with open(os.path.join(src, name), "rb") as f:
            fs.pipe(f"{root}/{name}", f.read())
    url = f"memory://{root}"
    monkeypatch.setenv("TERMINALWORLD_CACHE", str(tmp_path / "cache"))
    got = local_model_path(url)
    assert got.startswith(str(tmp_path / "cache"))
    assert sorted(os.listdir(got)) == sorted([*files, ".complete"])
    assert load_tokenizer(got)("ls -la")["input_ids"] == load_tokenizer("smollm2")("ls -la")["input_ids"]
    fs.rm(root, recursive=True)
    assert local_model_path(url) == got  # cached: the remote is not read again

    # A folder left by an interrupted download (no completion mark) is fetched again, never used.
    os.remove(os.path.join(got, ".complete"))
    open(os.path.join(got, "half-written.bin"), "w").close()
    fs.pipe(f"{root}/config.json", b"{}")
    again = local_model_path(url)
    assert again == got and sorted(os.listdir(again)) == [".complete", "config.json"]
    with pytest.raises(InputError, match="no checkpoint folder"):
        local_model_path(f"memory:///nothing-{uuid.uuid4().hex}")


def test_chat_template_from_another_checkpoint(heldout, smollm2, default_run, next_token_nll, tmp_path, monkeypatch):
    """A base model scored with an SFT checkpoint's template renders exactly as that template does.
    One row (a SWE-ZERO one, whose target starts "Observation: "): the template is applied to every
    row by the same call, so more rows would repeat the same check at seconds a forward."""
    from transformers import AutoTokenizer

    import terminalworld.eval.scoring as scoring
    from terminalworld.core.assets import hf_folder

    _, rows = heldout
    rows = rows[:1]
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(rows[0]) + "\n")
    other = AutoTokenizer.from_pretrained(hf_folder("smollm2", "tokenizer"))
    other.chat_template = (
        "{% for m in messages %}{{ '### ' + m.role + ':\n' + m.content + '<|im_end|>\n' }}{% endfor %}"
    )
    other.save_pretrained(tmp_path / "sft-checkpoint")
    monkeypatch.setattr(scoring, "load_hf_model", lambda p, d: smollm2)
    out = tmp_path / "t.jsonl"
    score(
        ScoreConfig(
            model_path="smollm2",
            heldout=str(path),
            out=str(out),
            chat_template_from=str(tmp_path / "sft-checkpoint"),
        )
    )
    got, default = scored_rows(out), default_run.lines[: len(rows)]
    for g, d, row in zip(got, default, rows, strict=True):
        n, mean, _ = reference_score(next_token_nll, other, row, "agent")
        assert g["n_target_tokens"] == n and abs(g["mean_nll"] - mean) < 1e-4  # both float32 on CPU
        assert g["full_len"] != d["full_len"]


def test_grounding_none_reproduces_the_scores_from_before_grounding(tmp_path):
    """`--grounding none` scores exactly what the scorer scored before grounding existed: the
    committed expectation was made by that scorer (same rows, same seeded tiny Qwen3)."""
    from pathlib import Path

    from terminalworld.core.render import Renderer
    from terminalworld.eval.scoring import score_rows
    from tests.paths import SWE_ZERO

    expected = json.loads((Path(__file__).parent / "scores_before_grounding.json").read_text())
    tok = load_tokenizer("smollm2")
    scorer = HFScorer(tiny_qwen3(len(tok), seed=0))
    rows = [
        heldout_row(t, context_turns=2) | {"instance_id": f"{t.instance_id}-{i}"}
        for i, t in enumerate(load_trajectories(str(SWE_ZERO)))
    ]
    for mode in ("agent", "sim"):
        cfg = ScoreConfig(model_path="m", heldout="h", out="o", mode=mode, all_depths=True, grounding="none")
        for row in score_rows(cfg, scorer, Renderer(tok, view=mode), rows, {}):
            want = expected[f"{mode}:{row['instance_id']}"]
            assert row["grounding"] == "none" and row["full_len"] == want["full_len"]
            assert sum(d["n_target_tokens"] for d in row["depths"]) == want["n"]
            # The scorer takes its share of the cores (core.threads); float32 reductions split over
            # another thread count round differently, about 1e-9 relative.
            assert sum(d["sum_nll"] for d in row["depths"]) == pytest.approx(want["sum_nll"], rel=1e-8)


def test_an_empty_target_observation_is_skipped_with_its_reason(heldout, smollm2, default_run, tmp_path, monkeypatch):
    """A target with no terminal text would be scored on its end-of-turn token alone (a PPL of tens
    of thousands that topped the "worst" column); it is skipped, with its reason, and never scored.
    The other rows' scores are the module's default run, resumed from: the model sees no row here."""
    import terminalworld.eval.scoring as scoring

    _, rows = heldout
    monkeypatch.setattr(scoring, "load_hf_model", lambda p, d: smollm2)
    calls = []
    real = HFScorer.batch_logprobs
    monkeypatch.setattr(HFScorer, "batch_logprobs", lambda self, items: calls.extend(items) or real(self, items))
    empty = [dict(rows[0], instance_id="empty", target_env="Observation: "), dict(rows[0], instance_id="blank")]
    empty[1]["target_env"] = "Observation: \n  \n"
    with_empty = tmp_path / "h.jsonl"
    with_empty.write_text("".join(json.dumps(r) + "\n" for r in [*rows, *empty]))
    scored = default_run.text.splitlines()[: len(rows)]  # the rows without the empty ones, already scored
    (tmp_path / "s.jsonl.partial").write_text("".join(line + "\n" for line in scored))
    summary = score(ScoreConfig(model_path="smollm2", heldout=str(with_empty), out=str(tmp_path / "s.jsonl")))
    assert calls == []  # the empty targets never reach the model
    lines = scored_rows(tmp_path / "s.jsonl")
    assert [x["instance_id"] for x in lines if "skipped" in x] == ["empty", "blank"]
    assert all(x["skipped"].startswith("empty target observation") for x in lines[-2:])
    assert summary["n_scored"] == len(rows) and summary["worst"]["instance_id"] not in ("empty", "blank")
    assert [x["target_class"] for x in lines[-2:]] == ["empty", "empty"]
    assert all(x["target_class"] == classify(r) for x, r in zip(lines, [*rows, *empty], strict=True))
    assert sum(c["n"] for c in summary["by_class"].values()) == summary["n_scored"]
    assert summary["class_counts"]["empty"] == 2
    alone = default_run.summary  # the same rows without the empty ones
    assert {k: summary[k] for k in ("token_weighted_ppl", "median_ppl", "worst")} == {
        k: alone[k] for k in ("token_weighted_ppl", "median_ppl", "worst")
    }


def test_a_skipped_hybrid_row_is_neither_served_nor_counted():
    """An empty target the router would serve is skipped before it is counted: it carries its
    route but no target tokens, and the hybrid summary counts only the rows with a target."""
    from terminalworld.eval.scoring import served_summary

    served = {"grounding": "hybrid", "route": "exact", "n_target_tokens": 30, "served_matches_target": True}
    scored = {"grounding": "hybrid", "route": "generate", "n_target_tokens": 10, "ppl": 2.0}
    skipped = {"grounding": "hybrid", "route": "exact", "skipped": "empty target observation"}
    assert served_summary([served, scored, skipped]) == {
        "served_rows": 1,
        "served_target_tokens": 30,
        "exact_token_share": 0.75,
        "served_matches_target": 1.0,
        "served_by_family": {"other": 1},
    }


def test_the_summary_counts_served_rows_apart_from_skipped_ones():
    """Hybrid: every row is scored, skipped (with its reason) or served exactly, and the summary
    counts the three apart; a served row is no skipped row (held-out hybrid once said 24 skipped
    while its skipped list held 1)."""
    import math

    from terminalworld.eval.scoring import summarize

    def row(i, **kw):
        return {"instance_id": i, "repo": None, "grounding": "hybrid", **kw}

    rows = [
        row(
            "run", route="generated", n_target_tokens=10, sum_nll=10.0, mean_nll=1.0, ppl=math.e, target_family="python"
        ),
        row("cat", route="exact", n_target_tokens=30, target_family="cat", served_matches_target=True),
        row("ls", route="exact", n_target_tokens=20, target_family="ls", served_matches_target=True),
        row("empty", route="exact", skipped="empty target observation: only its end-of-turn token would be scored"),
    ]
    cfg = ScoreConfig(model_path="m", heldout="h", out="o", grounding="hybrid")
    s = summarize(rows, cfg, "m")
    assert (s["n_trajectories"], s["n_scored"], s["n_skipped"], s["n_served"]) == (4, 1, 1, 2)
    assert [x["instance_id"] for x in s["skipped"]] == ["empty"] and s["served_rows"] == 2
    assert s["served_by_family"] == {"cat": 1, "ls": 1} and list(s["by_family"]) == ["python"]
    assert s["exact_token_share"] == pytest.approx(50 / 60) and s["token_weighted_ppl"] == pytest.approx(math.e)
    none = summarize([rows[0], rows[3]], ScoreConfig(model_path="m", heldout="h", out="o"), "m")
    assert (none["n_scored"], none["n_skipped"], none["n_served"]) == (1, 1, 0)


def test_resuming_under_another_grounding_mode_is_refused(heldout, tmp_path):
    """A scores file begun under another `--grounding` is refused with one line before the model
    loads, and kept: resuming it would mix two modes' rows under one summary. A row from before
    grounding (no `grounding` field) is `none`'s."""
    from terminalworld.errors import InputError
    from terminalworld.grounding.modes import same_grounding

    path, rows = heldout
    out, partial = tmp_path / "s.jsonl", tmp_path / "s.jsonl.partial"
    first = {"instance_id": rows[0]["instance_id"], "grounding": "retrieved", "n_target_tokens": 3, "ppl": 2.0}
    partial.write_text(json.dumps(first) + "\n")
    with pytest.raises(InputError, match=r"made with --grounding retrieved .*not none") as e:
        score(ScoreConfig(model_path="no-such-model", heldout=str(path), out=str(out)))
    assert "\n" not in str(e.value) and partial.read_text() == json.dumps(first) + "\n"
    old = {k: v for k, v in first.items() if k != "grounding"}
    partial.write_text(json.dumps(old) + "\n")
    with pytest.raises(InputError, match=r"made with --grounding none .*not hybrid"):
        score(ScoreConfig(model_path="no-such-model", heldout=str(path), out=str(out), grounding="hybrid"))
    same_grounding("none", str(out))({old["instance_id"]: old})  # its own mode resumes it
    partial.unlink()
    out.write_text(json.dumps(first) + "\n" + json.dumps({"_summary": True, "grounding": "retrieved"}) + "\n")
    with pytest.raises(InputError, match="made with --grounding retrieved"):
        score(ScoreConfig(model_path="no-such-model", heldout=str(path), out=str(out), grounding="replayed"))


def test_the_summary_gives_each_class_and_the_headline_on_read_and_predict():
    """Known rows: the headline pools read and predict only; copy and sentinel are reported beside it."""
    from terminalworld.eval.scoring import class_summary

    def row(cls, n, nll):
        return {"target_class": cls, "n_target_tokens": n, "sum_nll": nll, "ppl": math.exp(nll / n)}

    rows = [row("read", 10, 10.0), row("predict", 30, 60.0), row("copy", 100, 1.0), row("sentinel", 5, 0.5)]
    rows.append({"target_class": "empty", "skipped": "empty target observation"})
    got = class_summary(rows)
    assert got["class_counts"] == {"read": 1, "predict": 1, "copy": 1, "sentinel": 1, "empty": 1}
    assert got["headline"]["n"] == 2 and got["headline"]["tokens"] == 40
    assert got["headline"]["ppl"] == pytest.approx(math.exp(70.0 / 40))
    assert got["by_class"]["copy"]["ppl"] == pytest.approx(math.exp(0.01))
    assert list(got["by_class"]) == ["sentinel", "copy", "read", "predict"]
