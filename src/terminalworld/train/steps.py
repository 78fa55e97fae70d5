"""The training stage as Marin steps: one arm of rows rendered and packed for Levanter, an SFT
checkpoint trained on it with its final HF export, one arm of ECHO's on-policy miniature, and ECHO
through SkyRL. Each step runs the stage's function on its config, built from the artifacts it reads."""

from __future__ import annotations

from collections.abc import Sequence

from terminalworld.pipeline import artifacts
from terminalworld.pipeline.step import (
    Checkpoint,
    EchoArm,
    HeldoutSet,
    Model,
    RlRun,
    Subsets,
    TaskSet,
    Tokenized,
    config_step,
    model_path,
)
from terminalworld.pipeline.zephyr import Workers
from terminalworld.train.checkpoint import CheckpointConfig, train_checkpoint
from terminalworld.train.echo.miniature import EchoArmConfig, EchoRecipe, run_arm
from terminalworld.train.plain_text import PlainTextJob, write_plain_text
from terminalworld.train.sft import SftRecipe
from terminalworld.train.skyrl.bridge import EchoGrpoRecipe
from terminalworld.train.skyrl.launch import GrpoConfig, run_grpo
from terminalworld.train.tokenize_job import ShardedTokenize, TokenizeJob, tokenize_sharded


def tokenized(
    *,
    subsets: Subsets,
    size: int,
    arm: str,
    scale: str,
    tokenizer: str,
    max_len: int,
    seq_len: int,
    workers: Workers,
    shard_rows: int = 10_000,
    skip: int = 0,
    resources=None,
    version: str,
) -> Tokenized:
    """Rows skip..size of the subset of `size`, rendered under `arm` (`pretrain`: every token
    trained, plain LM text) and packed to `seq_len`, in shards of `shard_rows` on Zephyr `workers`,
    with the training tokenizer and `stats.json` beside them. With nested subsets, skipping the
    smaller subset's rows gives data held apart from it."""

    def config(ctx) -> ShardedTokenize:
        return ShardedTokenize(
            job=TokenizeJob(
                inputs=[subsets.at(ctx, artifacts.subset_file(size))],
                out=ctx.output_path,
                arm=arm,
                tokenizer=tokenizer,
                max_len=max_len,
                seq_len=seq_len,
                skip=skip,
                shard_rows=shard_rows,
            ),
            workers=workers,
        )

    step = config_step(
        artifacts.tokenized(arm, scale), tokenize_sharded, config, version=version, deps=[subsets], resources=resources
    )
    return Tokenized(step)


def plain_text(*, subsets: Subsets, size: int, tokenizer: str, seq_len: int, sequences: int, version: str) -> Tokenized:
    """`sequences` packed rows of plain text, every token trained: the source files of the repos in
    the subset of `size` (a control's unrelated text, `train.plain_text`)."""

    def config(ctx) -> PlainTextJob:
        return PlainTextJob(
            trajectories=[subsets.at(ctx, artifacts.subset_file(size))],
            out=ctx.output_path,
            tokenizer=tokenizer,
            seq_len=seq_len,
            sequences=sequences,
        )

    step = config_step(
        artifacts.tokenized("plain-text", f"{sequences}x{seq_len}"),
        write_plain_text,
        config,
        version=version,
        deps=[subsets],
    )
    return Tokenized(step)


def checkpoint(
    *,
    tokenized: Tokenized,
    arm: str,
    scale: str,
    recipe: SftRecipe,
    init_from: Model | None = None,
    continue_from: Checkpoint | None = None,
    resources=None,
    version: str,
) -> Checkpoint:
    """SFT of `init_from` (an HF model, an asset name such as `smollm2`, or an earlier checkpoint;
    a tiny Qwen3 from scratch when None and the recipe says `tiny`) on one tokenized arm; with
    `continue_from`, the same run continued from that checkpoint's last step to `recipe.steps`."""

    def config(ctx) -> CheckpointConfig:
        return CheckpointConfig(
            tokenized=tokenized.at(ctx),
            out=ctx.output_path,
            recipe=recipe,
            init_from=model_path(ctx, init_from),
            continue_from=continue_from.at(ctx) if continue_from is not None else None,
        )

    deps = [tokenized, init_from, continue_from]
    step = config_step(
        artifacts.checkpoint(arm, scale), train_checkpoint, config, version=version, deps=deps, resources=resources
    )
    return Checkpoint(step)


def arm_sets(
    *,
    subsets: Subsets,
    size: int,
    arms: Sequence[str],
    scale: str,
    tokenizer: str,
    seq_len: int,
    workers: Workers,
    shard_rows: int,
    version: str,
) -> dict[str, Tokenized]:
    """One tokenized set per loss-mask arm of the subset of `size`, packed to `seq_len` (a
    trajectory longer than the window split into pieces of at most `seq_len - 1` tokens)."""
    return {
        arm: tokenized(
            subsets=subsets,
            size=size,
            arm=arm,
            scale=scale,
            tokenizer=tokenizer,
            max_len=seq_len - 1,
            seq_len=seq_len,
            workers=workers,
            shard_rows=shard_rows,
            version=version,
        )
        for arm in arms
    }


def nested_scales(
    *, tokenized: Tokenized, arm: str, scales: Sequence[tuple[str, SftRecipe]], init_from: Model, version: str
) -> dict[str, Checkpoint]:
    """One arm's SFT run whose checkpoints are its scales, in order: each scale's step continues the
    previous one's checkpoint to its own `recipe.steps` on the same data (one scale: one run)."""
    out: dict[str, Checkpoint] = {}
    previous = None
    for name, recipe in scales:
        previous = checkpoint(
            tokenized=tokenized,
            arm=arm,
            scale=name,
            recipe=recipe,
            init_from=init_from,
            continue_from=previous,
            version=version,
        )
        out[name] = previous
    return out


def echo_arm(*, policy: Model, tasks: TaskSet, heldout: HeldoutSet, recipe: EchoRecipe, version: str) -> EchoArm:
    """RL of `policy` on `tasks` under one arm's loss (`recipe.arm`), every command in the sandbox."""

    def config(ctx) -> EchoArmConfig:
        return EchoArmConfig(
            policy=model_path(ctx, policy),
            tasks=tasks.at(ctx),
            heldout=heldout.at(ctx, heldout.file),
            out=ctx.output_path,
            recipe=recipe,
        )

    step = config_step(artifacts.echo_arm(recipe.arm), run_arm, config, version=version, deps=[policy, tasks, heldout])
    return EchoArm(step, arm=recipe.arm)


def echo_grpo(*, policy: Model, tasks: TaskSet, recipe: EchoRecipe, name: str, resources=None, version: str) -> RlRun:
    """RL of `policy` on `tasks` with ECHO's objective (λ = 0 is plain GRPO) through SkyRL, under
    `recipe` in SkyRL's names (`EchoGrpoRecipe.of`)."""

    def config(ctx) -> GrpoConfig:
        return GrpoConfig(
            policy=model_path(ctx, policy),
            tasks=tasks.at(ctx),
            out=ctx.output_path,
            recipe=EchoGrpoRecipe.of(recipe),
            command_timeout_s=recipe.command_timeout_s,
        )

    step = config_step(
        artifacts.echo_rl(name), run_grpo, config, version=version, deps=[policy, tasks], resources=resources
    )
    return RlRun(step)
