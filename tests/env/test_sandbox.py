import os
import time

import pytest

from terminalworld.env.sandbox import Sandbox, SandboxConfig, truncate_output


@pytest.fixture
def sandbox(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.txt").write_text("hello\n")
    return Sandbox(str(repo), SandboxConfig(timeout_s=2.0))


def test_runs_in_repo_root_with_fixed_environment(sandbox):
    r = sandbox.run("pwd; cat a.txt; echo $HOME $LC_ALL $TZ; ls /nonexistent")
    assert r.output == "/testbed\nhello\n/tmp/home C UTC\nls: cannot access '/nonexistent': No such file or directory\n"
    assert r.returncode == 2 and not r.timed_out


def test_cannot_reach_the_network(sandbox):
    r = sandbox.run("exec 3<>/dev/tcp/1.1.1.1/53 && echo CONNECTED; exec 3<>/dev/tcp/127.0.0.1/22 && echo LOOPBACK")
    assert "CONNECTED" not in r.output and "LOOPBACK" not in r.output
    assert "Network is unreachable" in r.output


def test_cannot_write_outside_its_repo(sandbox, tmp_path):
    marker = tmp_path / "outside.txt"
    r = sandbox.run(
        f"touch /etc/tw-x; touch /usr/tw-x; echo x > {marker}; echo y > /tmp/tw-scratch; echo ok > inside.txt"
    )
    assert r.output.count("Read-only file system") == 2
    assert not marker.exists() and not os.path.exists("/tmp/tw-scratch") and not os.path.exists("/etc/tw-x")
    assert (tmp_path / "repo" / "inside.txt").read_text() == "ok\n"
    # Nothing of the host beyond system directories is visible.
    assert "No such file or directory" in sandbox.run(f"ls {tmp_path}").output


def test_cannot_outlive_its_time_limit(sandbox, tmp_path):
    t0 = time.monotonic()
    r = sandbox.run("(sleep 60; echo late > late.txt) & sleep 60")
    assert r.timed_out and r.returncode == 124 and "timed out after 2 s" in r.output
    assert time.monotonic() - t0 < 5
    time.sleep(0.5)
    assert not (tmp_path / "repo" / "late.txt").exists()
    assert "sleep 60" not in os.popen("ps -eo args").read()


def test_output_flood_is_capped_with_a_visible_note(sandbox):
    r = sandbox.run("yes 0123456789 | head -c 30000")
    assert r.elided_chars == 30000 - 8000
    assert "\n\n... (output truncated, 22000 chars elided) ...\n\n" in r.output
    assert len(r.output) < 8100
    r = sandbox.run("yes")  # endless: stopped by the time limit, memory bounded
    assert r.timed_out and r.elided_chars > 1_000_000 and len(r.output) < 8200


def test_big_files_are_refused(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    r = Sandbox(str(repo), SandboxConfig(max_file_bytes=1 << 20)).run("head -c 5000000 /dev/zero > big; echo rc=$?")
    assert (repo / "big").stat().st_size <= 1 << 20 and "rc=0" not in r.output


def test_truncate_output_matches_swe_zero_layout(fixtures):
    import json
    import re

    rows = json.loads((fixtures / "adp_swe-zero-12m/sample_raw.json").read_text())
    obs = next(m["content"] for r in rows for m in r["messages"] if "chars elided" in m["content"])
    m = re.search(r"\n\n\.\.\. \(output truncated, (\d+) chars elided\) \.\.\.\n\n", obs)
    head, tail = obs[len("Observation: ") : m.start()], obs[m.end() :]
    assert (len(head), len(tail)) == (4000, 4000)
    full = head + "x" * int(m.group(1)) + tail
    assert truncate_output(full, 4000, 4000)[0] == obs[len("Observation: ") :]
