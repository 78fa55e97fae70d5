"""The host's work on a grounding block is bounded whatever a command left in the copy: a copy
filled to 64 MiB of short-line files (the shape that cost 1.9 GiB, about 30x, when `git diff` read
every file and diffed each in memory) is grounded for `git diff`, `git status`, a search, a listing,
a walk and a `cat` in a child process whose peak resident memory is measured.

The bound, 300 MiB above the child's peak before grounding, is the caps' sum with room: reads of at
most 1 MiB a file held one at a time, the start's kept text (`BASELINE_TEXT`, 32 MiB), the blocks
(`MAX_CHARS`, 1 MiB of characters: tens of MiB as lists of short lines), one file's lines and a
diff of `MAX_DIFF_LINES` lines a side, and the allocator's slack."""

import json
import subprocess
import sys

from terminalworld.grounding.retrieval import CUT_CHARS, MAX_CHARS, MAX_PART_CHARS

COPY_BYTES = 64 << 20
BOUND = 300 << 20
COMMANDS = ["git diff", "git status", "grep -rn z .", "grep -rn nothing .", "ls -la n0", "find . -name '*.txt'"]
COMMANDS += ["cat d0/s0.txt", "git diff d0"]

CHILD = r"""
import json, resource, sys
from pathlib import Path
from terminalworld.grounding import about, retrieval
from terminalworld.grounding.state import ShadowReader, baseline_of

root, total, commands = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
size, start = 256 << 10, 64
peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
for i in range(start):  # the repository as the episode began: 16 MiB of one-character lines
    (root / f"d{i % 8}").mkdir(parents=True, exist_ok=True)
    (root / f"d{i % 8}" / f"s{i}.txt").write_bytes(b"x\n" * (size // 2))
before = peak()
reader = ShadowReader(root)
baseline = baseline_of(reader)
for i in range(start):  # what a command leaves: every file rewritten, new ones up to the cap
    (root / f"d{i % 8}" / f"s{i}.txt").write_bytes(b"y\n" * (size // 2))
for i in range(total // size - start):
    (root / f"n{i % 16}").mkdir(exist_ok=True)
    (root / f"n{i % 16}" / f"n{i}.txt").write_bytes(b"z\n" * (size // 2))
blocks = {c: retrieval.blocks(reader, about.items(c), baseline) for c in commands}
fitted = {c: retrieval.fit(b, budget=2048, count=lambda s: len(s) // 4).tokens for c, b in blocks.items()}
print(json.dumps({"growth": peak() - before, "blocks": blocks, "fitted": fitted}))
"""


def test_a_full_copy_costs_the_host_bounded_memory_and_block_sizes(tmp_path):
    run = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "copy"), str(COPY_BYTES), *COMMANDS],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout)
    assert out["growth"] < BOUND, f"{out['growth'] >> 20} MiB"
    for command, parts in out["blocks"].items():
        chars = [sum(len(line) + 1 for line in part) for part in parts]
        assert all(c <= MAX_PART_CHARS + len(CUT_CHARS) + 1 for c in chars), command
        assert sum(chars) <= MAX_CHARS + len(parts) * 200, command
        assert out["fitted"][command] <= 2048 + 100, command
    diff = out["blocks"]["git diff"]
    assert len(diff) == 1 and "modified: d0/s0.txt" in diff[0] and "new file: n0/n0.txt" in diff[0]
    assert diff[0][-1].startswith("[... the diffs of ") and "-x" in diff[0] and "+y" in diff[0]
    assert out["blocks"]["cat d0/s0.txt"][0][-1] == CUT_CHARS  # a 256 KiB file of short lines is cut
    assert [p[-1] for p in out["blocks"]["grep -rn z ."]][-1] == CUT_CHARS
    assert out["blocks"]["grep -rn nothing ."] == []
