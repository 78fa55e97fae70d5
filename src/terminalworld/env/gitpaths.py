"""Which entries of a folder git runs or reads as configuration, so that no write-back hands one to
the operator's git.

A git folder is one named `.git`, or one holding an entry named `HEAD`: git takes a folder with
`HEAD`, `objects` and `refs` for a (bare) repository, and a `commondir` file can stand for the last
two, so `HEAD` alone is the conservative test. In a git folder git reads as configuration, or runs:
`config` and `config.worktree` (fsmonitor, aliases, `core.*` commands, filter and diff drivers,
includes), the `commondir` and `gitdir` pointers, `info/attributes`, `objects/info/alternates` and
`http-alternates`, and everything under `hooks/`, `remotes/` and `branches/` (remotes defined outside
the config), and `rebase-merge/`, `rebase-apply/` and `sequencer/` (what a `--continue` carries out,
`exec` lines included). Under `modules/` and `worktrees/`, which hold git folders of their own under
names of any depth, each of these counts wherever it appears. An entry named `.git` (a folder, or a
file naming a git folder elsewhere) counts itself. `info/exclude` is only patterns and is not
listed; worktree files (`.gitattributes`, `.gitmodules`) are data (docs/manual/sandbox.md says why).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

_FILES = {"config", "config.worktree", "commondir", "gitdir"}
_TREES = {"hooks", "remotes", "branches", "rebase-merge", "rebase-apply", "sequencer"}
_TAILS = [("info", "attributes"), ("objects", "info", "alternates"), ("objects", "info", "http-alternates")]
_NESTED = {"modules", "worktrees"}


def anchors(path: Sequence[str]) -> set[int]:
    """The lengths of the prefixes of `path` (an entry's names below the top) that would make git read
    the entry as configuration if that prefix were a git folder."""
    n = len(path)
    starts = {i for i, part in enumerate(path) if part in _TREES}
    if n and path[-1] in _FILES:
        starts.add(n - 1)
    starts |= {n - len(tail) for tail in _TAILS if n >= len(tail) and tuple(path[n - len(tail) :]) == tail}
    nested = {i for i, part in enumerate(path) if part in _NESTED and any(s >= i + 2 for s in starts)}
    return starts | nested


def git_folder(folder: Sequence[str], heads: Collection[tuple[str, ...]]) -> bool:
    """Whether `folder` (names below the top) is a git folder, `heads` holding every folder that
    holds an entry named `HEAD`."""
    return (bool(folder) and folder[-1] == ".git") or tuple(folder) in heads


def controlled(path: Sequence[str], heads: Collection[tuple[str, ...]]) -> bool:
    """Whether git runs or reads entry `path` (names below the top) as configuration (see `git_folder`
    for `heads`)."""
    return path[-1] == ".git" or any(git_folder(path[:a], heads) for a in anchors(path))
