"""A step's config is the stage's own config, built from its artifacts' paths: a local grade is
AgentEvalConfig with the harness's fields, a simulator grade SimEvalConfig with its template
checkpoint a dependency, a checkpoint CheckpointConfig with the recipe typed, and ECHO's SkyRL run
GrpoConfig with the recipe's command timeout; a changed field is a new identity."""

from dataclasses import replace

from marin.execution.lazy import materialized_config

from terminalworld.agent import steps as agent
from terminalworld.agent.evaluate import AgentEvalConfig
from terminalworld.agent.harness import HarnessConfig
from terminalworld.pipeline import artifacts
from terminalworld.pipeline.step import Checkpoint, HeldoutSet, Tokenized, config_step
from terminalworld.sim import steps as sim
from terminalworld.sim.evaluate import SimEvalConfig
from terminalworld.train import steps as train
from terminalworld.train.checkpoint import CheckpointConfig
from terminalworld.train.echo.miniature import EchoRecipe
from terminalworld.train.sft import SftRecipe, TinyQwen3

V = "2026.01.01"
TASKS = agent.task_suite(purpose="heldout", n=1, seed=0, version=V)


def _fake(name: str):
    """A step standing for an artifact another step reads (never run here)."""
    return config_step(name, print, lambda ctx: ctx.output_path, version=V, deps=[])


def test_a_local_grade_is_agent_evals_config_with_the_harness_fields():
    limits = {"max_turns": 4, "context_tokens": 8192, "max_tokens_per_turn": 96}
    harness = HarnessConfig(**limits, temperature=0.8)
    typed = agent.local_grade(model="smollm2", model_name="m", tasks=TASKS, harness=harness, version=V)
    config = materialized_config(typed.step, "/p")
    assert isinstance(config, AgentEvalConfig) and config.tasks == TASKS.step.path("/p")
    assert (config.max_turns, config.max_tokens_per_turn, config.temperature, config.seed) == (4, 96, 0.8, 0)
    assert (config.model, config.agent, config.n_attempts, config.dtype) == ("smollm2", "model", 1, "float32")
    # Limits alone are a greedy harness: the same config, so the same identity.
    greedy = agent.local_grade(model="smollm2", model_name="m", tasks=TASKS, harness=HarnessConfig(**limits), version=V)
    limited = agent.local_grade(
        model="smollm2", model_name="m", tasks=TASKS, harness=agent.Episodes(**limits), version=V
    )
    assert limited.step.fingerprint() == greedy.step.fingerprint() != typed.step.fingerprint()
    # A stated precision is the served model's, and a new identity.
    bf16 = agent.local_grade(model="smollm2", model_name="m", tasks=TASKS, harness=harness, dtype="bfloat16", version=V)
    assert materialized_config(bf16.step, "/p").dtype == "bfloat16"
    assert bf16.step.fingerprint() != typed.step.fingerprint()


def test_a_simulator_grade_is_sim_evals_config_with_its_template_checkpoint_a_dependency():
    full = Checkpoint(_fake("checkpoints/tw-test/full"))
    rows = _fake("tw-test/rows")
    heldout = HeldoutSet(rows, file="rows.jsonl")
    decoding = sim.Decoding(max_new_tokens=64)
    typed = sim.sim_grade(
        model="smollm2", model_name="base", heldout=heldout, decoding=decoding, chat_template_from=full, version=V
    )
    assert full.step in typed.step.deps and rows in typed.step.deps
    config = materialized_config(typed.step, "/p")
    assert isinstance(config, SimEvalConfig) and (config.max_new_tokens, config.device) == (64, "cpu")
    assert (config.dtype, config.backend, config.temperature) == ("float32", "hf", 0.0)  # the decoding's defaults
    assert config.chat_template_from == "/p/checkpoints/tw-test/full/2026.01.01/hf"
    assert config.heldout == "/p/tw-test/rows/2026.01.01/rows.jsonl"
    assert config.out == f"/p/{artifacts.sim_grade(1, 'base')}/2026.01.01/{artifacts.SIM_ROWS}"
    plain = sim.sim_grade(model="smollm2", model_name="base", heldout=heldout, decoding=decoding, version=V)
    assert materialized_config(plain.step, "/p").chat_template_from is None and full.step not in plain.step.deps


def test_a_checkpoint_is_its_sft_config_with_the_recipe_typed():
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
    data = Tokenized(_fake("tw-test/tokenized"))
    typed = train.checkpoint(tokenized=data, arm="base", scale="t", recipe=recipe, version=V)
    config = materialized_config(typed.step, "/p")
    assert isinstance(config, CheckpointConfig) and config.recipe is recipe and config.recipe.tiny is tiny
    assert (config.tokenized, config.init_from, config.continue_from) == ("/p/tw-test/tokenized/2026.01.01", None, None)
    more = train.checkpoint(tokenized=data, arm="base", scale="t", recipe=replace(recipe, steps=9), version=V)
    assert more.step.fingerprint() != typed.step.fingerprint()


def test_the_skyrl_run_carries_the_recipes_command_timeout():
    policy = Checkpoint(_fake("checkpoints/tw-test/full"))
    default, slower = EchoRecipe(arm="echo"), EchoRecipe(arm="echo", command_timeout_s=30.0)
    a, b = (train.echo_grpo(policy=policy, tasks=TASKS, recipe=r, name="echo", version=V) for r in (default, slower))
    assert materialized_config(a.step, "/p").command_timeout_s == default.command_timeout_s
    assert materialized_config(b.step, "/p").command_timeout_s == 30.0
    assert materialized_config(b.step, "/p").policy == "/p/checkpoints/tw-test/full/2026.01.01/hf"
    assert a.step.fingerprint() != b.step.fingerprint()
