"""The disk cap a sandbox measures itself (the `walk` kind: folders the kernel does not cap).

The folders are measured by `env.walk` (each name 4 KiB, each inode's blocks once) with the access
the host uid needs: a non-root host gives itself, for one call, the bit a command took from a folder
it owns. While a command runs, the files its processes hold open after unlinking them count too;
after it, what the folders hold is the next command's start. `file_budget` is what is left of the
cap, which the sandbox sets as RLIMIT_FSIZE, so no single file outgrows it between two polls.
"""

from __future__ import annotations

import os

from terminalworld.env import launch, walk


class WalkedCap:
    """Growth of `folders` past `cap` bytes since `claim`, measured by walks."""

    def __init__(self, folders: list[str], cap: int):
        self.folders, self.cap = folders, cap
        self.claim()

    def _bytes(self, *, unlock: bool) -> int:
        return sum(walk.tree_bytes(p, unlock=unlock) for p in self.folders)

    def claim(self) -> None:
        """Take what the folders hold now as the base (only while no command runs)."""
        self.base = self.last = self._bytes(unlock=True)
        self.devices = {os.stat(p).st_dev for p in self.folders}

    def over_while_running(self, started: launch.Launched) -> bool:
        """Whether the folders, with the unlinked files `started`'s processes hold open, grew past the
        cap (a tree moved under the walk is measured again at the next poll, and once it is gone)."""
        try:
            held = started.unlinked_open_bytes(self.devices)
            return self._bytes(unlock=os.geteuid() != 0) + held - self.base > self.cap
        except walk.TreeChanged:
            return False

    def over_after(self) -> bool:
        """Whether the folders grew past the cap, once no command runs; a tree no walk can finish
        (a folder whose mode the host could not change) counts as over."""
        try:
            self.last = self._bytes(unlock=os.geteuid() != 0)
        except walk.TreeChanged:
            self.last = self.base + self.cap + 1
        return self.last - self.base > self.cap

    def file_budget(self) -> int:
        """What is left of the cap after the last command."""
        return max(0, self.cap - (self.last - self.base))
