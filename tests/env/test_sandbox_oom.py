"""The sandbox stays the OOM killer's first pick: a caller with CAP_SYS_RESOURCE (root, unless its
container or VM dropped it) makes 1000 the floor of every sandboxed process's `oom_score_adj`; any
other caller only starts it at 1000, and a command may lower it to the caller's own floor, the
lowest value the caller itself may set, never below (see `env.launch`)."""

import subprocess

import pytest

CAP_SYS_RESOURCE = 24
TRIED = (-1000, -1, 0, 999)


def _has_sys_resource() -> bool:
    with open("/proc/self/status") as f:
        eff = next(int(line.split()[1], 16) for line in f if line.startswith("CapEff:"))
    return bool(eff >> CAP_SYS_RESOURCE & 1)


@pytest.mark.skipif(not _has_sys_resource(), reason="only a host with CAP_SYS_RESOURCE sets the floor")
def test_a_command_cannot_leave_the_oom_killers_first_place(sandbox):
    r = sandbox.run(
        "echo 0 > /proc/self/oom_score_adj; cat /proc/self/oom_score_adj; sh -c 'cat /proc/self/oom_score_adj'"
    )
    assert r.output.endswith("1000\n1000\n") and "Permission denied" in r.output


@pytest.mark.skipif(_has_sys_resource(), reason="a host with CAP_SYS_RESOURCE sets a floor of 1000")
def test_a_command_goes_no_lower_than_its_caller_may(sandbox):
    # Each value tried from 1000 in a subshell of its own, inside, and by a child of the caller.
    tries = "; ".join(
        f"(echo {v} > /proc/self/oom_score_adj) 2>/dev/null && echo {v} yes || echo {v} no" for v in TRIED
    )
    inside = dict(line.split() for line in sandbox.run(tries).output.splitlines())
    host = {}
    for v in TRIED:
        child = subprocess.run(["sh", "-c", f"echo {v} > /proc/self/oom_score_adj"], capture_output=True)
        host[str(v)] = "yes" if child.returncode == 0 else "no"
    assert inside == host


def test_a_command_starts_as_the_oom_killers_first_pick(sandbox):
    assert sandbox.run("cat /proc/self/oom_score_adj").output == "1000\n"
