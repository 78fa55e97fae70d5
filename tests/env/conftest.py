import os
import re
import socket
import subprocess
import uuid
from pathlib import Path

import pytest

from terminalworld.env import copies
from terminalworld.env.sandbox import Sandbox, SandboxConfig


@pytest.fixture
def repo(workdir):
    r = workdir / "repo"
    r.mkdir()
    (r / "a.txt").write_text("hello\n")
    return r


@pytest.fixture
def make_sandbox(repo):
    """Sandbox over `repo` with a short wall limit; keyword arguments override `SandboxConfig`."""

    def make(**overrides) -> Sandbox:
        return Sandbox(str(repo), SandboxConfig(**{"timeout_s": 5.0, **overrides}))

    return make


@pytest.fixture
def sandbox(make_sandbox):
    return make_sandbox()


@pytest.fixture
def token():
    """Digits unique to this test (usable in a sleep time), to find its processes and files on the host."""
    return f"{uuid.uuid4().int % 10**10:010d}"


def host_uid() -> int:
    """The host uid sandboxes run as: the caller's own, or 65534 when the caller is root."""
    return 65534 if os.geteuid() == 0 else os.geteuid()


def host_snapshot() -> dict[str, object]:
    """What an escaped command would change first: this process's mount table and the system folders.

    The repository copies of other processes (a test beside this one, under pytest-xdist) are left
    out: their tmpfs mounts come, go and are refitted (`copies.fit`) while this test runs."""
    return {
        "mounts": "".join(line for line in Path("/proc/self/mountinfo").open() if not _others_copy(line)),
        **{d: sorted(os.listdir(d)) for d in ("/", "/usr", "/etc", "/usr/bin")},
    }


def _others_copy(line: str) -> bool:
    """Whether mountinfo `line` is a repository copy's tmpfs (`copies.copy_mount`) made by another process:
    its folder is named `<prefix><pid>-<random>` (`scratch.make_dir`) with a pid not this one's."""
    if (mount := copies.copy_mount(line)) is None:
        return False
    made_by = re.fullmatch(r".*?(\d+)-[^-/]+", os.path.basename(mount[1]))
    return made_by is not None and int(made_by.group(1)) != os.getpid()


def host_processes_with(text: str) -> list[str]:
    """Command lines of host processes (any namespace) that contain `text`."""
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if text in line and "ps -eo" not in line]


@pytest.fixture
def listener():
    """A TCP listener on the host's 127.0.0.1; yields (port, socket) and reports whether anyone connected."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    s.settimeout(0.2)
    yield s.getsockname()[1], s
    s.close()
