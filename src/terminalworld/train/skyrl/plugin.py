"""ECHO as a SkyRL extension: the policy workers' auxiliary loss (FSDP through PR #1716's hooks,
Megatron through its policy-loss function), a trainer that carries O′ and |O| into the batch, a
generator that runs the project's harness token in and token out with every command in the sandbox,
and the entrypoint.

Imported only inside SkyRL's own environment (`skyrl[fsdp|megatron]` at `bridge.SKYRL_COMMIT`,
with the project's `src` on the path); the arithmetic lives in `skyrl.bridge` and `echo_loss`, tested
without SkyRL. Run as `python -m terminalworld.train.skyrl.plugin --config FILE.json` (`bridge.skyrl_command`).
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray
from skyrl.backends.skyrl_train.workers.fsdp.fsdp_worker import CriticWorker, FSDPPolicyWorkerBase, RefWorker
from skyrl.train.config import AlgorithmConfig, TrainerConfig, make_config
from skyrl.train.entrypoints.main_base import BasePPOExp
from skyrl.train.generators.base import GeneratorInput, GeneratorInterface, GeneratorOutput
from skyrl.train.trainer import RayPPOTrainer
from skyrl.train.utils import validate_cfg
from skyrl.train.utils.utils import initialize_ray

from terminalworld.agent.driver import Shell, drive
from terminalworld.agent.harness import Episode, HarnessConfig
from terminalworld.core.prompts import TASK_SYSTEM_PROMPT
from terminalworld.core.render import Renderer
from terminalworld.env.sandbox import Sandbox, SandboxConfig
from terminalworld.tasks.layout import repo_copy, verify
from terminalworld.train.rollout import Rollout
from terminalworld.train.skyrl.bridge import (
    WORLD_COUNT,
    WORLD_MASK,
    dotted,
    generator_sample,
    world_loss,
    world_tensors,
)


@dataclass
class EchoAlgorithmConfig(AlgorithmConfig):
    """SkyRL's algorithm config plus λ and the env-only switch (the reference's field names)."""

    world_model_coeff: float = 0.0
    world_model_only: bool = False
    command_timeout_s: float = 10.0  # the sandbox's wall limit per command, as in the miniature


@dataclass
class EchoTrainerConfig(TrainerConfig):
    """SkyRL's trainer config with ECHO's algorithm config."""

    algorithm: EchoAlgorithmConfig = field(default_factory=EchoAlgorithmConfig)


EchoConfig = make_config(algorithm_cls=EchoAlgorithmConfig, trainer_cls=EchoTrainerConfig)


class EchoFSDPPolicyWorkerBase(FSDPPolicyWorkerBase):
    """The FSDP policy worker with λ·L_Env through PR #1716's hooks."""

    def get_aux_policy_loss_context(self, data) -> dict[str, Any]:
        """Each micro-batch's weight: one over the data-parallel shard's size (FSDP averages over ranks)."""
        return {"weight": 1.0 / max(len(data), 1)}

    def compute_aux_policy_loss(self, *, action_log_probs, experience, loss_config, aux_policy_loss_context, **_):
        """λ·L_Env of the micro-batch from the policy forward's own log-probabilities (None without world masks)."""
        extras = experience.extras or {}
        if WORLD_MASK not in extras:
            return None, {}
        loss = world_loss(
            action_log_probs,
            extras[WORLD_MASK],
            extras[WORLD_COUNT],
            coeff=loss_config.world_model_coeff,
            weight=aux_policy_loss_context["weight"],
        )
        return loss, {} if loss is None else {"world_loss": loss}


def _megatron_worker():
    """The Megatron policy worker with λ·L_Env added to its policy loss, micro-batch by micro-batch
    (imported lazily: only a Megatron environment has Megatron)."""
    from megatron.core import parallel_state as mpu
    from skyrl.backends.skyrl_train.workers.megatron.megatron_worker import MegatronPolicyWorkerBase
    from skyrl.backends.skyrl_train.workers.worker_utils import BatchIterator

    class EchoMegatronPolicyWorkerBase(MegatronPolicyWorkerBase):
        # `forward_backward` builds one micro-batch per `BatchIterator` chunk, in order, and the last
        # pipeline stage computes their losses in that order; the world slices follow the same order.
        def init_model(self, *args, **kwargs):
            out = super().init_model(*args, **kwargs)
            self.model.policy_loss_fn = self._with_world_loss(self.model.policy_loss_fn)
            self._world = iter(())
            return out

        def _with_world_loss(self, policy_loss_fn):
            def loss_fn(action_log_probs, *args, config, **kwargs):
                loss, metrics = policy_loss_fn(action_log_probs, *args, config=config, **kwargs)
                mask, count, weight = next(self._world)
                extra = world_loss(action_log_probs, mask, count, coeff=config.world_model_coeff, weight=weight)
                return (loss, metrics) if extra is None else (loss + extra, {**metrics, "world_loss": extra.item()})

            return loss_fn

        def forward_backward(self, data, loss_fn=None, loss_fn_config=None):
            if loss_fn is not None or WORLD_MASK not in data:
                return super().forward_backward(data, loss_fn=loss_fn, loss_fn_config=loss_fn_config)
            dp = mpu.get_data_parallel_world_size(with_context_parallel=False)
            weight = 1.0 / (max(len(data), 1) * dp)
            slices = [
                (e.extras[WORLD_MASK], e.extras[WORLD_COUNT], weight)
                for e in BatchIterator(data, self.cfg.micro_train_batch_size_per_gpu, drop_last=False)
            ]
            self._world = iter(slices)
            try:
                return super().forward_backward(data)
            finally:
                self._world = iter(())

    return EchoMegatronPolicyWorkerBase


class EchoTrainer(RayPPOTrainer):
    """Carries O′ and |O| into the training batch; env-only samples lose their policy loss mask."""

    def postprocess_generator_output(self, generator_output: GeneratorOutput, uids):
        """Env-only runs train no policy term: every sample's policy loss mask is zeroed."""
        if self.cfg.trainer.algorithm.world_model_only:
            generator_output["loss_masks"] = [[0] * len(m) for m in generator_output["loss_masks"]]
        return super().postprocess_generator_output(generator_output, uids)

    def convert_to_training_input(self, generator_output: GeneratorOutput, uids):
        """SkyRL's batch plus O′ and |O| as right-aligned tensors, zero-padded like the batch."""
        batch = super().convert_to_training_input(generator_output, uids)
        samples = [
            {"response_ids": r, "world_loss_masks": m, "world_full_observation_counts": c}
            for r, m, c in zip(
                generator_output["response_ids"],
                generator_output["world_loss_masks"],
                generator_output["world_full_observation_counts"],
                strict=True,
            )
        ]
        pad = int(batch.metadata.get("pad_size", 0) or 0)
        for key, value in world_tensors(samples, int(batch.metadata["response_length"]), pad).items():
            batch[key] = value
        batch.metadata["zero_pad_keys"] = sorted({*batch.metadata.get("zero_pad_keys", []), WORLD_MASK, WORLD_COUNT})
        return batch


class EchoGenerator(GeneratorInterface):
    """The project's harness as a SkyRL generator: one episode per prompt, every command in the
    sandbox, the task's tests as reward, the ids exactly as the engine sampled them."""

    def __init__(self, *, generator_cfg, tokenizer, inference_engine_client, sandbox: SandboxConfig):
        self.cfg = generator_cfg
        self.sandbox = sandbox
        self.client = inference_engine_client
        self.renderer = Renderer(tokenizer)
        self.harness = HarnessConfig(
            max_turns=generator_cfg.max_turns,
            context_tokens=generator_cfg.max_input_length,
            max_tokens_per_turn=generator_cfg.sampling_params.max_generate_length,
            temperature=generator_cfg.sampling_params.temperature,
        )

    async def _episode(self, task_dir: Path, sampling: dict[str, Any]) -> dict[str, Any]:
        episode = Episode(
            system=TASK_SYSTEM_PROMPT, task=(task_dir / "instruction.md").read_text(), config=self.harness
        )
        rollout = Rollout(self.renderer)
        rollout.start(episode.system, episode.task)

        async def policy(episode: Episode) -> str | None:
            if not episode.check_context(len(rollout.ids)):
                return None
            out = await self.client.generate(
                {"prompt_token_ids": [rollout.ids], "sampling_params": sampling, "skip_detokenize": True}
            )
            return rollout.act(out["response_ids"][0])

        with repo_copy(task_dir, prefix="tw-rollout-") as repo:
            shell = Shell(Sandbox(str(repo), self.sandbox), threaded=True)
            await drive(episode, policy=policy, environment=shell, on_message=rollout.observe)
            reward = await asyncio.to_thread(verify, task_dir, repo, config=self.sandbox)
        return generator_sample(rollout, reward=reward)

    async def generate(self, input_batch: GeneratorInput) -> GeneratorOutput:
        """One harness episode per prompt, concurrently, as SkyRL's generator output."""
        sampling = dict(input_batch.get("sampling_params") or {})
        extras = input_batch["env_extras"]
        samples = await asyncio.gather(*(self._episode(Path(e["task_dir"]), sampling) for e in extras))
        out: dict[str, Any] = {k: [s[k] for s in samples] for k in samples[0]}
        out |= {"stop_reasons": None, "rollout_metrics": None, "rollout_logprobs": None}
        out["trajectory_ids"] = input_batch.get("trajectory_ids")
        return out


class EchoExp(BasePPOExp):
    """SkyRL's experiment with ECHO's workers, trainer and generator."""

    def get_worker_classes(self):
        """ECHO's policy worker for the configured strategy, SkyRL's critic and reference workers."""
        if self.cfg.trainer.strategy == "megatron":
            from skyrl.backends.skyrl_train.workers.megatron.megatron_worker import (
                CriticWorker as MegatronCritic,
            )
            from skyrl.backends.skyrl_train.workers.megatron.megatron_worker import (
                RefWorker as MegatronRef,
            )

            return ray.remote(num_gpus=1)(_megatron_worker()), MegatronCritic, MegatronRef
        return ray.remote(num_gpus=1)(EchoFSDPPolicyWorkerBase), CriticWorker, RefWorker

    def get_generator(self, cfg, tokenizer, inference_engine_client):
        """The project's harness as the generator."""
        return EchoGenerator(
            generator_cfg=cfg.generator,
            tokenizer=tokenizer,
            inference_engine_client=inference_engine_client,
            sandbox=SandboxConfig(timeout_s=cfg.trainer.algorithm.command_timeout_s),
        )

    def get_trainer(
        self, cfg, tracker, tokenizer, train_dataset, eval_dataset, inference_engine_client, generator, colocate_pg
    ):
        """The trainer that carries the world masks."""
        return EchoTrainer(
            cfg=cfg,
            tracker=tracker,
            tokenizer=tokenizer,
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            inference_engine_client=inference_engine_client,
            generator=generator,
            colocate_pg=colocate_pg,
        )


@ray.remote(num_cpus=1)
def _run(cfg) -> None:
    EchoExp(cfg).run()


def main(argv: list[str]) -> None:
    """Train from `--config FILE`, the JSON of `bridge.skyrl_config`."""
    if len(argv) != 2 or argv[0] != "--config":
        sys.exit("usage: python -m terminalworld.train.skyrl.plugin --config FILE.json")
    cfg = EchoConfig.from_cli_overrides(dotted(json.loads(Path(argv[1]).read_text())))
    validate_cfg(cfg)
    initialize_ray(cfg)
    ray.get(_run.remote(cfg))


if __name__ == "__main__":
    main(sys.argv[1:])
