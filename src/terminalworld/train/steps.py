"""The training stage as Marin steps: one arm of rows rendered and packed for Levanter, an SFT
checkpoint trained on it with its final HF export, and one arm of ECHO's on-policy miniature."""

from __future__ import annotations

import math
import os
from typing import Any

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
    joined,
    model_input,
    step,
)
from terminalworld.pipeline.zephyr import Workers
from terminalworld.train.echo.miniature import COMMAND_TIMEOUT_S, EchoRecipe
from terminalworld.train.sft import SftRecipe
from terminalworld.train.skyrl.bridge import EchoGrpoRecipe


def tokenize_fn(
    *,
    subset: str | list,
    skip: int,
    out: str,
    arm: str,
    tokenizer: str,
    max_len: int,
    seq_len: int,
    shard_rows: int,
    workers: Workers,
    separator: str = "<|endoftext|>",
) -> None:
    """Rows skip.. of a subset, rendered under one arm (`pretrain`: every token trained, plain LM
    text) and packed for Levanter by a sharded Zephyr job (`train.tokenize_job`), with the
    training tokenizer and `stats.json` beside them. With nested subsets, skipping the smaller
    subset's rows gives data held apart from it."""
    from terminalworld.train.tokenize_job import TokenizeJob, tokenize_sharded

    job = TokenizeJob(
        inputs=[joined(subset)],
        out=out,
        arm=arm,
        tokenizer=tokenizer,
        max_len=max_len,
        seq_len=seq_len,
        skip=skip,
        separator=separator,
        shard_rows=shard_rows,
    )
    tokenize_sharded(job, workers)


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
    """Rows skip..size of the subset of `size`, rendered under `arm` and packed to `seq_len`, in
    shards of `shard_rows` on Zephyr `workers`."""
    return Tokenized(
        step(
            artifacts.tokenized(arm, scale),
            tokenize_fn,
            version=version,
            resources=resources,
            subset=subsets.subset(size),
            skip=skip,
            arm=arm,
            tokenizer=tokenizer,
            max_len=max_len,
            seq_len=seq_len,
            shard_rows=shard_rows,
            workers=workers,
        )
    )


def sft_fn(
    *,
    tokenized: str,
    out: str,
    recipe: dict[str, Any],
    init_from: str | list | None = None,
    continue_from: str | None = None,
) -> None:
    """Levanter training on a tokenized artifact; the final HF export lands in `{out}/hf` with the
    rendering tokenizer and its chat template, so the scorer renders exactly as training did. With
    `continue_from` (an earlier checkpoint artifact of the same run, on the same data), its last
    Levanter checkpoint is copied in first, so training resumes there: model, optimizer, step and
    data position."""
    from fsspec.core import url_to_fs

    from terminalworld.core.assets import load_tokenizer
    from terminalworld.core.records import read_json
    from terminalworld.train.sft import SftConfig, levanter_source, run_sft

    r = SftRecipe.from_input(recipe)
    stats = read_json(os.path.join(tokenized, artifacts.STATS))
    steps = r.steps or max(1, math.ceil(stats["pack"]["sequences"] * r.epochs / r.batch_size))
    if continue_from is not None:
        _copy_last_checkpoint(continue_from, out)
    fs, root = url_to_fs(tokenized)
    hf = run_sft(
        SftConfig(
            rows=[fs.unstrip_protocol(p) for p in sorted(fs.glob(f"{root}/{artifacts.PACKED_ROWS}/*.jsonl.gz"))],
            tokenizer=os.path.join(tokenized, artifacts.TRAINING_TOKENIZER),
            cache_dir=os.path.join(out, "cache"),
            output_dir=out,
            export_dir=os.path.join(out, artifacts.HF_EXPORT),
            num_train_steps=steps,
            recipe=r,
            initialize_from_hf=levanter_source(joined(init_from)) if init_from else None,
        )
    )
    load_tokenizer(stats["render_tokenizer"]).save_pretrained(hf)


def _copy_last_checkpoint(src: str, out: str, run_id: str = "sft") -> None:
    """Copy the newest complete Levanter checkpoint of `src`'s run into `out`'s, unless `out` already
    has one of its own (a rerun resumes from where it got to)."""
    from fsspec.core import url_to_fs

    fs, base = url_to_fs(f"{src.rstrip('/')}/checkpoints/{run_id}")
    _, dest = url_to_fs(f"{out.rstrip('/')}/checkpoints/{run_id}")
    if fs.exists(dest) and fs.glob(f"{dest}/step-*/metadata.json"):
        return
    done = sorted(fs.glob(f"{base}/step-*/metadata.json"), key=lambda p: int(p.rsplit("/", 2)[1].split("-")[1]))
    if not done:
        raise FileNotFoundError(f"no complete Levanter checkpoint under {base} to continue from")
    last = done[-1].rsplit("/", 1)[0]
    fs.get(last.rstrip("/") + "/", f"{dest}/{last.rsplit('/', 1)[1]}/", recursive=True)


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
    # continue_from is an input only when given, so checkpoints made before it existed keep their identity.
    more = {"continue_from": continue_from.step} if continue_from is not None else {}
    return Checkpoint(
        step(
            artifacts.checkpoint(arm, scale),
            sft_fn,
            version=version,
            resources=resources,
            tokenized=tokenized.step,
            recipe=recipe.as_input(),
            init_from=model_input(init_from),
            **more,
        )
    )


def echo_arm_fn(*, policy: str | list, tasks: str, heldout: list, out: str, recipe: EchoRecipe) -> None:
    """One ECHO arm from `policy` on the task folder `tasks`, measured on the held-out rows."""
    from terminalworld.train.echo.miniature import run_arm

    run_arm(policy=joined(policy), tasks=tasks, heldout=joined(heldout), out=out, recipe=recipe)


def echo_arm(*, policy: Model, tasks: TaskSet, heldout: HeldoutSet, recipe: EchoRecipe, version: str) -> EchoArm:
    """RL of `policy` on `tasks` under one arm's loss (`recipe.arm`), every command in the sandbox."""
    return EchoArm(
        step(
            artifacts.echo_arm(recipe.arm),
            echo_arm_fn,
            version=version,
            policy=model_input(policy),
            tasks=tasks.step,
            heldout=heldout.rows,
            recipe=recipe,
        ),
        arm=recipe.arm,
    )


def echo_grpo_fn(
    *, policy: str | list, tasks: str, out: str, recipe: EchoGrpoRecipe, command_timeout_s: float = COMMAND_TIMEOUT_S
) -> None:
    """ECHO's GRPO with SkyRL in its own environment on this step's GPUs: the tasks are copied to the
    node (every command runs in the node's sandbox, `command_timeout_s` at most), checkpoints and
    exports go to `out`, and a rerun resumes from the newest checkpoint there."""
    import json
    import subprocess
    import tempfile

    from fsspec.core import url_to_fs

    from terminalworld.core.records import write_json
    from terminalworld.train.skyrl.bridge import skyrl_command, skyrl_config, train_rows

    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with tempfile.TemporaryDirectory(prefix="tw-echo-grpo-") as tmp:
        fs, path = url_to_fs(tasks)
        fs.get(path.rstrip("/") + "/", f"{tmp}/tasks/", recursive=True)
        with open(f"{tmp}/train.jsonl", "w") as f:
            f.writelines(json.dumps(row) + "\n" for row in train_rows(f"{tmp}/tasks"))
        config = skyrl_config(
            recipe, command_timeout_s=command_timeout_s, model=joined(policy), train_data=f"{tmp}/train.jsonl", out=out
        )
        write_json(os.path.join(out, "skyrl_config.json"), config)
        write_json(f"{tmp}/config.json", config)
        env = dict(os.environ, PYTHONPATH=src)
        subprocess.run(skyrl_command(strategy=recipe.strategy, config_file=f"{tmp}/config.json"), env=env, check=True)


def echo_grpo(*, policy: Model, tasks: TaskSet, recipe: EchoRecipe, name: str, resources=None, version: str) -> RlRun:
    """RL of `policy` on `tasks` with ECHO's objective (λ = 0 is plain GRPO) through SkyRL, under
    `recipe` in SkyRL's names (`EchoGrpoRecipe.of`)."""
    # The timeout is an input only when a recipe changes it, so runs planned before it keep their identity.
    more = {"command_timeout_s": recipe.command_timeout_s} if recipe.command_timeout_s != COMMAND_TIMEOUT_S else {}
    return RlRun(
        step(
            artifacts.echo_rl(name),
            echo_grpo_fn,
            version=version,
            resources=resources,
            policy=model_input(policy),
            tasks=tasks.step,
            recipe=EchoGrpoRecipe.of(recipe),
            **more,
        )
    )
