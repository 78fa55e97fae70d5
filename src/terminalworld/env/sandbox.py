"""A bubblewrap sandbox that runs one shell command in a repository and returns what it printed.

This is a security boundary: later stages run model-issued commands through it. Each command gets
fresh namespaces with no network, a read-only view of the system directories only (no home
folders, no project files), the repository as the single writable bind mount, a private /tmp,
a wall-clock limit that kills the whole process tree, a file-size limit, and an output cap that
keeps the head and tail like SWE-ZERO's harness (`... (output truncated, N chars elided) ...`).
The environment is fixed (LC_ALL=C, TZ=UTC, HOME, PATH) so recordings are reproducible.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass

from terminalworld.errors import SandboxUnavailable
from terminalworld.options import option

REPO_MOUNT = "/testbed"
_SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
# Past this many bytes only a rolling tail is kept, so a flood cannot exhaust memory.
_HARD_BUFFER_BYTES = 1 << 20


@dataclass(frozen=True)
class SandboxConfig:
    timeout_s: float = 10.0
    # Output longer than head+tail characters keeps head and tail around a truncation note.
    head_chars: int = 4000
    tail_chars: int = 4000
    max_file_bytes: int = 64 << 20
    home: str = "/tmp/home"


@dataclass(frozen=True)
class CommandResult:
    output: str
    returncode: int
    timed_out: bool
    elided_chars: int


def truncate_output(text: str, head: int, tail: int, extra_elided: int = 0) -> tuple[str, int]:
    """SWE-ZERO's truncation: first `head` and last `tail` characters around a note."""
    if len(text) <= head + tail and not extra_elided:
        return text, 0
    elided = len(text) - head - tail + extra_elided
    return f"{text[:head]}\n\n... (output truncated, {elided} chars elided) ...\n\n{text[len(text) - tail :]}", elided


def bwrap_path() -> str:
    path = shutil.which("bwrap")
    if path is None:
        raise SandboxUnavailable("bubblewrap (bwrap) is not installed; on Debian: apt-get install bubblewrap")
    return path


def _system_binds() -> list[str]:
    args: list[str] = []
    for d in _SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    return args


class Sandbox:
    """Runs commands with the working directory at the repository root, as SWE-ZERO's agents do:
    each command in a fresh shell, so `cd` does not persist."""

    def __init__(self, repo_dir: str, config: SandboxConfig = SandboxConfig()):
        self.repo_dir = os.path.abspath(repo_dir)
        self.config = config
        self._prefix = [
            bwrap_path(),
            "--unshare-net",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--die-with-parent",
            "--new-session",
            *_system_binds(),
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--tmpfs",
            "/tmp",
            "--dir",
            config.home,
            "--bind",
            self.repo_dir,
            REPO_MOUNT,
            "--chdir",
            REPO_MOUNT,
            "--hostname",
            "sandbox",
            "--clearenv",
            "--setenv",
            "PATH",
            "/usr/local/bin:/usr/bin:/bin",
            "--setenv",
            "HOME",
            config.home,
            "--setenv",
            "LC_ALL",
            "C",
            "--setenv",
            "LANG",
            "C",
            "--setenv",
            "TZ",
            "UTC",
            "--setenv",
            "TERM",
            "dumb",
            "--setenv",
            "PAGER",
            "cat",
            "--setenv",
            "GIT_PAGER",
            "cat",
            "--setenv",
            "GIT_CONFIG_NOSYSTEM",
            "1",
        ]

    def argv(self, command: str) -> list[str]:
        # Limits are set by an outer shell (preexec_fn is unsafe under the recorder's threads);
        # the command itself runs in a fresh bash exactly as given.
        limits = f'ulimit -f {self.config.max_file_bytes // 1024} -c 0; exec /bin/bash -c "$1"'
        return [*self._prefix, "/bin/bash", "-c", limits, "bash", command]

    def run(self, command: str) -> CommandResult:
        cfg = self.config
        proc = subprocess.Popen(
            self.argv(command),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        head, tail, dropped = bytearray(), bytearray(), 0
        deadline = time.monotonic() + cfg.timeout_s
        timed_out = False
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            if len(head) < _HARD_BUFFER_BYTES:
                take = _HARD_BUFFER_BYTES - len(head)
                head += chunk[:take]
                chunk = chunk[take:]
            if chunk:
                tail += chunk
                if len(tail) > _HARD_BUFFER_BYTES:
                    dropped += len(tail) - _HARD_BUFFER_BYTES
                    del tail[: len(tail) - _HARD_BUFFER_BYTES]
        if timed_out:
            # The sandbox's pid namespace dies with its first process, taking every child along.
            os.killpg(proc.pid, signal.SIGKILL)
        proc.stdout.close()
        returncode = proc.wait()
        text = (bytes(head) + bytes(tail)).decode("utf-8", errors="replace") if not dropped else None
        if text is not None:
            output, elided = truncate_output(text, cfg.head_chars, cfg.tail_chars)
        else:
            h = bytes(head).decode("utf-8", errors="replace")
            t = bytes(tail).decode("utf-8", errors="replace")
            output, elided = truncate_output(
                h[: cfg.head_chars] + t[-cfg.tail_chars :],
                cfg.head_chars,
                cfg.tail_chars,
                extra_elided=len(h) - cfg.head_chars + dropped + len(t) - cfg.tail_chars,
            )
        if timed_out:
            output += f"\n(command timed out after {cfg.timeout_s:g} s)\n"
            returncode = 124
        return CommandResult(output, returncode, timed_out, elided)


@dataclass(frozen=True)
class ExecConfig:
    """`terminalworld sandbox exec`: one command in a repository, as an agent would run it."""

    repo: str = option(help="the repository folder, mounted writable at /testbed")
    command: list[str] = option(positional=True, help="the command (after --), run by bash")
    timeout_s: float | None = option(None, flag="--timeout", help="wall-clock limit, seconds")
    memory_mb: int | None = option(None, help="memory limit, MiB")
    disk_mb: int | None = option(None, help="limit on what the command writes into the repository, MiB")


def exec_main(cfg: ExecConfig) -> int:
    """Run `cfg.command` in the sandbox, print exactly what an agent would see, and return the
    command's exit status."""
    defaults = SandboxConfig()
    config = SandboxConfig(timeout_s=cfg.timeout_s if cfg.timeout_s is not None else defaults.timeout_s)
    result = Sandbox(cfg.repo, config).run(" ".join(cfg.command))
    print(result.output, end="")
    return result.returncode
