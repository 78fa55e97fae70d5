"""`sim-eval` end to end on real held-out rows and the real SmolLM2 tokenizer and template: an oracle
simulator scores exactly 1, a constant one exactly what it should, a looping one is degenerate; the
real SmolLM2 backend is seeded, greedy is deterministic, the cap leaves a visible note, and a rerun
resumes, never across grounding modes; `--grounding none` reproduces sim-eval from before grounding."""

import hashlib
import json

import pytest

from terminalworld.core.assets import load_hf_model, load_tokenizer, local_model_path
from terminalworld.core.heldout import heldout_trajectory
from terminalworld.core.render import Renderer
from terminalworld.sim.backend import CAP_NOTE, HFGenerator, Simulator, stop_ids
from terminalworld.sim.evaluate import SimEvalConfig, evaluate_file
from terminalworld.sim.fidelity import similarity


class Oracle:
    """Returns, for each prompt, the real continuation of the full rendering: the true output."""

    def __init__(self, sequences: list[list[int]], stop: list[int]):
        self.sequences, self.stop = sequences, stop

    def generate(self, prompts, *, max_new_tokens, temperature, seed):
        out = []
        for p in prompts:
            full = next(s for s in self.sequences if s[: len(p)] == p)
            rest = full[len(p) :]
            end = next(i for i, t in enumerate(rest) if t in self.stop)
            out.append(rest[: end + 1])
        return out


class Constant:
    """Always the tokens of one text (a looping one when the text repeats)."""

    def __init__(self, ids: list[int], stop: list[int]):
        self.ids, self.stop = ids, stop

    def generate(self, prompts, *, max_new_tokens, temperature, seed):
        return [(self.ids + self.stop[:1])[:max_new_tokens] for _ in prompts]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from terminalworld.core.formats import load_trajectories
    from terminalworld.core.heldout import heldout_row
    from tests.paths import SWE_ZERO

    rows = [
        heldout_row(t, context_turns=2) | {"instance_id": f"{t.instance_id}-{i}"}
        for i, t in enumerate(load_trajectories(str(SWE_ZERO)))
    ]
    path = tmp_path_factory.mktemp("rows") / "heldout.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tok = load_tokenizer("smollm2")
    renderer = Renderer(tok)
    return path, rows, renderer, stop_ids(tok)


def _cfg(path, out, **kw):
    return SimEvalConfig(model_path="fixture", heldout=str(path), out=str(out), **kw)


def test_an_oracle_scores_exactly_one_at_every_depth(setup, tmp_path):
    path, rows, renderer, stop = setup
    full = [renderer.render(heldout_trajectory(r)).input_ids.tolist() for r in rows]
    sim = Simulator(renderer, Oracle(full, stop), max_new_tokens=100_000)
    s = evaluate_file(_cfg(path, tmp_path / "o.jsonl", all_depths=True, max_new_tokens=100_000), sim)
    assert s["n"] == 3 and s["exact_match"] == 1.0 and s["similarity"] == 1.0 and s["line_f1"] == 1.0
    assert s["degenerate_rate"] == 0.0 and s["capped_rate"] == 0.0
    assert set(s["by_depth"]) == {"1", "2", "3"} and all(d["exact_match"] == 1.0 for d in s["by_depth"].values())
    out = [json.loads(x) for x in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert out[-1]["_summary"] and [r["instance_id"] for r in out[:-1]] == [r["instance_id"] for r in rows]
    for row, real in zip(out[:-1], rows, strict=True):
        assert row["generated"] == row["target"] == real["target_env"].removeprefix("Observation: ")


def test_a_constant_simulator_scores_what_it_should(setup, tmp_path):
    path, rows, renderer, stop = setup
    text = "No such file or directory"
    ids = renderer.tokenizer(" " + text, add_special_tokens=False)["input_ids"]
    s = evaluate_file(_cfg(path, tmp_path / "c.jsonl"), Simulator(renderer, Constant(ids, stop)))
    targets = [r["target_env"].removeprefix("Observation: ") for r in rows]
    assert s["exact_match"] == 0.0
    assert s["similarity"] == pytest.approx(sum(similarity(text, t) for t in targets) / 3)
    out = [json.loads(x) for x in (tmp_path / "c.jsonl").read_text().splitlines()][:-1]
    assert all(r["generated"] == text and not r["capped"] for r in out)


def test_a_looping_simulator_is_degenerate_and_capped(setup, tmp_path):
    path, _, renderer, stop = setup
    ids = renderer.tokenizer(" ok ok" * 400, add_special_tokens=False)["input_ids"]
    cfg = _cfg(path, tmp_path / "d.jsonl", max_new_tokens=500)
    s = evaluate_file(cfg, Simulator(renderer, Constant(ids, stop), max_new_tokens=500))
    assert s["degenerate_rate"] == 1.0 and s["degenerate_rate_long"] == 1.0 and s["capped_rate"] == 1.0
    row = json.loads((tmp_path / "d.jsonl").read_text().splitlines()[0])
    assert row["generated"].endswith(CAP_NOTE.format(n=500)) and row["repeated_ngrams"] > 0.9


def test_smollm2_backend_is_seeded_and_a_rerun_resumes(setup, tmp_path):
    path, rows, _, _ = setup
    tok = load_tokenizer("smollm2")
    renderer = Renderer(tok)
    stop = stop_ids(tok)
    model = load_hf_model(local_model_path("smollm2"), "float32")
    traj = heldout_trajectory(rows[0])
    turn = len(traj.turns) - 1

    def run(temperature, seed, batch=1):
        gen = HFGenerator(model, stop=stop, pad=stop[0], batch_size=batch)
        sim = Simulator(renderer, gen, max_new_tokens=6, temperature=temperature, seed=seed)
        return sim.simulate([(traj, turn), (heldout_trajectory(rows[1]), 2)])

    greedy = run(0.0, 0)
    assert greedy == run(0.0, 5) and [g.text for g in greedy] == [g.text for g in run(0.0, 0, batch=2)]
    sampled = run(1.0, 1)  # each run is seconds of SmolLM2 on a CPU: two of seed 1 prove it seeded
    assert sampled == run(1.0, 1) and sampled != run(1.0, 2)
    assert all(g.capped and g.text.endswith(CAP_NOTE.format(n=6)) and g.tokens == 6 for g in greedy)
    # The prompt is the full rendering cut before the real output's first token.
    prompt, lead = Simulator(renderer, None).prompt(traj, turn)
    full = renderer.render(traj).input_ids.tolist()
    assert full[: len(prompt)] == prompt and tok.decode(prompt).endswith("Observation:") and lead == " "
    # A rerun resumes: the finished rows are kept, only the missing one is generated.
    out = tmp_path / "r.jsonl"
    sim = Simulator(renderer, HFGenerator(model, stop=stop, pad=stop[0]), max_new_tokens=4)
    first = evaluate_file(_cfg(path, out, max_new_tokens=4), sim)
    lines = out.read_text().splitlines()
    out.unlink()
    (tmp_path / "r.jsonl.partial").write_text("\n".join(lines[:2]) + "\n")
    assert evaluate_file(_cfg(path, out, max_new_tokens=4), sim) == first


class Recording:
    """A generator that keeps, per prompt, a digest of its token ids, its length and the ids it
    generated (the before-grounding expectation was recorded through the same wrapper)."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def generate(self, prompts, **decoding):
        out = self.inner.generate(prompts, **decoding)
        digest = lambda p: hashlib.sha256(json.dumps(p).encode()).hexdigest()[:16]  # noqa: E731
        self.calls += [[digest(p), len(p), o] for p, o in zip(prompts, out, strict=True)]
        return out


def test_grounding_none_reproduces_sim_eval_from_before_grounding(setup, tmp_path):
    """`sim-eval --grounding none` gives what sim-eval gave before grounding existed: the same
    prompts (token for token), the same generated tokens and the same scores, in both framings,
    greedy and seeded sampling, at every depth. The committed expectation was made by the tree
    before grounding (8c70445^) running this protocol: a seeded tiny Qwen3 on the three SWE-ZERO rows."""
    from pathlib import Path

    import torch

    from terminalworld.core.assets import tiny_qwen3

    torch.set_num_threads(1)
    path, _, _, stop = setup
    tok = load_tokenizer("smollm2")
    model = tiny_qwen3(len(tok), seed=0).eval()
    expected = json.loads((Path(__file__).parent / "sim_eval_before_grounding.json").read_text())
    keep = ("instance_id", "generated", "generated_tokens", "prompt_tokens", "capped", "exact_match", "similarity")
    keep += ("line_f1", "depths")
    for mode in ("agent", "sim"):
        for temperature, seed in ((0.0, 0), (1.0, 3)):
            out = tmp_path / f"{mode}-{temperature}.jsonl"
            cfg = _cfg(path, out, mode=mode, all_depths=True, max_new_tokens=12, temperature=temperature, seed=seed)
            gen = Recording(HFGenerator(model, stop=stop, pad=stop[0]))
            s = evaluate_file(cfg, Simulator(Renderer(tok, view=mode), gen, 12, temperature, seed))
            rows = [json.loads(x) for x in out.read_text().splitlines()][:-1]
            want = expected[f"{mode}:T{temperature}:seed{seed}"]
            assert gen.calls == want["calls"]
            assert [{k: r[k] for k in keep} for r in rows] == want["rows"]
            assert {k: s[k] for k in want["summary"]} == want["summary"]
            assert s["grounding"] == "none" and all(r["grounding"] == "none" for r in rows)


def test_resuming_under_another_grounding_mode_is_refused(setup, tmp_path):
    """A rows file begun under another `--grounding` is refused with one line, before the model
    loads, and left as it was: resuming it would put two modes' rows under one summary."""
    from terminalworld.errors import InputError
    from terminalworld.sim.evaluate import sim_eval

    path, rows, renderer, stop = setup
    out = tmp_path / "g.jsonl"
    partial = tmp_path / "g.jsonl.partial"
    partial.write_text(json.dumps({"instance_id": rows[0]["instance_id"], "grounding": "hybrid"}) + "\n")
    # "fixture" is no model: the refusal comes before any load.
    with pytest.raises(InputError, match="--grounding hybrid") as e:
        sim_eval(_cfg(path, out))
    assert "\n" not in str(e.value)
    with pytest.raises(InputError, match="--grounding hybrid"):
        evaluate_file(_cfg(path, out), Simulator(renderer, Constant([1], stop)))
    # A row from before grounding recorded no mode: it is `none`'s, refused under another mode.
    partial.write_text(json.dumps({"instance_id": rows[0]["instance_id"]}) + "\n")
    with pytest.raises(InputError, match="--grounding none"):
        sim_eval(_cfg(path, out, grounding="retrieved"))
    assert partial.read_text() == json.dumps({"instance_id": rows[0]["instance_id"]}) + "\n" and not out.exists()
    # A finished file is refused under another mode too, and kept under its own.
    partial.unlink()
    s = evaluate_file(_cfg(path, out), Simulator(renderer, Constant([1], stop)))
    assert s["n"] == len(rows) and s["grounding"] == "none"
    before = out.read_text()
    with pytest.raises(InputError, match="--grounding none"):
        sim_eval(_cfg(path, out, grounding="hybrid"))
    assert out.read_text() == before
    assert evaluate_file(_cfg(path, out), Simulator(renderer, Constant([1], stop))) == s


def test_the_headline_is_read_and_predict_so_the_sentinel_cannot_win_it(setup, tmp_path):
    from terminalworld.core.targets import classify
    from terminalworld.sim.evaluate import summarize

    path, rows, _, _ = setup

    def row(cls, sim):
        scores = {"exact_match": sim == 1.0, "similarity": sim, "line_f1": sim, "degenerate": False}
        return {"target_class": cls, "family": "x", "bucket": "<=200", "generated": "g", "capped": False} | scores

    # A simulator that prints the submit echo wins its two sentinel rows and nothing else.
    results = [row("sentinel", 1.0), row("sentinel", 1.0), row("read", 0.2), row("read", 0.2), row("predict", 0.1)]
    s = summarize(results, _cfg(path, tmp_path / "x.jsonl"), "m")
    assert s["exact_match"] == pytest.approx(0.4) and s["headline"]["exact_match"] == 0.0
    assert s["headline"]["n"] == 3 and s["headline"]["similarity"] == pytest.approx(0.5 / 3)
    assert {c: v["n"] for c, v in s["by_class"].items()} == {"sentinel": 2, "copy": 0, "read": 2, "predict": 1}
    # Each evaluated row records its class by the one rule.
    out = tmp_path / "c.jsonl"
    renderer = Renderer(load_tokenizer("smollm2"))
    evaluate_file(_cfg(path, out), Simulator(renderer, Constant([], stop_ids(renderer.tokenizer))))
    classes = [json.loads(x).get("target_class") for x in out.read_text().splitlines()[:-1]]
    assert classes == [classify(r) for r in rows]


def test_rows_served_together_give_the_rows_served_one_at_a_time(setup, tmp_path):
    """`--batch-size`: rows go to the generator together (one call, left-padded batches); the
    oracle still scores exactly 1 at every depth, and SmolLM2's greedy rows equal the rows made one
    at a time."""
    path, rows, renderer, stop = setup
    full = [renderer.render(heldout_trajectory(r)).input_ids.tolist() for r in rows]
    for batch in (1, 3):
        s = evaluate_file(
            _cfg(path, tmp_path / f"o{batch}.jsonl", all_depths=True, batch_size=batch),
            Simulator(renderer, Oracle(full, stop)),
        )
        assert s["exact_match"] == 1.0 and all(v["exact_match"] == 1.0 for v in s["by_depth"].values())
    model = load_hf_model(local_model_path("smollm2"), "float32")
    files = []
    for batch in (1, 4):
        out = tmp_path / f"m{batch}.jsonl"
        generator = HFGenerator(model, stop=stop, pad=stop[0], batch_size=batch)
        evaluate_file(
            _cfg(path, out, max_new_tokens=5, batch_size=batch), Simulator(renderer, generator, max_new_tokens=5)
        )
        files.append(out.read_text())
    assert files[0] == files[1] and len(files[0].splitlines()) == len(rows) + 1
