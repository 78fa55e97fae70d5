"""`terminalworld sandbox exec`: one command in a sandbox over a folder, printed as an agent sees it."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from terminalworld.core.terminal import for_terminal
from terminalworld.env.sandbox import Sandbox, SandboxConfig
from terminalworld.errors import InputError
from terminalworld.options import option


@dataclass(frozen=True)
class ExecConfig:
    """`terminalworld sandbox exec`: one command in a sandbox over a folder; None keeps a default."""

    command: list[str] = option(positional=True, help="the command, after --; its words are joined by spaces")
    repo: str = option(help="the repository folder, mounted writable at /testbed")
    timeout_s: float | None = option(None, flag="--timeout", above=0, help="wall-clock limit, seconds")
    memory_mb: int | None = option(None, minimum=1, help="memory limit, MiB")
    disk_mb: int | None = option(None, minimum=1, help="how much the repository may grow, MiB")


def exec_main(cfg: ExecConfig) -> int:
    """Run `cfg.command` in a sandbox over `cfg.repo`, print exactly what an agent would see (output,
    truncation and limit notes; on a terminal with control characters escaped, `core.terminal`, so that the
    command cannot drive the operator's terminal) and return its exit status. On a root host the folder is lent to the
    sandbox's uid for the command and given back to its owner afterwards."""
    if not os.path.isdir(cfg.repo):
        raise InputError(f"--repo {cfg.repo}: not a folder")
    mib = {"memory_bytes": cfg.memory_mb, "disk_bytes": cfg.disk_mb}
    overrides = {k: v << 20 for k, v in mib.items() if v is not None}
    config = replace(SandboxConfig(), **overrides, **({} if cfg.timeout_s is None else {"timeout_s": cfg.timeout_s}))
    owner = os.lstat(cfg.repo)
    sandbox = Sandbox(cfg.repo, config)
    try:
        result = sandbox.run(" ".join(cfg.command))
    finally:
        sandbox.give_back(owner.st_uid, owner.st_gid)
    print(for_terminal(result.output), end="", flush=True)
    return result.returncode
