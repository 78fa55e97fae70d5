"""The walk's disk cap (a folder the kernel does not cap: a `Sandbox` over a plain folder, or a copy
where no tmpfs can be had) holds against what a command does to hide its writes: a file written in one burst between two polls, files held open after unlinking
them, folders made unreadable (write-only 0300) or unsearchable (chmod 0), as root and unprivileged.
A mode a command left never makes `Sandbox.run` raise."""

import json

from terminalworld.env.sandbox import Sandbox, SandboxConfig

from . import as_user
from .as_user import unprivileged

CAP = 20 << 20
HOLES_UID = 54324  # unused by any other test
UNLINKED = (  # three 15 MiB files, unlinked, held open while the command sleeps
    "python3 -c \"import os, time\nfs = []\nfor i in range(3):\n    f = open(f'u{i}', 'wb'); os.unlink(f'u{i}')\n"
    "    f.write(b'x' * (15 << 20)); f.flush(); fs.append(f)\ntime.sleep(4)\""
)
# Each group runs in a fresh sandbox over the folder (the cap counts from what it holds then).
COMMANDS = [
    {"burst": "head -c 300M /dev/zero > one; sleep 2"},
    {"unlinked": UNLINKED},
    {"writeonly": "mkdir w && chmod 0300 w && for i in 1 2 3 4 5; do head -c 15M /dev/zero > w/f$i; sleep 0.5; done"},
    {"hidden": "mkdir -p d/e && echo x > d/e/f && chmod 0 d/e d; echo done", "after": "echo still usable; ls"},
    # The walk's stated slack: eight files written at once between two polls may each reach what is
    # left of the cap (RLIMIT_FSIZE bounds each file, not the total), so the folder may keep 8x it.
    {"writers": "for i in 1 2 3 4 5 6 7 8; do head -c 20M /dev/zero > w$i & done; wait; sleep 2"},
]
CALLER = """
import json, os, sys
from terminalworld.env.sandbox import Sandbox, SandboxConfig
out = {}
for group in json.loads(sys.argv[2]):
    sandbox = Sandbox(sys.argv[1], SandboxConfig(timeout_s=10, disk_bytes=int(sys.argv[3]), memory_bytes=512 << 20))
    for name, command in group.items():
        r = sandbox.run(command)
        kept = sum(os.lstat(os.path.join(d, f)).st_blocks * 512 for d, _, fs in os.walk(sys.argv[1]) for f in fs)
        out[name] = [r.output, r.returncode, list(r.limits), kept]
print(json.dumps(out))
"""


def _check(out: dict) -> None:
    assert out["burst"][3] <= CAP + (1 << 20) and {"file_size", "disk"} & set(out["burst"][2])
    assert out["unlinked"][1] == 137 and "disk" in out["unlinked"][2]  # stopped while it held them
    assert out["writeonly"][1] == 137 and "disk" in out["writeonly"][2] and out["writeonly"][3] <= 3 * CAP
    assert out["hidden"][:2] == ["done\n", 0]
    assert out["after"][0].startswith("still usable\n") and out["after"][1] == 0
    assert "disk" in out["writers"][2] and out["writers"][3] - out["after"][3] <= 8 * CAP


def test_a_root_callers_walk_cap_holds(repo):
    out = {}
    for group in COMMANDS:
        sandbox = Sandbox(str(repo), SandboxConfig(timeout_s=10, disk_bytes=CAP))
        assert sandbox.disk_limit_kind == "walk"  # a plain folder, not a copy of env.copies
        for name, command in group.items():
            r = sandbox.run(command)
            kept = sum(p.lstat().st_blocks * 512 for p in repo.rglob("*") if not p.is_dir())
            out[name] = [r.output, r.returncode, list(r.limits), kept]
    _check(out)


@unprivileged(HOLES_UID)
def test_an_unprivileged_callers_walk_cap_holds(repo, workdir):
    as_user.own(HOLES_UID, repo, *repo.iterdir())
    # The caller exits 0: chmod 0 left by a command raised nothing.
    _check(as_user.run(HOLES_UID, CALLER, repo, json.dumps(COMMANDS), CAP, cwd=workdir, timeout=180))
