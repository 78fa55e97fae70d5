"""Per-command cost of the sandbox: the pre-hardening bwrap command line against the hardened one.

    uv run python benchmarks/sandbox.py [--rounds 5] [--per-round 40] [--out benchmarks/results/sandbox.json]

Rollouts run millions of commands, so what hardening adds per command matters. Both methods run the
same commands over the same repository copy (the project's own sources and tests, about 100 files),
interleaved round by round so that a busy machine slows both alike:

- before: the sandbox as it was before hardening, reconstructed here: bwrap run by the caller with
  its own uid (root here), no user namespace, system folders bound as they were, an unsized /tmp,
  only the file-size and core limits, read the same way;
- after: `terminalworld.env.sandbox.Sandbox.run` (user namespace, all capabilities dropped, the
  seccomp filter, the start-up handshake and the kill of the whole pid namespace, host uid switch on
  a root host, masked secrets, sized tmpfs, RLIMITs, the per-command memory cgroup on a root host,
  the disk cap measured after each command with descriptor-based walks, exact output accounting,
  limit notes);
- after, no cgroup: the same with `SandboxConfig(memory_cgroup=False)`, to show what the memory
  cgroup costs;
- after, own tmpfs: the same over a copy made by `terminalworld.env.copies` (on a root host its own
  size- and inode-capped tmpfs, so the kernel holds the disk cap and no walk measures the copy),
  against "after" over a plain folder, whose disk cap the walks measure.

Commands: `true` (pure start-up cost), `ls`, and `grep -rn` over the tree. Reported: commands per
second (median over rounds) and the added milliseconds per command.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
COMMANDS = {"true": "true", "ls": "ls -la", "grep": 'grep -rn "def " . | wc -l'}


def before_argv(bwrap: str, repo: str, command: str) -> list[str]:
    """The command line the sandbox used before hardening (its flags and binds, reconstructed)."""
    binds: list[str] = []
    for d in ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"):
        if os.path.islink(d):
            binds += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            binds += ["--ro-bind", d, d]
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp/home", "LC_ALL": "C", "LANG": "C", "TZ": "UTC"}
    env |= {"TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat", "GIT_CONFIG_NOSYSTEM": "1"}
    setenv = [x for k, v in env.items() for x in ("--setenv", k, v)]
    flags = (
        "--unshare-net --unshare-pid --unshare-ipc --unshare-uts --unshare-cgroup-try --die-with-parent --new-session"
    )
    limits = f'ulimit -f {(64 << 20) // 1024} -c 0; exec /bin/bash -c "$1"'
    return [
        bwrap,
        *flags.split(),
        *binds,
        *["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", "/tmp/home"],
        *["--bind", repo, "/testbed", "--chdir", "/testbed", "--hostname", "sandbox", "--clearenv", *setenv],
        *["/bin/bash", "-c", limits, "bash", command],
    ]


def run_before(argv: list[str]) -> bytes:
    """Run one command the way the old `Sandbox.run` did: one pipe, select and read until EOF."""
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    assert proc.stdout is not None
    fd, out = proc.stdout.fileno(), bytearray()
    while True:
        ready, _, _ = select.select([fd], [], [], 10.0)
        chunk = os.read(fd, 65536) if ready else b""
        if not chunk:
            break
        out += chunk
    proc.stdout.close()
    proc.wait()
    return bytes(out)


def make_repo() -> str:
    """A repository copy every uid may reach: the project's sources and tests, in a fresh folder."""
    base = tempfile.mkdtemp(prefix="tw-bench-")
    os.chmod(base, 0o711)
    repo = os.path.join(base, "repo")
    for part in ("src", "tests"):
        shutil.copytree(HERE.parent / part, os.path.join(repo, part), ignore=shutil.ignore_patterns("__pycache__"))
    return repo


def main() -> None:
    from terminalworld.core import scratch
    from terminalworld.core.records import write_json
    from terminalworld.env import copies
    from terminalworld.env.sandbox import Sandbox, SandboxConfig, bwrap_path, disk_limit_kind, memory_limit_kind

    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--per-round", type=int, default=40, help="commands of each kind per method per round")
    p.add_argument("--out", default=str(HERE / "results" / "sandbox.json"))
    a = p.parse_args()

    repo = make_repo()
    space = contextlib.ExitStack()
    try:
        sandbox = Sandbox(repo, SandboxConfig())
        on_tmpfs = Sandbox(space.enter_context(copies.repo_copy(repo, prefix="tw-bench-copy-")), SandboxConfig())
        bwrap = bwrap_path()
        files = sum(len(f) for _, _, f in os.walk(repo))
        # Both must print the same thing (but the owner's name: the old sandbox ran as host root, to
        # which the repository's owner is "nobody"), or the comparison is not like for like.
        for cmd in COMMANDS.values():
            old = " ".join(run_before(before_argv(bwrap, repo, cmd)).decode().split())
            new = " ".join(sandbox.run(cmd).output.split())
            assert old.replace("nobody nogroup", "root root") == new, (cmd, old, new)
        methods = {
            "before": lambda cmd: run_before(before_argv(bwrap, repo, cmd)),
            "after": sandbox.run,
            "after_no_cgroup": Sandbox(repo, SandboxConfig(memory_cgroup=False)).run,
            "after_tmpfs": on_tmpfs.run,
        }
        rates: dict[str, dict[str, list[float]]] = {m: {c: [] for c in COMMANDS} for m in methods}
        for _ in range(a.rounds):
            for name, cmd in COMMANDS.items():
                for method, fn in methods.items():
                    t0 = time.perf_counter()
                    for _ in range(a.per_round):
                        fn(cmd)
                    rates[method][name].append(a.per_round / (time.perf_counter() - t0))
        # What a copy costs to make and remove: on its own tmpfs, and as the plain folder it was before.
        copy_ms: dict[str, list[float]] = {"tmpfs": [], "plain": []}
        for _ in range(a.rounds * 4):
            t0 = time.perf_counter()
            with copies.repo_copy(repo, prefix="tw-bench-copy-"):
                pass
            t1 = time.perf_counter()
            plain = scratch.make_dir("tw-bench-plain-")
            shutil.copytree(repo, os.path.join(plain, "repo"), symlinks=True)
            scratch.remove_tree(plain)
            copy_ms["tmpfs"].append(1000 * (t1 - t0))
            copy_ms["plain"].append(1000 * (time.perf_counter() - t1))
    finally:
        space.close()
        shutil.rmtree(os.path.dirname(repo), ignore_errors=True)

    rows = []
    for name, cmd in COMMANDS.items():
        before = statistics.median(rates["before"][name])
        after = statistics.median(rates["after"][name])
        plain = statistics.median(rates["after_no_cgroup"][name])
        tmpfs = statistics.median(rates["after_tmpfs"][name])
        rows.append(
            {
                "command": cmd,
                "before_per_s": before,
                "after_per_s": after,
                "added_ms": 1000 / after - 1000 / before,
                "ratio_after_over_before": after / before,
                "after_no_cgroup_per_s": plain,
                "added_ms_no_cgroup": 1000 / plain - 1000 / before,
                "after_tmpfs_per_s": tmpfs,
                "ratio_tmpfs_over_walk": tmpfs / after,
            }
        )
    report = {
        "repo_files": files,
        "cpus": os.cpu_count(),
        "load_avg_1m_at_end": os.getloadavg()[0],
        "host_uid": os.geteuid(),
        "memory_limit": memory_limit_kind(),
        "disk_limit": {
            "after": sandbox.disk_limit_kind,
            "after_tmpfs": on_tmpfs.disk_limit_kind,
            "copies": disk_limit_kind(),
        },
        "copy_make_and_remove_ms": {k: statistics.median(v) for k, v in copy_ms.items()},
        "rounds": a.rounds,
        "per_round": a.per_round,
        "commands": rows,
        "raw_per_s": rates,
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    write_json(a.out, report)
    head = f"{'command':<28} {'before/s':>9} {'after/s':>9} {'added ms':>9} {'no cgroup/s':>12} {'added ms':>9}"
    print(f"{head} {'tmpfs/s':>8} {'tmpfs/walk':>10}")
    for r in rows:
        print(
            f"{r['command']:<28} {r['before_per_s']:>9.1f} {r['after_per_s']:>9.1f} {r['added_ms']:>9.2f}"
            f" {r['after_no_cgroup_per_s']:>12.1f} {r['added_ms_no_cgroup']:>9.2f}"
            f" {r['after_tmpfs_per_s']:>8.1f} {r['ratio_tmpfs_over_walk']:>10.2f}"
        )
    print("a copy made and removed, ms:", {k: round(v, 1) for k, v in report["copy_make_and_remove_ms"].items()})


if __name__ == "__main__":
    main()
