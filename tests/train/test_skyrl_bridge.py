"""The SkyRL path's arithmetic without SkyRL: the auxiliary loss, summed the way FSDP and Megatron
sum micro-batches and data-parallel ranks, is λ·L_Env of the whole batch; a rollout becomes SkyRL's
generator output with its masks over the response; the world tensors are right-aligned; the config
carries the paper's recipe; the launcher pins SkyRL's commit."""

import json
from dataclasses import replace

import pytest
import torch

from terminalworld.agent.harness import FORMAT_WARNING
from terminalworld.core.assets import load_tokenizer
from terminalworld.core.render import Renderer
from terminalworld.core.trajectories import OBSERVATION_PREFIX
from terminalworld.train.echo.loss import env_prediction_loss
from terminalworld.train.echo.miniature import EchoRecipe
from terminalworld.train.rollout import Rollout
from terminalworld.train.skyrl.bridge import (
    SKYRL_COMMIT,
    WORLD_COUNT,
    WORLD_MASK,
    EchoGrpoRecipe,
    dotted,
    generator_sample,
    skyrl_command,
    skyrl_config,
    train_rows,
    world_loss,
    world_tensors,
)


def _samples(n, width, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        length = int(torch.randint(3, width + 1, (1,), generator=g))
        mask = (torch.rand(length, generator=g) > 0.5).int().tolist()
        out.append(
            {"response_ids": list(range(length)), "world_loss_masks": mask, "world_full_observation_counts": i % 3 * 7}
        )
    return out


def test_micro_batch_and_rank_sums_give_lambda_times_the_batch_env_loss():
    n, width, lam, dp, micro = 12, 9, 0.05, 2, 2
    samples = _samples(n, width)
    t = world_tensors(samples, width)
    logp = -torch.rand(n, width, generator=torch.Generator().manual_seed(1)) * 5
    # The definition on the whole mini-batch: |O| is one number per sequence.
    expected = lam * env_prediction_loss(logp, t[WORLD_MASK], t[WORLD_COUNT][:, -1])
    shards = [range(r * n // dp, (r + 1) * n // dp) for r in range(dp)]
    fsdp = megatron = 0.0
    for shard in shards:
        size = len(shard)
        micro_batches = [list(shard)[i : i + micro] for i in range(0, size, micro)]
        for mb in micro_batches:
            args = (logp[mb], t[WORLD_MASK][mb], t[WORLD_COUNT][mb])
            # FSDP: the hook's term as is; gradients are averaged over ranks.
            fsdp += world_loss(*args, coeff=lam, weight=1 / size) / dp
            # Megatron: added to the policy loss, which is multiplied by micro-batches x ranks, then
            # divided by the micro-batch count and averaged over ranks.
            m = len(micro_batches)
            megatron += world_loss(*args, coeff=lam, weight=1 / (size * dp)) * m * dp / m / dp
    assert float(fsdp) == pytest.approx(float(expected), rel=1e-5)
    assert float(megatron) == pytest.approx(float(expected), rel=1e-5)
    assert world_loss(logp, t[WORLD_MASK], t[WORLD_COUNT], coeff=0.0, weight=1.0) is None


def test_world_tensors_are_right_aligned_with_zero_padding_rows():
    samples = [
        {"response_ids": [5, 6, 7], "world_loss_masks": [0, 1, 1], "world_full_observation_counts": 4},
        {"response_ids": [8], "world_loss_masks": [1], "world_full_observation_counts": 2},
    ]
    t = world_tensors(samples, 4, pad_rows=1)
    assert t[WORLD_MASK].tolist() == [[0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]]
    assert t[WORLD_COUNT].tolist() == [[0, 4, 4, 4], [0, 0, 0, 2], [0, 0, 0, 0]]
    with pytest.raises(ValueError, match="sample 0"):
        world_tensors([dict(samples[0], world_loss_masks=[1])], 4)


def test_a_rollout_as_skyrl_generator_output():
    tok = load_tokenizer("qwen3")
    end = tok.convert_tokens_to_ids("<|im_end|>")
    r = Rollout(Renderer(tok))
    r.start("SYS", "TASK")
    action = tok("THOUGHT: look.\n\n```bash\nls\n```", add_special_tokens=False)["input_ids"]
    for out in (OBSERVATION_PREFIX + "a.py\n", FORMAT_WARNING.format(n=0)):
        r.act([*action, end])
        r.observe(out)
    s = generator_sample(r, reward=1.0)
    assert s["prompt_token_ids"] + s["response_ids"] == r.ids
    assert tok.decode(s["prompt_token_ids"]).endswith("<|im_start|>assistant\n")
    assert s["response_ids"][: len(action)] == action and s["loss_masks"][: len(action)] == [1] * len(action)
    assert len(s["loss_masks"]) == len(s["world_loss_masks"]) == len(s["response_ids"])
    assert (
        sum(s["world_loss_masks"]) == sum(r.env_mask) > 0 and s["world_full_observation_counts"] == r.observation_count
    )
    assert s["rewards"] == 1.0
    empty = Rollout(Renderer(tok))
    empty.start("SYS", "TASK")
    with pytest.raises(ValueError, match="no response"):
        generator_sample(empty, reward=0.0)


def test_config_carries_the_papers_recipe_and_the_launcher_pins_skyrl(tmp_path):
    recipe = EchoGrpoRecipe.of(EchoRecipe(arm="echo"))
    cfg = skyrl_config(recipe, command_timeout_s=10.0, model="gs://b/hf", train_data="/t/train.jsonl", out="gs://b/out")
    flat = dotted(cfg)
    expect = {
        "trainer.algorithm.world_model_coeff": 0.05,
        "trainer.algorithm.world_model_only": False,
        "trainer.algorithm.command_timeout_s": 10.0,
        "generator.n_samples_per_prompt": 16,
        "trainer.train_batch_size": 16,
        "trainer.policy.optimizer_config.lr": 1e-6,
        "trainer.policy.optimizer_config.max_grad_norm": 0.2,
        "trainer.algorithm.eps_clip_low": 0.2,
        "trainer.algorithm.eps_clip_high": 0.2,
        "generator.sampling_params.temperature": 0.8,
        "trainer.algorithm.loss_reduction": "sequence_mean",
        "trainer.algorithm.use_kl_loss": False,
        "trainer.strategy": "megatron",
        "generator.max_turns": 16,
        "generator.max_input_length": 16384,
        "generator.sampling_params.max_generate_length": 2048,
        "trainer.policy.megatron_config.tensor_model_parallel_size": 1,
        "trainer.ckpt_path": "gs://b/out/checkpoints",
        "data.train_data": ["/t/train.jsonl"],
    }
    assert {k: flat[k] for k in expect} == expect
    fsdp2 = EchoGrpoRecipe.of(EchoRecipe(arm="echo"), strategy="fsdp2")
    fsdp = dotted(skyrl_config(fsdp2, command_timeout_s=10.0, model="m", train_data="d", out="o"))
    assert not any(k.startswith("trainer.policy.megatron_config") for k in fsdp)
    command = skyrl_command(strategy="megatron", config_file="c.json")
    assert f"skyrl[megatron] @ git+https://github.com/NovaSky-AI/SkyRL@{SKYRL_COMMIT}" in command
    assert command[-4:] == ["-m", "terminalworld.train.skyrl.plugin", "--config", "c.json"]
    assert "skyrl[fsdp]" in " ".join(skyrl_command(strategy="fsdp2", config_file="c.json"))


def test_the_skyrl_recipe_is_the_one_echo_recipe_under_skyrl_names():
    grpo, env_only = (EchoGrpoRecipe.of(EchoRecipe(arm=a)) for a in ("grpo", "env-only"))
    assert (grpo.lam, grpo.env_only) == (0.0, False) and (env_only.lam, env_only.env_only) == (0.05, True)
    changed = EchoRecipe(arm="echo", lam=0.1, steps=7, prompts_per_step=3, samples_per_prompt=5, temperature=0.6)
    changed = replace(changed, harness=replace(changed.harness, max_turns=4), learning_rate=2e-6, max_grad_norm=1.0)
    r = EchoGrpoRecipe.of(changed)
    assert (r.lam, r.max_steps, r.train_batch_size, r.n_samples_per_prompt, r.temperature) == (0.1, 7, 3, 5, 0.6)
    assert (r.max_turns, r.context_tokens, r.max_tokens_per_turn) == (4, 16384, 2048)
    assert (r.learning_rate, r.max_grad_norm, r.clip) == (2e-6, 1.0, changed.loss().clip_low)
    flat = dotted(skyrl_config(r, command_timeout_s=3.0, model="m", train_data="d", out="o"))
    assert flat["trainer.algorithm.command_timeout_s"] == 3.0


def test_train_rows_are_the_harness_prompt_and_the_task_folder(tmp_path):
    (tmp_path / "t1").mkdir()
    (tmp_path / "t1" / "instruction.md").write_text("Fix it.")
    (tmp_path / "manifest.json").write_text(json.dumps({"tasks": [{"task_id": "t1"}]}))
    [row] = train_rows(str(tmp_path))
    assert row["prompt"][1] == {"role": "user", "content": "Fix it."} and row["prompt"][0]["role"] == "system"
    assert row["task_dir"] == str((tmp_path / "t1").resolve()) and row["env_class"] == "terminalworld"
