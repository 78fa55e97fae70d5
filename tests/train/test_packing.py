"""Our rows through Levanter: the cache, the shift, the segments, and a few real training steps."""

import json

import numpy as np
import pytest

from terminalworld.core.assets import load_tokenizer
from terminalworld.core.formats import load_trajectories
from terminalworld.core.render import Renderer, training_row
from terminalworld.errors import PackingError
from terminalworld.train.packing import PackStats, pack_rows, shifted_weights, training_tokenizer

SEQ_LEN = 2048
# A randomly initialised Qwen3 small enough to train on CPU in seconds.
TINY = {"hidden_dim": 64, "intermediate_dim": 128, "num_layers": 2, "num_heads": 4, "num_kv_heads": 2, "head_dim": 16}


@pytest.fixture(scope="module")
def rows(fixtures):
    tok = load_tokenizer("qwen3")
    trajs = load_trajectories(
        [str(fixtures / "mini-swe-agent/*.json"), str(fixtures / "adp_swe-zero-12m/sample_raw.json")]
    )
    renderer = Renderer(tok, max_len=900)
    return [training_row(renderer.render(t), "assistant") for t in trajs]


@pytest.fixture(scope="module")
def levanter_dataset(rows, tmp_path_factory):
    import haliax as hax
    import jax

    from terminalworld.train.sft import levanter_data_config

    tmp = tmp_path_factory.mktemp("lev")
    sep = load_tokenizer("qwen3").convert_tokens_to_ids("<|endoftext|>")
    packed = list(pack_rows(rows, SEQ_LEN, sep))
    path = tmp / "packed.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in packed))
    tokdir = training_tokenizer("qwen3", str(tmp / "tokenizer"))
    cfg = levanter_data_config([str(path)], tokdir, str(tmp / "cache"))
    ds = cfg.train_sets(hax.Axis("position", SEQ_LEN), key=jax.random.PRNGKey(0))["sft"].as_sync_dataset()
    return packed, ds, tokdir, path, tmp


def test_packing_is_greedy_in_order_and_exact_length(rows):
    stats = PackStats()
    packed = list(pack_rows(rows, SEQ_LEN, 151643, stats))
    assert all(len(p["input_ids"]) == len(p["loss_weights"]) == SEQ_LEN for p in packed)
    # Rows cut by max_len before their first assistant turn train nothing and are left out.
    trained = [r for r in rows if any(r["loss_weights"][1:])]
    assert 0 < len(trained) < len(rows) and stats.untrained == len(rows) - len(trained)
    assert [i for p in packed for i in p["instance_ids"]] == [r["instance_id"] for r in trained]
    assert stats.documents == len(trained) and stats.tokens == sum(len(r["input_ids"]) for r in trained)
    assert stats.sequences * SEQ_LEN == stats.tokens + stats.documents + stats.padding
    # Trained-token count is preserved, minus each document's first token (never predicted).
    assert sum(sum(p["loss_weights"]) for p in packed) == sum(sum(r["loss_weights"][1:]) for r in rows)


def test_shift_is_exactly_one_position():
    assert shifted_weights(np.array([0, 1, 1, 0, 1])).tolist() == [1, 1, 0, 1, 0]


def test_packing_refuses_turn_terminators_and_overlong_documents(rows):
    im_end = load_tokenizer("qwen3").convert_tokens_to_ids("<|im_end|>")
    with pytest.raises(PackingError, match="occurs inside the document"):
        list(pack_rows(rows, SEQ_LEN, im_end))
    with pytest.raises(PackingError, match="do not fit"):
        list(pack_rows(rows, 100, 151643))


def test_levanter_reads_our_tokens_and_shifted_weights(levanter_dataset, rows):
    packed, ds, *_ = levanter_dataset
    assert len(ds) == len(packed)
    for k, p in enumerate(packed):
        ex = ds[k]
        assert np.asarray(ex.tokens).tolist() == p["input_ids"]
        lw = np.asarray(ex.loss_weight)
        # Levanter zeroes the last position itself; everything else is our shifted mask.
        assert lw[:-1].tolist() == p["loss_weights"][:-1] and lw[-1] == 0
    # Token-level view: position t is weighted iff token t+1 is an assistant token of the same document.
    first = rows[0]
    lw = np.asarray(ds[0].loss_weight)[: len(first["input_ids"])]
    assert np.array_equal(np.flatnonzero(lw) + 1, np.flatnonzero(first["loss_weights"]))


def test_later_turns_attend_to_earlier_ones_but_not_across_documents(levanter_dataset):
    _packed, ds, tokdir, *_ = levanter_dataset
    assert load_tokenizer(tokdir).eos_token == "<|endoftext|>"
    ex = ds[0]
    seg = np.asarray(
        ex.attn_mask.segment_ids[0] if isinstance(ex.attn_mask.segment_ids, tuple) else ex.attn_mask.segment_ids
    )
    ids = np.asarray(ex.tokens)
    bounds = np.flatnonzero(ids == 151643)
    first_doc = slice(0, bounds[0] + 1)
    # One conversation of many turns (<|im_end|> inside) is one segment...
    assert (ids[first_doc] == 151645).sum() >= 4 and len(set(seg[first_doc].tolist())) == 1
    # ...and the next document is another.
    assert seg[bounds[0] + 1] != seg[0]


def test_levanter_loss_is_the_masked_mean_over_our_trained_tokens(levanter_dataset, rows):
    """Levanter's training loss on a packed row equals a hand-computed mean NLL over exactly the
    tokens our mask trains, from the same model's logits."""
    import haliax as hax
    import jax
    import jax.numpy as jnp
    from levanter.data.text.examples import named_lm_example_from_grug
    from levanter.models.qwen import Qwen3Config

    from terminalworld.train.sft import TinyQwen3

    packed, ds, tokdir, *_ = levanter_dataset
    k = next(i for i, p in enumerate(packed) if len(p["instance_ids"]) >= 2)
    first_doc = sum(len(p["instance_ids"]) for p in packed[:k])
    docs = rows[first_doc : first_doc + len(packed[k]["instance_ids"])]
    t = TinyQwen3(**TINY)
    cfg = Qwen3Config(
        max_seq_len=SEQ_LEN,
        hidden_dim=t.hidden_dim,
        intermediate_dim=t.intermediate_dim,
        num_layers=1,
        num_heads=t.num_heads,
        num_kv_heads=t.num_kv_heads,
        head_dim=t.head_dim,
    )
    Pos = hax.Axis("position", SEQ_LEN)
    Vocab = hax.Axis("vocab", len(load_tokenizer(tokdir)))
    model = cfg.build(Vocab, key=jax.random.PRNGKey(1))
    ex = named_lm_example_from_grug(ds[k], Pos)
    levanter_loss = float(model.compute_next_token_loss(ex))

    logits = model(ex.tokens, attn_mask=ex.attn_mask).array.astype(jnp.float32)
    logp = jax.nn.log_softmax(logits, axis=-1)
    ids = np.asarray(ex.tokens.array)
    nll = -np.asarray(logp[np.arange(SEQ_LEN - 1), ids[1:]])
    # Our per-token masks laid out as packed (each document, then a separator), padded to SEQ_LEN.
    trained = np.concatenate([np.r_[np.asarray(r["loss_weights"]), 0] for r in docs])
    trained = np.r_[trained, np.zeros(SEQ_LEN - len(trained), dtype=trained.dtype)].astype(bool)
    hand = float(nll[trained[1:]].mean())  # token t+1 trained <=> its prediction at position t counts
    assert trained.sum() > 100
    assert abs(levanter_loss - hand) < 1e-4, (levanter_loss, hand)
    unshifted = float(nll[trained[:-1]].mean())
    assert abs(levanter_loss - unshifted) > 1e-3  # the shift matters


@pytest.mark.slow_ci
def test_tiny_qwen3_trains_on_our_rows_and_exports_hf(levanter_dataset):
    from transformers import AutoModelForCausalLM

    from terminalworld.train.sft import SftConfig, SftRecipe, TinyQwen3, run_sft

    _packed, _ds, tokdir, path, tmp = levanter_dataset
    recipe = SftRecipe(
        epochs=1.0,
        batch_size=1,
        learning_rate=1e-3,
        warmup=0.03,
        min_lr_ratio=0.1,
        weight_decay=0.1,
        max_grad_norm=30.0,
        seed=42,
        seq_len=SEQ_LEN,
        max_seq_len=SEQ_LEN,
        tiny=TinyQwen3(**TINY),
    )
    hf = run_sft(
        SftConfig(
            rows=[str(path)],
            tokenizer=tokdir,
            cache_dir=str(tmp / "cache"),
            output_dir=str(tmp / "run"),
            export_dir=str(tmp / "run" / "hf"),
            num_train_steps=2,
            recipe=recipe,
        )
    )
    model = AutoModelForCausalLM.from_pretrained(hf)
    assert model.config.model_type == "qwen3" and model.config.num_hidden_layers == 2


def test_a_shuffled_recipe_serves_the_same_rows_in_an_order_keyed_by_its_seed(levanter_dataset):
    """The pilot's seeds: the same packed sequences, each seed's own order, the same order again
    under the same seed (so a continued run keeps its nested prefixes)."""
    import haliax as hax
    import jax

    from terminalworld.train.sft import SftConfig, SftRecipe, TinyQwen3, levanter_data_config, train_lm_config

    packed, _, tokdir, _, tmp = levanter_dataset
    # Eight sequences told apart by their second token.
    path = tmp / "eight.jsonl"
    path.write_text(
        "".join(
            json.dumps({**packed[0], "input_ids": [packed[0]["input_ids"][0], 1000 + k, *packed[0]["input_ids"][2:]]})
            + "\n"
            for k in range(8)
        )
    )
    cfg = levanter_data_config([str(path)], tokdir, str(tmp / "shuffled-cache"), shuffle=True)

    def order(seed: int) -> list[int]:
        ds = cfg.train_sets(hax.Axis("position", SEQ_LEN), key=jax.random.PRNGKey(seed))["sft"].as_sync_dataset()
        return [int(np.asarray(ds[i].tokens)[1]) - 1000 for i in range(8)]

    assert sorted(order(1)) == list(range(8)) and order(1) == order(1)
    assert any(order(s) != order(1) for s in (2, 3, 4))
    shape = dict(epochs=1.0, batch_size=1, learning_rate=1e-4, warmup=2.0, min_lr_ratio=1.0, weight_decay=0.1)
    shape |= dict(max_grad_norm=30.0, seed=1, seq_len=SEQ_LEN, max_seq_len=SEQ_LEN, tiny=TinyQwen3(**TINY))

    def served(recipe: SftRecipe) -> bool:  # whether the run's Levanter data is shuffled
        paths = dict(rows=[str(path)], tokenizer=tokdir, cache_dir=str(tmp), output_dir=str(tmp / "run"))
        run = SftConfig(**paths, export_dir=str(tmp / "hf"), num_train_steps=1, recipe=recipe)
        return train_lm_config(run).data.shuffle

    assert served(SftRecipe(**shape, shuffle=True)) and not served(SftRecipe(**shape))
