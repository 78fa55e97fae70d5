"""Dynamic batching changes how many requests share a `generate` call, never a request's tokens.

The rule: a row of a left-padded batch gets the logits it gets alone up to float rounding (a bound
is asserted on the tiny Qwen3 in float32: 1e-5, measured 1.5e-7); each sampled row draws from its
own generator seeded with its request's seed, so a draw could only move where its uniform falls
within that rounding of a boundary of the row's distribution. So in float32 the tokens are asserted
exactly: greedy rows as before, sampled rows (each its own seed, temperature and top-p, greedy ones
beside them) as each gets alone, and a request alone as `hf_sample` draws with its seed (what a
sampled request got when it ran alone). The same seed gives the same tokens, other seeds others;
the chat server answers concurrent requests, greedy or sampled, as it answers them in turn."""

import json
import threading
import urllib.error
import urllib.request

import pytest

from terminalworld.core.assets import load_tokenizer, tiny_qwen3
from terminalworld.core.batching import DynamicBatcher
from terminalworld.core.decoding import RowDraw, hf_sample, hf_sample_rows
from terminalworld.core.formats import load_trajectories
from tests.paths import SWE_ZERO


@pytest.fixture(scope="module")
def parts():
    import torch

    torch.set_num_threads(1)
    tok = load_tokenizer("smollm2")
    model = tiny_qwen3(len(tok), seed=1).eval()
    traj = load_trajectories(str(SWE_ZERO))[0]
    texts = [traj.task[: 40 * (k + 1)] + t.action[:200] for k, t in enumerate(traj.turns[:8])]
    prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    assert len({len(p) for p in prompts}) == len(prompts)  # every row padded differently
    return tok, model, prompts


def _concurrently(batcher, jobs):
    out = [None] * len(jobs)
    barrier = threading.Barrier(len(jobs))

    def run(k, kw):
        barrier.wait()
        out[k] = batcher.generate(**kw)

    workers = [threading.Thread(target=run, args=(k, kw)) for k, kw in enumerate(jobs)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return out


# 0: one left-padded `generate` call; else rows prefilled alone after the longest cached prefix and
# decoded together from their joined caches (`core.decoding.cached_sample_rows`).
PREFIX_BYTES = [0, 1 << 26]


@pytest.mark.parametrize("prefix_bytes", PREFIX_BYTES)
def test_greedy_batched_left_padded_equals_one_at_a_time(parts, prefix_bytes):
    tok, model, prompts = parts
    stop = [tok.eos_token_id]
    jobs = [{"ids": p, "max_new_tokens": 6 + k, "temperature": 0.0, "seed": 0} for k, p in enumerate(prompts)]
    alone = DynamicBatcher(model, pad=stop[0], stop=stop, max_batch=1)
    together = DynamicBatcher(model, pad=stop[0], stop=stop, max_batch=8, window_s=0.2, prefix_bytes=prefix_bytes)
    expected = [alone.generate(**j) for j in jobs]
    got = _concurrently(together, jobs)
    assert got == expected and max(together.batches) > 1 and set(alone.batches) == {1}
    assert [len(x) for x in got] == [6 + k for k in range(len(jobs))]  # each cut to its own cap


def test_a_padded_row_gets_its_own_logits_up_to_rounding(parts):
    import torch

    tok, model, prompts = parts
    pad, width = tok.eos_token_id, max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    with torch.no_grad():
        batched = model(ids, attention_mask=mask).logits[:, -1]
        alone = torch.cat([model(torch.tensor([p])).logits[:, -1] for p in prompts])
    assert (batched - alone).abs().max().item() <= 1e-5


# Rows sampled at several temperatures (low ones so the prompt's logits, not only the seed, decide
# the draw), one with a top-p cut, and a greedy row among them.
DRAWS = [(0.8, 1.0), (0.05, 1.0), (1.0, 0.9), (0.0, 1.0), (0.1, 1.0), (0.5, 0.5), (1.0, 1.0), (0.2, 1.0)]


@pytest.mark.parametrize("prefix_bytes", PREFIX_BYTES)
def test_sampled_rows_batched_equal_each_alone(parts, prefix_bytes):
    tok, model, prompts = parts
    stop = [tok.eos_token_id]
    jobs = [
        {"ids": p, "max_new_tokens": 6 + k, "temperature": t, "top_p": top_p, "seed": 100 + k}
        for k, (p, (t, top_p)) in enumerate(zip(prompts, DRAWS, strict=True))
    ]
    alone = DynamicBatcher(model, pad=stop[0], stop=stop, max_batch=1)
    together = DynamicBatcher(model, pad=stop[0], stop=stop, max_batch=8, window_s=0.2, prefix_bytes=prefix_bytes)
    expected = [alone.generate(**j) for j in jobs]
    got = _concurrently(together, jobs)
    assert got == expected and max(together.batches) > 1 and set(alone.batches) == {1}
    assert len({tuple(x) for x in got}) == len(got)


def test_a_request_alone_draws_as_hf_sample_does(parts):
    import torch

    tok, model, prompts = parts
    stop = [tok.eos_token_id]
    batcher = DynamicBatcher(model, pad=stop[0], stop=stop, max_batch=1)
    for k, temperature in enumerate([0.8, 0.1]):
        ids = torch.tensor([prompts[k]])
        before = hf_sample(
            model, ids, attention_mask=torch.ones_like(ids), max_new_tokens=8, temperature=temperature, seed=k, pad=0
        )
        got = batcher.generate(prompts[k], max_new_tokens=8, temperature=temperature, seed=k)
        assert got == before[0].tolist()[: len(got)] and len(got) == 8


def test_top_p_cuts_as_transformers_does(parts):
    import torch

    _, model, prompts = parts
    ids = torch.tensor([prompts[2]])
    torch.manual_seed(3)
    with torch.no_grad():
        theirs = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=8,
            do_sample=True,
            temperature=0.5,
            top_k=0,
            top_p=0.6,
            pad_token_id=0,
        )[:, ids.shape[1] :]
    ours = hf_sample_rows(
        model, ids, attention_mask=torch.ones_like(ids), max_new_tokens=8, draws=[RowDraw(0.5, 3, 0.6)], pad=0
    )
    assert ours.tolist() == theirs.tolist()


@pytest.mark.parametrize("prefix_bytes", PREFIX_BYTES)
def test_seeds_are_honoured(parts, prefix_bytes):
    tok, model, prompts = parts
    stop = [tok.eos_token_id]
    together = DynamicBatcher(model, pad=stop[0], stop=stop, max_batch=8, window_s=0.2, prefix_bytes=prefix_bytes)
    seeds = [1, 1, 2, 3, 4, 4]
    jobs = [{"ids": prompts[0], "max_new_tokens": 8, "temperature": 1.0, "seed": s} for s in seeds]
    got = _concurrently(together, jobs)
    assert got[0] == got[1] and got[4] == got[5]  # the same seed in one batch: the same tokens
    assert len({tuple(got[k]) for k in (0, 2, 3, 4)}) == 4  # other seeds: other tokens
    assert together.generate(**jobs[0]) == got[0]  # and alone, later


@pytest.mark.parametrize(
    "bad",
    [{"temperature": -1.0}, {"temperature": float("nan")}, {"top_p": 0.0}, {"top_p": 1.5}, {"seed": -1}],
)
def test_a_bad_sampling_value_is_refused_before_it_is_queued(parts, bad):
    tok, model, prompts = parts
    batcher = DynamicBatcher(model, pad=tok.eos_token_id, stop=[tok.eos_token_id])
    with pytest.raises(ValueError):
        batcher.generate(prompts[0], max_new_tokens=2, **{"temperature": 1.0, "seed": 0, **bad})
    assert batcher.batches == []


def test_the_chat_server_answers_concurrent_requests_as_in_turn(parts, tmp_path):
    from terminalworld.agent.serve import ChatModel, serving

    tok, model, _ = parts
    folder = tmp_path / "tiny"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    chat = ChatModel(str(folder), context_tokens=4096)
    traj = load_trajectories(str(SWE_ZERO))[0]
    bodies = [
        {"messages": [{"role": "user", "content": traj.task[: 60 * (k + 1)]}], "max_tokens": 8, "temperature": 0}
        for k in range(6)
    ]
    for k in (1, 3, 4):  # sampled requests, each with its own seed, among the greedy ones
        bodies[k] |= {"temperature": 0.7, "seed": 11 * k}
    with serving(chat) as url:

        def post(body):
            request = urllib.request.Request(
                f"{url}/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(request, timeout=300) as r:
                return json.loads(r.read())["choices"][0]["message"]["content"]

        in_turn = [post(b) for b in bodies]
        chat.batcher.window_s = 0.2
        out = [None] * len(bodies)
        workers = [threading.Thread(target=lambda k=k: out.__setitem__(k, post(bodies[k]))) for k in range(6)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        with pytest.raises(urllib.error.HTTPError) as refused:
            post({**bodies[0], "temperature": 0.7, "top_p": 2.0})
    assert out == in_turn and max(chat.batcher.batches) > 1
    assert refused.value.code == 400


def test_gather_batches_requests_that_arrive_a_command_apart(parts):
    """An agent grade's attempts reach the server a sandbox command apart: a few-ms window serves
    them one by one, gathering the expected number batches them, and the batch starts as soon as
    the last one is in (not at the window's end); the tokens are the same either way."""
    import time

    tok, model, prompts = parts
    stop = [tok.eos_token_id]
    jobs = [{"ids": p, "max_new_tokens": 4, "temperature": 0.8, "seed": 11 + k} for k, p in enumerate(prompts[:4])]

    def staggered(batcher):
        out, workers = [None] * len(jobs), []
        for k, kw in enumerate(jobs):
            workers.append(threading.Thread(target=lambda k=k, kw=kw: out.__setitem__(k, batcher.generate(**kw))))
            workers[-1].start()
            time.sleep(0.15)  # a command between two attempts' requests
        for w in workers:
            w.join()
        return out

    short = DynamicBatcher(model, pad=stop[0], stop=stop, max_batch=8)
    gathered = DynamicBatcher(model, pad=stop[0], stop=stop, max_batch=8, gather=4, window_s=30.0)
    expected = staggered(short)
    start = time.monotonic()
    assert staggered(gathered) == expected
    assert max(short.batches) < 4 and gathered.batches == [4]
    assert time.monotonic() - start < 15  # it did not wait out the 30 s window
    for bad in ({"gather": 0}, {"gather": 9}, {"window_s": -1.0}):
        with pytest.raises(ValueError, match="gather must be"):
            DynamicBatcher(model, pad=stop[0], stop=stop, max_batch=8, **bad)


def test_grouped_attention_gives_a_padded_batch_the_same_logits(parts):
    """The chat server's attention keeps grouped-query heads grouped under a mask (no copy of the
    cache per step); the logits are those of transformers' SDPA, to the bit on a CPU."""
    import copy

    import torch

    from terminalworld.core.decoding import GQA_SDPA, grouped_attention

    tok, model, prompts = parts
    grouped = grouped_attention(copy.deepcopy(model))
    assert grouped.config._attn_implementation == GQA_SDPA and model.config._attn_implementation == "sdpa"
    assert model.config.num_key_value_heads < model.config.num_attention_heads  # grouped heads to keep
    pad, width = tok.eos_token_id, max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    with torch.no_grad():
        assert torch.equal(grouped(ids, attention_mask=mask).logits, model(ids, attention_mask=mask).logits)
