"""A Harbor environment whose every command runs in the project's bubblewrap sandbox: real Harbor
jobs, trials and verifiers on a machine without Docker.

Imported only inside Harbor's own environment (`harbor.runtime`), with the project's `src` on the
path; the sandbox module needs nothing but the standard library and a bwrap binary, which the
launcher passes as `bwrap=`.

Each trial gets a private folder: the task's `environment/repo/` copied to the task's workdir
(/testbed, the sandbox's repository mount), and host folders bound at /tests, /solution, /logs and
/installed-agent, the absolute paths Harbor's verifier, oracle and agents use. A task without
`environment/repo/` starts from an empty /testbed; a Dockerfile is not built (this environment has
no image), so only tasks whose environment is the repository run here. Uploads and downloads are
host copies through directory descriptors that never follow a symlink (`env.walk`): an upload
replaces what stands in its way, a download copies folders and regular files only, so no symlink,
FIFO or device a command made reaches the trial folder that Harbor's verifier reads on the host.
After every command /logs/verifier is kept a real folder whose reward files are regular files.

The host owns everything a verdict depends on. When the verifier starts (Harbor's removal of stale
rewards, then its upload of /tests) every command still running is killed and /logs/verifier and
/tests are replaced by new host folders, whatever modes, types or contents the agent left there, so
nothing the agent did can make those steps fail (an unscored trial). A cancelled `exec` (Harbor's
agent timeout) kills its command and returns only once it is gone, so no command of the agent runs
while the verifier does. A generated task (`tests/cases.json`) is graded by the host
(`tasks.layout.verdict`): the uploaded /tests holds its cases without the expected values and the
host's own runner, and the download writes the host's reward from the case lines the sandbox
printed, whatever reward file the code under test left; any other task's reward must pass
`tasks.layout.read_reward` (a regular file holding one number in [0, 1]; a reward.json is refused),
else the download fails: a failed submission, never a forged score. A download copies at most
`layout.VERIFIER_FILES` files and `layout.VERIFIER_BYTES` bytes (the rest named in `dropped.txt`),
and its `submission.diff` is the host's (`tasks.submission`), computed from the repository copy,
never a file the sandbox wrote. A command runs as the sandbox's uid 0 whatever `user` asks, with the
sandbox's wall limit (`timeout_sec`, else `command_timeout_s`).
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

from terminalworld.agent import process
from terminalworld.core import scratch
from terminalworld.env import copies, walk
from terminalworld.env.sandbox import REPO_MOUNT, Sandbox, SandboxConfig
from terminalworld.errors import VerifierError
from terminalworld.tasks import layout
from terminalworld.tasks.submission import submission_diff

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
        # A generated task's cases, expected values included, stay on the host, which grades them.
        self._cases = json.loads(cases.read_text()) if cases.is_file() else None

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

    @staticmethod
    def _copy_capped(top: str, below: str, target: Path, skip: tuple[str, ...] = ()) -> None:
        """Copy a sandbox folder's folders and regular files to `target`, at most
        `layout.VERIFIER_FILES` entries and `layout.VERIFIER_BYTES` bytes: a file that does not fit
        is dropped whole, as is what lies in a dropped folder or 16 folders down, and what was dropped
        is named in `layout.DROPPED_NOTE`. Files `skip` (relative paths) are left out."""
        target.mkdir(parents=True, exist_ok=True)
        entries, size, dropped, named = 0, 0, 0, []
        for fd, name, st, parts in walk.walk(top, below):
            rel = "/".join([*parts, name])
            dest = target.joinpath(*parts, name)
            if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)) or rel in skip:
                continue
            fits = size + (st.st_size if stat.S_ISREG(st.st_mode) else 0) <= layout.VERIFIER_BYTES
            if entries >= layout.VERIFIER_FILES or not fits or len(parts) >= 16 or not dest.parent.is_dir():
                dropped += 1
                if len(named) < layout.VERIFIER_FILES:
                    named.append(f"{rel[:200]!r} ({st.st_size} bytes)")
                continue
            entries += 1
            if stat.S_ISDIR(st.st_mode):
                dest.mkdir(exist_ok=True)
            elif (src := walk.open_regular(fd, name)) is not None:
                with os.fdopen(src, "rb") as fin, open(dest, "wb") as fout:
                    size += fout.write(fin.read(layout.VERIFIER_BYTES - size + 1)[: layout.VERIFIER_BYTES - size])
        if dropped:
            caps = f"caps: {layout.VERIFIER_FILES} entries, {layout.VERIFIER_BYTES} bytes"
            (target / layout.DROPPED_NOTE).write_text(
                f"{dropped} entries left out ({caps}):\n" + "\n".join(named) + "\n"
            )

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        """Copy a sandbox folder's folders and regular files to the host, under caps. The verifier's
        reward and submission diff are the host's: the reward from the case lines (a generated task)
        or a checked `reward.txt` (any other), the diff from the repository copy."""
        top, below = self._place(source_dir)
        if PurePosixPath(source_dir) != PurePosixPath(VERIFIER_DIR):
            await asyncio.to_thread(self._copy_capped, top, below, Path(target_dir))
            return
        target = Path(target_dir)
        if self._cases is None:
            if walk.lstat(top, f"{below}/reward.json") is not None:
                raise VerifierError(f"{source_dir}/reward.json: refused; the reward is reward.txt alone")
            reward = layout.read_reward(top, below)
        else:
            lines = walk.read_regular(top, f"{below}/cases.jsonl", max_bytes=layout.CASES_BYTES)
            reward = layout.verdict(self._cases, lines)
        own = ("reward.txt", "reward.json", process.SUBMISSION_DIFF)  # the host writes these afterwards
        await asyncio.to_thread(self._copy_capped, top, below, target, own)
        for name in ("reward.json", "reward.txt", process.SUBMISSION_DIFF):
            (target / name).unlink(missing_ok=True)
        if reward is not None:
            (target / "reward.txt").write_text(f"{reward:g}\n")
        original = self.environment_dir / "repo"
        if original.is_dir():
            diff = await asyncio.to_thread(submission_diff, str(original), str(self._host(REPO_MOUNT)))
            (target / process.SUBMISSION_DIFF).write_text(diff)

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
