"""ECHO's GRPO through SkyRL, launched from the project's environment on the step's GPUs: the tasks
copied to the node (every command runs in the node's sandbox), SkyRL's config resolved from the
recipe (`skyrl.bridge`), checkpoints and exports written to the output folder, and a rerun resumed
from the newest checkpoint there."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass

from terminalworld.train.echo.miniature import COMMAND_TIMEOUT_S
from terminalworld.train.skyrl.bridge import EchoGrpoRecipe, skyrl_command, skyrl_config, train_rows

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@dataclass(frozen=True)
class GrpoConfig:
    """One RL run: the HF policy, the task folder, the output folder, the recipe in SkyRL's names,
    and each command's time limit in the sandbox."""

    policy: str
    tasks: str
    out: str
    recipe: EchoGrpoRecipe
    command_timeout_s: float = COMMAND_TIMEOUT_S


def run_grpo(cfg: GrpoConfig) -> None:
    """Run SkyRL in its own environment on the resolved config (written to `{out}/skyrl_config.json`)."""
    from fsspec.core import url_to_fs

    from terminalworld.core.records import write_json

    with tempfile.TemporaryDirectory(prefix="tw-echo-grpo-") as tmp:
        fs, path = url_to_fs(cfg.tasks)
        fs.get(path.rstrip("/") + "/", f"{tmp}/tasks/", recursive=True)
        with open(f"{tmp}/train.jsonl", "w") as f:
            f.writelines(json.dumps(row) + "\n" for row in train_rows(f"{tmp}/tasks"))
        config = skyrl_config(
            cfg.recipe,
            command_timeout_s=cfg.command_timeout_s,
            model=cfg.policy,
            train_data=f"{tmp}/train.jsonl",
            out=cfg.out,
        )
        write_json(os.path.join(cfg.out, "skyrl_config.json"), config)
        write_json(f"{tmp}/config.json", config)
        env = dict(os.environ, PYTHONPATH=SRC)
        command = skyrl_command(strategy=cfg.recipe.strategy, config_file=f"{tmp}/config.json")
        subprocess.run(command, env=env, check=True)
