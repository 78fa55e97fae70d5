"""The sandbox stays the OOM killer's first pick: a host with CAP_SYS_RESOURCE (root, unless its
container dropped it) makes 1000 the floor of every sandboxed process's `oom_score_adj`; any other
host only starts it at 1000, which a command may lower to 0 (see `env.launch`)."""

import pytest

CAP_SYS_RESOURCE = 24


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


def test_a_command_starts_as_the_oom_killers_first_pick(sandbox):
    assert sandbox.run("cat /proc/self/oom_score_adj").output == "1000\n"
