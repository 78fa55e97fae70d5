"""A Harbor environment whose every command runs in the project's bubblewrap sandbox: real Harbor
jobs, trials and verifiers on a machine without Docker.

Imported only inside Harbor's own environment (`agent.harbor.runtime`). Each trial gets a private
copy of the task's repository at /testbed and host folders bound at Harbor's paths; files cross
only through no-follow, capped host copies (`env.walk`), and the verifier's folder comes back with
the host's verdict (`tasks.verdict`), since anything a command wrote there is hostile. How a trial
is laid out: docs/manual/stages.md; the threat model: docs/manual/sandbox.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import shutil
import stat
from pathlib import Path, PurePosixPath

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities

from terminalworld.core import scratch
from terminalworld.env import copies, walk
from terminalworld.env.sandbox import REPO_MOUNT, Sandbox, SandboxConfig
from terminalworld.tasks import layout, verdict

BOUND = ("/tests", "/solution", "/logs", "/installed-agent")
VERIFIER_DIR = "/logs/verifier"
# Harbor's (0.26) first verifier step, removing stale rewards: done on the host, on a new folder.
REMOVE_REWARDS = f"rm -f -- {VERIFIER_DIR}/reward.txt {VERIFIER_DIR}/reward.json"
LOG_DIRS = ("/logs/agent", "/logs/verifier", "/logs/artifacts")  # Harbor writes there without creating them


class SandboxEnvironment(BaseEnvironment):
    """Harbor's `BaseEnvironment` over `terminalworld.env.sandbox.Sandbox`."""

    def __init__(self, *args, bwrap: str | None = None, command_timeout_s: float = 600.0, **kwargs):
        super().__init__(*args, **kwargs)
        self._config = SandboxConfig(bwrap=bwrap, timeout_s=command_timeout_s)
        self._root: Path | None = None
        self._space = contextlib.ExitStack()  # the trial's copy (`env.copies`), removed at stop()
        self._sandbox: Sandbox | None = None
        cases = self.environment_dir.parent / "tests" / "cases.json"
        # A generated task's cases, expected values included, stay on the host, which grades them;
        # so does a command task's reference answer.
        self._cases = json.loads(cases.read_text()) if cases.is_file() else None
        self._expected = layout.command_spec(self.environment_dir.parent)

    @staticmethod
    def type() -> str:
        """The environment's type name in Harbor's records."""
        return "terminalworld-sandbox"

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        """No network: tasks that forbid internet access may run here."""
        return EnvironmentCapabilities(disable_internet=True)  # the sandbox has no network namespace peer

    def _validate_definition(self) -> None:
        workdir = self.task_env_config.workdir or REPO_MOUNT
        if workdir != REPO_MOUNT:
            raise ValueError(f"the sandbox environment mounts the repository at {REPO_MOUNT}, not {workdir}")

    def _place(self, path: str) -> tuple[str, str]:
        """(host folder, path below it) where absolute sandbox path `path` lives."""
        assert self._root is not None, "start() first"
        p = PurePosixPath(path)
        for inside in (REPO_MOUNT, *BOUND):
            if p == PurePosixPath(inside) or PurePosixPath(inside) in p.parents:
                return str(self._root / inside.strip("/")), str(p.relative_to(inside))
        raise ValueError(f"{path}: this environment keeps files only under {REPO_MOUNT} and {', '.join(BOUND)}")

    def _host(self, path: str) -> Path:
        """Where absolute sandbox path `path` lives on the host (only for folders the host made)."""
        top, below = self._place(path)
        return Path(top) / below

    async def start(self, force_build: bool) -> None:
        """Make the trial's folders (the repository copy and the bound ones) and its sandbox."""
        base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        repo = self.environment_dir / "repo"
        content = walk.tree_bytes(str(repo)) if repo.is_dir() else 0
        space = copies.copy_space("tw-harbor-", dir=base, content_bytes=content, disk_bytes=self._config.disk_bytes)
        self._root = Path(self._space.enter_context(space))
        if repo.is_dir():
            shutil.copytree(repo, self._host(REPO_MOUNT), symlinks=True)
        else:
            self._host(REPO_MOUNT).mkdir()
        for inside in (*BOUND, *LOG_DIRS):
            self._host(inside).mkdir()
        binds = {inside: str(self._host(inside)) for inside in BOUND}
        self._sandbox = await asyncio.to_thread(Sandbox, str(self._host(REPO_MOUNT)), self._config, binds=binds)

    async def stop(self, delete: bool) -> None:
        """Remove the trial's folders when `delete` (otherwise when this process exits)."""
        if self._sandbox is not None:
            await asyncio.to_thread(self._sandbox.end_running)
        if delete:
            self._space.close()

    def _make_room(self, source: str) -> None:
        """Room for an upload in the trial's copy, however full a command left it."""
        size = walk.tree_bytes(source) if os.path.isdir(source) else os.path.getsize(source) + walk.ENTRY_BYTES
        copies.make_room(str(self._root), size + 8 * walk.ENTRY_BYTES)

    async def _claim(self) -> None:
        assert self._sandbox is not None
        await asyncio.to_thread(self._sandbox.claim_repo)

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        """Copy a host file to a sandbox path."""
        self._make_room(str(source_path))
        walk.copy_in(str(source_path), *self._place(target_path))
        await self._claim()

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        """Copy a host folder to a sandbox path; an upload to /tests starts the verifier, which gets a
        fresh /logs/verifier."""
        tests = PurePosixPath(target_dir) == PurePosixPath("/tests")
        if tests:
            await asyncio.to_thread(self._replace, "/tests")
            await asyncio.to_thread(self._replace, VERIFIER_DIR)
        self._make_room(str(source_dir))
        walk.copy_in(str(source_dir), *self._place(target_dir))
        if tests and self._cases is not None and os.path.isfile(os.path.join(source_dir, "cases.json")):
            layout.blind_tests(self._cases, *self._place("/tests"))
        if tests and self._expected is not None:
            layout.blind_command_tests(*self._place("/tests"))
        await self._claim()

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        """Copy a sandbox file to the host: only a regular file, reached without following symlinks."""
        if (fd := walk.open_file(*self._place(source_path))) is None:
            raise FileNotFoundError(f"{source_path}: no regular file there in the sandbox")
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        with os.fdopen(fd, "rb") as fin, open(target_path, "wb") as fout:
            shutil.copyfileobj(fin, fout, 1 << 20)

    def _replace(self, inside: str) -> None:
        """Put a new, empty host folder where sandbox folder `inside` was, whatever modes, types or
        contents a command left there (replaced, not cleaned in place); no command runs meanwhile.
        Sandboxes bind folders by path at each command, so the next one sees the new folder."""
        assert self._sandbox is not None and self._root is not None
        self._sandbox.end_running()
        top, below = self._place(inside)
        path = os.path.normpath(os.path.join(top, below))
        if path != top:
            os.chmod(top, 0o755)  # a bound folder the host made; a command may have changed its mode
        old = scratch.make_dir("replaced-", str(self._root))
        with contextlib.suppress(FileNotFoundError):
            os.rename(path, os.path.join(old, "old"))
        scratch.remove_tree(old)
        os.mkdir(path, 0o755)
        self._sandbox.claim_repo()

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        """Copy a sandbox folder's folders and regular files to the host, under caps; the verifier's
        folder comes with the host's verdict (`tasks.verdict.judge`)."""
        top, below = self._place(source_dir)
        if PurePosixPath(source_dir) != PurePosixPath(VERIFIER_DIR):
            await asyncio.to_thread(verdict.copy_capped, top, below, Path(target_dir))
            return
        await asyncio.to_thread(
            verdict.judge,
            top,
            below,
            Path(target_dir),
            cases=self._cases,
            original=self.environment_dir / "repo",
            repo=str(self._host(REPO_MOUNT)),
            expected=self._expected,
        )

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        """Run `command` in the sandbox (in `cwd`, with `env` exported); output and exit status."""
        assert self._sandbox is not None, "start() first"
        if command == REMOVE_REWARDS:  # the verifier starts: the host makes its folder anew
            await asyncio.to_thread(self._replace, VERIFIER_DIR)
            return ExecResult(stdout="", stderr="", return_code=0)
        exports = "".join(f"export {k}={shlex.quote(v)}; " for k, v in (self._merge_env(env) or {}).items())
        script = f"cd {shlex.quote(cwd)} && {{ {exports}{command}\n}}" if cwd else f"{exports}{command}"
        run = asyncio.ensure_future(asyncio.to_thread(self._sandbox.run, script, timeout_s=timeout_sec or None))
        try:
            result = await asyncio.shield(run)
        except asyncio.CancelledError:
            while not run.done():  # a command still starting is not yet in `end_running`'s reach
                await asyncio.to_thread(self._sandbox.end_running)
                await asyncio.wait({run}, timeout=0.1)
            await asyncio.to_thread(self._keep_verifier_dir)
            raise
        await asyncio.to_thread(self._keep_verifier_dir)
        return ExecResult(stdout=result.output, stderr="", return_code=result.returncode)

    def _keep_verifier_dir(self) -> None:
        """After a command (all of its processes gone): /logs/verifier stays a real folder whose
        reward files, if any, are regular files, so that no command can make Harbor's removal of
        stale rewards fail (a trial turned into an unscored error) or its reward point elsewhere."""
        top, below = self._place(VERIFIER_DIR)
        folder = walk.lstat(top, below)
        if folder is not None and not stat.S_ISDIR(folder.st_mode):
            scratch.remove_tree(os.path.join(top, below))
        if folder is None or not stat.S_ISDIR(folder.st_mode):
            os.mkdir(os.path.join(top, below))
            self._sandbox.claim_repo()
        for name in ("reward.txt", "reward.json"):
            entry = walk.lstat(top, f"{below}/{name}")
            if entry is not None and not stat.S_ISREG(entry.st_mode):
                scratch.remove_tree(os.path.join(top, below, name))
