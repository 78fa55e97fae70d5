"""Kept keys and values change how much of a prompt is prefilled, never a request's tokens.

Known answers: a conversation's next turn prefills exactly the tokens it added (the cache's own
count), a task's later attempts prefill only their last prompt token, and the tokens equal those of
the path that prefills every prompt whole (`hf_sample_rows` through a batcher without a cache). A
lookup hands out a copy the caller may extend; the budget bounds the bytes whatever is sent."""

import random

import pytest

from terminalworld.core.assets import load_tokenizer, tiny_qwen3
from terminalworld.core.batching import DynamicBatcher
from terminalworld.core.prefix_cache import PrefixCache, common_prefix


@pytest.fixture(scope="module")
def parts():
    import torch

    torch.set_num_threads(1)
    tok = load_tokenizer("smollm2")
    model = tiny_qwen3(len(tok), seed=1).eval()
    rng = random.Random(0)
    prompts = [[rng.randrange(100, 40000) for _ in range(40 + 9 * k)] for k in range(4)]
    return tok, model, prompts


def _layers(n, fill=0.0, layers=2):
    import torch

    return [(torch.full((1, 2, n, 4), fill + i), torch.full((1, 2, n, 4), -fill - i)) for i in range(layers)]


def test_lookup_finds_the_longest_prefix_and_leaves_the_last_token():
    cache = PrefixCache(1 << 20)
    cache.store([1, 2, 3, 4], _layers(4, 1.0))
    cache.store([1, 2, 9], _layers(3, 2.0))
    layers, n = cache.lookup([1, 2, 3, 4, 5, 6])
    assert n == 4 and layers[0][0].shape[2] == 4 and layers[0][0][0, 0, 0, 0].item() == 1.0
    assert cache.lookup([1, 2, 3, 4])[1] == 3  # the whole prompt held: its last token is still prefilled
    assert cache.lookup([7, 8])[1] == 0 and cache.lookup([7, 8])[0] is None
    layers[0][0].fill_(99.0)  # a private copy: the entry is untouched
    assert cache.lookup([1, 2, 3, 4, 5])[0][0][0][0, 0, 0, 0].item() == 1.0
    assert common_prefix((1, 2, 3), [1, 2, 4]) == 2


def test_the_budget_bounds_bytes_and_a_longer_entry_replaces_its_prefixes():
    entry = sum(k.nbytes + v.nbytes for k, v in _layers(4))
    cache = PrefixCache(2 * entry)
    cache.store([1, 2], _layers(2))
    cache.store([1, 2, 3, 4], _layers(4))  # [1, 2] is a prefix of it: dropped, nothing lost
    assert len(cache) == 1 and cache.lookup([1, 2, 5])[1] == 2
    cache.store([5, 6, 7, 8], _layers(4))
    cache.store([9, 9, 9, 9], _layers(4))  # over the budget: the least recently used goes
    assert len(cache) == 2 and cache.nbytes <= 2 * entry and cache.lookup([1, 2, 3, 4, 0])[1] == 0
    cache.store(list(range(100)), _layers(100))  # larger than the whole budget: not kept
    assert cache.nbytes <= 2 * entry and cache.lookup(list(range(100)))[1] == 0
    with pytest.raises(ValueError, match="one row of 3 positions"):
        cache.store([1, 2, 3], _layers(4))
    with pytest.raises(ValueError, match="max_bytes"):
        PrefixCache(0)


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_a_conversation_prefills_only_what_it_added(parts, temperature):
    tok, model, prompts = parts
    stop = [tok.eos_token_id]
    whole = DynamicBatcher(model, pad=stop[0], stop=stop, max_batch=1)
    cached = DynamicBatcher(model, pad=stop[0], stop=stop, max_batch=1, prefix_bytes=1 << 26)
    turn, prefilled = list(prompts[0]), 0
    for k in range(3):  # each turn: the conversation so far, its reply, then an observation
        kw = {"max_new_tokens": 6, "temperature": temperature, "seed": 5 + k}
        reply = cached.generate(turn, **kw)
        assert reply == whole.generate(turn, **kw)
        prefilled = cached.cache.misses - prefilled
        # the first turn whole; then the reply's last token (sampled, never fed back) and the 7 added
        assert prefilled == (len(turn) if k == 0 else 1 + 7)
        prefilled = cached.cache.misses
        turn = turn + reply + prompts[k + 1][:7]


def test_a_tasks_attempts_share_its_prompt_batched_or_not(parts):
    import threading

    tok, model, prompts = parts
    stop = [tok.eos_token_id]
    whole = DynamicBatcher(model, pad=stop[0], stop=stop, max_batch=1)
    cached = DynamicBatcher(model, pad=stop[0], stop=stop, max_batch=8, window_s=0.5, prefix_bytes=1 << 26)
    jobs = [{"ids": prompts[1], "max_new_tokens": 5, "temperature": 0.8, "seed": s} for s in range(4)]
    out = [None] * 4
    workers = [threading.Thread(target=lambda k=k: out.__setitem__(k, cached.generate(**jobs[k]))) for k in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert cached.batches == [4] and out == [whole.generate(**j) for j in jobs]
    assert cached.cache.misses == len(prompts[1]) + 3  # the first attempt's prompt, then one token each


def test_the_decode_cache_writes_in_place_what_concatenation_would_hold():
    import torch
    from transformers.cache_utils import DynamicLayer

    from terminalworld.core.decoding import _preallocated_layer

    keys, values = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 5, 4)
    rows = [(keys[r : r + 1], values[r : r + 1]) for r in range(2)]
    grown, reserved = DynamicLayer(), _preallocated_layer()(rows, capacity=7)
    grown.update(keys, values)
    for _ in range(2):
        step = torch.randn(2, 3, 1, 4), torch.randn(2, 3, 1, 4)
        ours, theirs = reserved.update(*step), grown.update(*step)
        assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))
    assert reserved.get_seq_length() == 7
    with pytest.raises(ValueError, match="holds 7 positions, not 8"):
        reserved.update(torch.randn(2, 3, 1, 4), torch.randn(2, 3, 1, 4))
