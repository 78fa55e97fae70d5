"""`terminalworld sandbox exec`: one command in a sandbox over a folder, printed as an agent sees it."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace

from terminalworld.core.terminal import for_terminal
from terminalworld.env import syncback
from terminalworld.env.sandbox import SandboxConfig, check_available
from terminalworld.errors import InputError
from terminalworld.options import above, at_least, option


@dataclass(frozen=True)
class ExecConfig:
    """`terminalworld sandbox exec`: one command in a sandbox over a folder; None keeps a default."""

    command: list[str] = option(positional=True, help="the command, after --; its words are joined by spaces")
    repo: str = option(help="the repository folder, mounted writable at /testbed")
    timeout_s: float | None = option(None, flag="--timeout", help="wall-clock limit, seconds")
    memory_mb: int | None = option(None, help="memory limit, MiB")
    disk_mb: int | None = option(None, help="how much the repository may grow, MiB")

    def __post_init__(self) -> None:
        at_least(self, memory_mb=1, disk_mb=1)
        above(self, timeout_s=0)


def exec_main(cfg: ExecConfig) -> int:
    """Run `cfg.command` in a sandbox over a capped copy of `cfg.repo` (`env.copies`: on a root host its
    own tmpfs, so the kernel holds the disk cap), print exactly what an agent would see (output,
    truncation and limit notes; on a terminal with control characters escaped, `core.terminal`, so that
    the command cannot drive the operator's terminal) and return its exit status. The folder is then
    made to hold what the copy holds (`env.syncback`), only when the command ended within its disk and
    time limits; otherwise it is left exactly as it was, a line on stderr says so, and the status is
    the command's, or 1 when that was 0."""
    if not os.path.isdir(cfg.repo):
        raise InputError(f"--repo {cfg.repo}: not a folder")
    mib = {"memory_bytes": cfg.memory_mb, "disk_bytes": cfg.disk_mb}
    overrides = {k: v << 20 for k, v in mib.items() if v is not None}
    config = replace(SandboxConfig(), **overrides, **({} if cfg.timeout_s is None else {"timeout_s": cfg.timeout_s}))
    check_available(config)  # before any copy
    result, kept = syncback.run_written_back(cfg.repo, config, " ".join(cfg.command))
    print(for_terminal(result.output), end="", flush=True)
    if kept is not None:
        print(f"sandbox exec: {kept}", file=sys.stderr)
        return result.returncode or 1
    return result.returncode
