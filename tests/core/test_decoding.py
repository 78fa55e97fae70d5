"""`hf_sample` is pure temperature sampling: the sampled tokens follow softmax(logits / T) over the
whole vocabulary, with no top-k (transformers' default keeps 50) and no top-p cut."""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from terminalworld.core.decoding import hf_sample

ROWS = 4000
VOCAB = 200


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
    )
    return LlamaForCausalLM(config).eval()


def _first_tokens(model, temperature: float, seed: int = 0, rows: int = ROWS) -> torch.Tensor:
    ids = torch.tensor([[1, 2, 3]] * rows)
    return hf_sample(
        model, ids, attention_mask=torch.ones_like(ids), max_new_tokens=1, temperature=temperature, seed=seed, pad=0
    )[:, 0]


def _within(count: int, p: float) -> bool:
    """`count` of ROWS draws is within five standard deviations of a probability `p` event."""
    sd = (ROWS * p * (1 - p)) ** 0.5
    return abs(count - ROWS * p) <= 5 * sd


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampling_keeps_the_tokens_a_top_k_or_top_p_would_cut(model, temperature):
    with torch.no_grad():
        logits = model(torch.tensor([[1, 2, 3]])).logits[0, -1]
    p = torch.softmax(logits / temperature, -1)
    order = torch.argsort(p, descending=True)
    beyond_top_k = set(order[50:].tolist())  # what transformers' default top_k=50 never samples
    nucleus = int((torch.cumsum(p[order], 0) < 0.9).sum()) + 1
    beyond_top_p = set(order[nucleus:].tolist())  # what a top_p=0.9 never samples
    drawn = _first_tokens(model, temperature).tolist()
    assert len(set(drawn)) > 150  # nearly the whole vocabulary appears
    for cut in (beyond_top_k, beyond_top_p):
        mass = float(p[list(cut)].sum())
        assert mass > 0.05 and _within(sum(t in cut for t in drawn), mass)
    # Token by token, frequencies follow the distribution (the ten likeliest tokens).
    for t in order[:10].tolist():
        assert _within(drawn.count(t), float(p[t]))


def test_sampling_is_seeded_and_temperature_zero_is_greedy(model):
    a, b, c = (_first_tokens(model, 1.0, seed=s, rows=200) for s in (3, 3, 4))
    assert torch.equal(a, b) and not torch.equal(a, c)
    with torch.no_grad():
        best = int(model(torch.tensor([[1, 2, 3]])).logits[0, -1].argmax())
    assert set(_first_tokens(model, 0.0, rows=200).tolist()) == {best}
