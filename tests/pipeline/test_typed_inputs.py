"""Typed configs cross the step boundary as dataclasses: Marin fingerprints a dataclass exactly as
the dict of its fields, so the typed builders keep the identity of the steps the dict spellings
made; a checkpoint's chat template stays a dependency inside the decoding; the step functions read
both spellings; ECHO's SkyRL run carries a changed command timeout, and only then a new identity."""

from dataclasses import asdict

from marin.execution.lazy import materialized_config

from terminalworld.agent import steps as agent
from terminalworld.agent.harness import HarnessConfig
from terminalworld.pipeline import artifacts
from terminalworld.pipeline.step import Checkpoint, HeldoutSet, Tokenized, inside, step
from terminalworld.sim import steps as sim
from terminalworld.train import steps as train
from terminalworld.train.echo.miniature import EchoRecipe
from terminalworld.train.sft import SftRecipe, TinyQwen3

V = "2026.01.01"
TASKS = agent.task_suite(purpose="heldout", n=1, seed=0, version=V)


def _fine_fn(*, out: str) -> None:
    pass


def test_a_typed_harness_has_the_identity_of_its_dict():
    limits = {"max_turns": 4, "context_tokens": 8192, "max_tokens_per_turn": 96, "temperature": 0.8}
    typed = agent.local_grade(
        model="smollm2", model_name="m", tasks=TASKS, harness=agent.SampledEpisodes(**limits), version=V
    )
    spelled = step(
        artifacts.agent_grade("heldout-tasks", "m"),
        agent.local_grade_fn,
        version=V,
        model="smollm2",
        tasks=TASKS.step,
        harness=limits,
        n_attempts=1,
    )
    assert typed.step.fingerprint() == spelled.fingerprint()
    assert isinstance(materialized_config(typed.step, "/p")["harness"], agent.SampledEpisodes)
    # A field more is another identity, which is why each plan passes exactly the fields it sets.
    seeded = agent.local_grade(model="smollm2", model_name="m", tasks=TASKS, harness=HarnessConfig(**limits), version=V)
    assert seeded.step.fingerprint() != typed.step.fingerprint()


def test_the_grade_functions_read_a_typed_harness(monkeypatch, tmp_path):
    import terminalworld.agent.evaluate as evaluate

    seen = []
    monkeypatch.setattr(evaluate, "agent_eval", seen.append)
    for harness in (
        agent.Episodes(max_turns=3, context_tokens=2048, max_tokens_per_turn=64),
        HarnessConfig(max_turns=3, context_tokens=2048, max_tokens_per_turn=64, temperature=0.6, seed=2),
    ):
        agent.local_grade_fn(model="smollm2", tasks=str(tmp_path), out=str(tmp_path), harness=harness, n_attempts=2)
    assert [(c.max_turns, c.max_tokens_per_turn, c.temperature, c.seed) for c in seen] == [
        (3, 64, 0.0, 0),
        (3, 64, 0.6, 2),
    ]


def test_a_template_checkpoint_stays_a_dependency_inside_the_decoding(tmp_path):
    full = Checkpoint(step("checkpoints/tw-test/full", _fine_fn, version=V))
    rows = step("tw-test/rows", _fine_fn, version=V)
    heldout = HeldoutSet(rows, file="rows.jsonl")
    decoding = sim.DecodingOn(max_new_tokens=64, device="cpu")
    typed = sim.sim_grade(
        model="smollm2", model_name="base", heldout=heldout, decoding=decoding, chat_template_from=full, version=V
    )
    spelled = step(
        artifacts.sim_grade(1, "base"),
        sim.sim_grade_fn,
        version=V,
        model="smollm2",
        model_name="base",
        source={"heldout": inside(rows, "rows.jsonl")},
        decoding={"max_new_tokens": 64, "device": "cpu", "chat_template_from": full.hf},
    )
    assert typed.step.fingerprint() == spelled.fingerprint() and full.step in typed.step.deps
    config = materialized_config(typed.step, "/p")
    assert config["decoding"]["chat_template_from"] == ["/p/checkpoints/tw-test/full/2026.01.01", "hf"]
    plain = sim.sim_grade(model="smollm2", model_name="base", heldout=heldout, decoding=decoding, version=V)
    assert materialized_config(plain.step, "/p")["decoding"] == decoding and full.step not in plain.step.deps


def test_the_simulator_grade_reads_both_spellings(monkeypatch, tmp_path):
    import terminalworld.sim.evaluate as evaluate

    seen = []
    monkeypatch.setattr(evaluate, "sim_eval", seen.append)
    typed = sim.DecodingOn(max_new_tokens=8, device="cpu")
    spelled = {"max_new_tokens": 8, "device": "cpu", "chat_template_from": [str(tmp_path), "hf"]}
    for decoding in (typed, spelled):
        sim.sim_grade_fn(
            model="m", out=str(tmp_path / "out"), model_name="m", source={"probes": "p"}, decoding=decoding
        )
    assert [(c.max_new_tokens, c.device, c.chat_template_from) for c in seen] == [
        (8, "cpu", None),
        (8, "cpu", f"{tmp_path}/hf"),
    ]


def test_an_sft_recipe_keeps_its_tiny_shape_typed():
    tiny = TinyQwen3(hidden_dim=32, intermediate_dim=96, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=16)
    recipe = SftRecipe(
        epochs=1.0,
        batch_size=2,
        learning_rate=1e-3,
        warmup=0.1,
        min_lr_ratio=0.1,
        weight_decay=0.0,
        max_grad_norm=1.0,
        seed=42,
        seq_len=2048,
        max_seq_len=2048,
        tiny=tiny,
    )
    data = Tokenized(step("tw-test/tokenized", _fine_fn, version=V))
    typed = train.checkpoint(tokenized=data, arm="base", scale="t", recipe=recipe, version=V)
    config = materialized_config(typed.step, "/p")["recipe"]
    assert config["tiny"] is tiny and SftRecipe.from_input(config) == recipe  # what sft_fn rebuilds
    spelled = step(
        artifacts.checkpoint("base", "t"),
        train.sft_fn,
        version=V,
        tokenized=data.step,
        recipe={**config, "tiny": asdict(tiny)},
        init_from=None,
    )
    assert typed.step.fingerprint() == spelled.fingerprint()


def test_the_skyrl_run_carries_a_changed_command_timeout_and_only_then_moves():
    policy = Checkpoint(step("checkpoints/tw-test/full", _fine_fn, version=V))
    default, slower = EchoRecipe(arm="echo"), EchoRecipe(arm="echo", command_timeout_s=30.0)
    a, b = (train.echo_grpo(policy=policy, tasks=TASKS, recipe=r, name="echo", version=V) for r in (default, slower))
    assert "command_timeout_s" not in materialized_config(a.step, "/p")
    assert materialized_config(b.step, "/p")["command_timeout_s"] == 30.0
    assert a.step.fingerprint() != b.step.fingerprint()
