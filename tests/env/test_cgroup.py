"""Which cgroup hierarchy holds the memory controller, and what a group writes in each.

This host is v1 for memory, so the v2 writer is checked only against a folder laid out like a v2
parent group: what it writes, not that a v2 kernel enforces it."""

import os
from pathlib import Path

import pytest

from terminalworld.env import cgroup
from terminalworld.env.sandbox import memory_limit_kind

V1 = "12:memory:/jobs/a\n11:pids:/jobs/a\n0::/jobs/a\n"
V2 = "0::/user.slice/run-1.scope\n"
MOUNTS = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n31 23 0:27 / /proc rw - proc proc rw\n"


def test_the_hierarchy_that_lists_memory_is_chosen():
    assert cgroup.locate(V1, MOUNTS) == cgroup.Hierarchy(1, "/sys/fs/cgroup/memory/jobs/a")  # hybrid: v1 holds it
    assert cgroup.locate(V2, MOUNTS) == cgroup.Hierarchy(2, "/sys/fs/cgroup/user.slice/run-1.scope")
    assert cgroup.locate("0::/\n", MOUNTS) == cgroup.Hierarchy(2, "/sys/fs/cgroup")
    assert cgroup.locate(V2, "31 23 0:27 / /proc rw - proc proc rw\n") is None  # no cgroup2 mounted
    assert cgroup.locate("11:pids:/a\n", MOUNTS) is None


def test_this_host_is_v1_for_memory():
    with open("/proc/self/cgroup") as f:
        own = f.read()
    with open("/proc/self/mountinfo") as f:
        found = cgroup.locate(own, f.read())
    assert found is not None and found.version == 1 and found.parent.startswith("/sys/fs/cgroup/memory")
    if os.geteuid() == 0:
        assert cgroup.hierarchy() == found and memory_limit_kind() == "cgroup-v1"
    else:
        assert cgroup.hierarchy() is None and memory_limit_kind() == "rlimit"


def test_a_v2_group_writes_its_limit_no_swap_and_its_process(tmp_path):
    group = cgroup.Group(64 << 20, cgroup.Hierarchy(2, str(tmp_path)))
    group.add(4242)
    written = {name: (tmp_path / group.dir / name).read_text() for name in os.listdir(group.dir)}
    assert written == {"memory.max": str(64 << 20), "memory.swap.max": "0", "cgroup.procs": "4242"}
    with open(f"{group.dir}/memory.events", "w") as f:
        f.write("low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n")
    assert group.oom_kills() == 2
    for name in os.listdir(group.dir):
        os.unlink(f"{group.dir}/{name}")  # the kernel empties a group whose processes are gone
    group.stop()
    assert not os.path.exists(group.dir)


def test_empty_groups_of_dead_processes_are_swept(tmp_path):
    where = cgroup.Hierarchy(2, str(tmp_path))
    dead = tmp_path / "tw-999999999-0"
    dead.mkdir()
    (tmp_path / f"tw-{os.getpid()}-99").mkdir()
    cgroup.sweep(where)
    assert sorted(os.listdir(tmp_path)) == [f"tw-{os.getpid()}-99"]


@pytest.mark.skipif(os.geteuid() != 0, reason="creating a v1 group needs root")
def test_a_v1_group_is_removed_once_empty():
    group = cgroup.Group(64 << 20)
    assert group.version == 1 and Path(group.dir, "memory.limit_in_bytes").read_text().strip() == str(64 << 20)
    group.stop()
    assert not os.path.exists(group.dir)
