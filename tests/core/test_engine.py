"""The continuous engine changes when a request's tokens are computed, never which.

Greedy replies equal HF `generate` one at a time, on the tiny Qwen3 and on SmolLM2-135M-Instruct in
float32 (the real model the pilot serves); sampled replies are keyed per request (seed, step), so
concurrent requests draw what each draws alone, a rerun draws the same, and another seed draws
otherwise. The nucleus cut keeps exactly the smallest set reaching `top_p`."""

import copy

import pytest

from terminalworld.core.assets import load_hf_model, load_tokenizer, tiny_qwen3
from terminalworld.core.engine import ContinuousEngine, _nucleus, draw_seed
from terminalworld.core.formats import load_trajectories
from tests.core.test_batching import _concurrently
from tests.paths import SWE_ZERO


def _prompts(tok, n, chat=False):
    traj = load_trajectories(str(SWE_ZERO))[0]
    texts = [traj.task[: 40 * (k + 1)] + t.action[:200] for k, t in enumerate(traj.turns[:n])]
    if chat:
        texts = [
            tok.apply_chat_template([{"role": "user", "content": t}], add_generation_prompt=True, tokenize=False)
            for t in texts
        ]
    return [tok(t, add_special_tokens=False)["input_ids"] for t in texts]


def _alone_greedy(model, ids, n, stop):
    import torch

    out = model.generate(
        torch.tensor([ids]),
        attention_mask=torch.ones(1, len(ids), dtype=torch.long),
        max_new_tokens=n,
        do_sample=False,
        eos_token_id=stop,
        pad_token_id=stop[0],
    )
    new = out[0, len(ids) :].tolist()
    cut = next((i for i, t in enumerate(new) if t in stop), None)
    return new if cut is None else new[: cut + 1]


@pytest.fixture(scope="module")
def tiny():
    import torch

    torch.set_num_threads(1)
    tok = load_tokenizer("smollm2")
    model = tiny_qwen3(len(tok), seed=1).eval()
    # The engine switches its model to paged attention: the one-at-a-time reference keeps its own.
    engine = ContinuousEngine(copy.deepcopy(model), stop=[tok.eos_token_id], max_batch=8, cache_tokens=8192)
    yield tok, model, engine
    engine.close()


def test_greedy_concurrent_equals_one_at_a_time(tiny):
    tok, model, engine = tiny
    prompts = _prompts(tok, 6)
    got = _concurrently(engine, [{"ids": p, "max_new_tokens": 12, "temperature": 0.0, "seed": 0} for p in prompts])
    assert got == [_alone_greedy(model, p, 12, [tok.eos_token_id]) for p in prompts]


def test_sampled_draws_are_keyed_per_request(tiny):
    tok, _, engine = tiny
    prompts = _prompts(tok, 6)
    jobs = [
        {"ids": p, "max_new_tokens": 10, "temperature": 0.9, "seed": 11 + k, "top_p": 0.95}
        for k, p in enumerate(prompts)
    ]
    jobs[2] = {**jobs[2], "temperature": 0.0}  # a greedy row beside sampled ones
    together = _concurrently(engine, jobs)
    alone = [engine.generate(**kw) for kw in jobs]
    assert together == alone
    assert _concurrently(engine, jobs) == together  # a rerun draws the same
    other = [engine.generate(**{**kw, "seed": kw["seed"] + 100}) for kw in jobs if kw["temperature"] > 0]
    assert other != [t for t, kw in zip(together, jobs, strict=True) if kw["temperature"] > 0]


def test_bad_requests_are_refused_before_work(tiny):
    _, _, engine = tiny
    for bad in (
        {"ids": [], "max_new_tokens": 4},
        {"ids": [1, 2], "max_new_tokens": 0},
        {"ids": [1, 2], "max_new_tokens": 4, "temperature": -1.0},
        {"ids": [1, 2], "max_new_tokens": 4, "top_p": 0.0},
    ):
        with pytest.raises(ValueError):
            engine.generate(**{"temperature": 0.0, "seed": 0, **bad})


def test_nucleus_keeps_the_smallest_set_reaching_top_p():
    import torch

    logits = torch.log(torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05]))
    kept = torch.isfinite(_nucleus(logits[[3, 0, 4, 1, 2]], 0.8))
    assert kept.tolist() == [False, True, False, True, True]  # 0.5 + 0.2 + 0.15 >= 0.8
    assert torch.isfinite(_nucleus(logits, 0.3)).tolist() == [True, False, False, False, False]
    assert len({draw_seed(s, k) for s in range(50) for k in range(50)}) == 2500


def test_smollm2_greedy_and_seeded_on_the_real_model():
    import torch

    torch.set_num_threads(1)
    tok = load_tokenizer("smollm2")
    model = load_hf_model("smollm2", "float32").eval()
    stop = [model.generation_config.eos_token_id]
    prompts = _prompts(tok, 4, chat=True)
    engine = ContinuousEngine(copy.deepcopy(model), stop=stop, max_batch=8, cache_tokens=8192)
    try:
        greedy = _concurrently(
            engine, [{"ids": p, "max_new_tokens": 8, "temperature": 0.0, "seed": 0} for p in prompts]
        )
        sampled = [{"ids": p, "max_new_tokens": 8, "temperature": 0.8, "seed": k} for k, p in enumerate(prompts)]
        together = _concurrently(engine, sampled)
        alone = [engine.generate(**kw) for kw in sampled]
    finally:
        engine.close()
    assert greedy == [_alone_greedy(model, p, 8, stop) for p in prompts]
    assert together == alone


def test_the_simulators_engine_backend_generates_what_padded_batches_do(tiny):
    # Greedy prompts served all at once by `sim.backend.EngineGenerator` get what `HFGenerator`'s
    # left-padded batches give them.
    from terminalworld.sim.backend import EngineGenerator, HFGenerator

    tok, model, _ = tiny
    prompts = _prompts(tok, 5)
    stop = [tok.eos_token_id]
    engine = EngineGenerator(copy.deepcopy(model), stop=stop)
    try:
        got = engine.generate(prompts, max_new_tokens=8, temperature=0.0, seed=0)
    finally:
        engine.engine.close()
    padded = HFGenerator(model, stop=stop, pad=stop[0], batch_size=5).generate(
        prompts, max_new_tokens=8, temperature=0.0, seed=0
    )
    assert got == padded


def test_a_process_that_never_closes_its_engine_still_exits():
    import subprocess
    import sys

    script = (
        "from terminalworld.core.assets import load_tokenizer, tiny_qwen3\n"
        "from terminalworld.core.engine import ContinuousEngine\n"
        "tok = load_tokenizer('smollm2')\n"
        "e = ContinuousEngine(tiny_qwen3(len(tok), seed=1).eval(), stop=[tok.eos_token_id], max_batch=2, cache_tokens=1024)\n"
        "print(len(e.generate([1, 2, 3], max_new_tokens=2, temperature=0.0, seed=0)))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("2"), done.stderr[-2000:]
