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

The operator's own configuration (system, global, the repository's, and every file any of them
includes, whether or not its condition holds now) can name entries anywhere in the folder, and each
of those counts too (`configured`, asked of the host's git before anything is written back): the
folder `core.hooksPath` names with everything under it; each include target and each file the
listing came from; `core.attributesFile`; and for every other key, each word of its value that is a
path (holding a `/`) or names an existing entry, resolved against the top of the worktree (where git
runs hooks, aliases and drivers) and the folder itself, and through the folder's symlinks as they
are before the write-back. So do the folders on the way to each, and a named entry's symlinked
hooks. Refspecs, `safe.directory`, `core.excludesFile` and a branch's upstream are only data.
"""

from __future__ import annotations

import os
import re
import select
import subprocess
import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field

from terminalworld.errors import InputError

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


@dataclass(frozen=True)
class Named:
    """Entries below a folder's top that the operator's git configuration names: each of `trees`
    with everything under it, each of `entries` alone."""

    trees: frozenset[tuple[str, ...]] = frozenset()
    entries: frozenset[tuple[str, ...]] = frozenset()
    _depth: int = field(init=False, repr=False, compare=False, default=-1)

    def __post_init__(self):
        object.__setattr__(self, "_depth", max(map(len, self.trees), default=-1))

    def covers(self, path: Sequence[str]) -> bool:
        """Whether `path` (its parts under DIR) is named, or lies under a named folder."""
        path = tuple(path)
        return path in self.entries or any(path[:i] in self.trees for i in range(min(len(path), self._depth) + 1))


NOTHING = Named()


def controlled(path: Sequence[str], heads: Collection[tuple[str, ...]], named: Named = NOTHING) -> bool:
    """Whether git runs or reads entry `path` (names below the top) as configuration (see `git_folder`
    for `heads`; `named`: what the operator's configuration names, from `configured`)."""
    return path[-1] == ".git" or named.covers(path) or any(git_folder(path[:a], heads) for a in anchors(path))


LISTING_BYTES = 1 << 20  # of `git config --list` output, all listings together
MAX_NAMED = 4096  # entries a configuration may name in one folder
MAX_FILES = 64  # config files listed on their own (include targets whose condition does not hold now)
TIMEOUT_S = 20.0  # for every git run of one `configured` together
_HOOKS = "core.hookspath"  # git lists section and key names in lower case
_INCLUDE = re.compile(r"(include|includeif\..*)\.path")
_FILE_KEYS = {"core.attributesfile"}
# Values git only compares or hands to a remote, never runs or reads as a path in the worktree.
_DATA = re.compile(r"remote\..*\.(fetch|push)|branch\..*\.(merge|remote|pushremote)|safe\.directory|core\.excludesfile")
_WORDS = re.compile(r"[^\s;&|()<>'\"`=!$:,{}]+")  # a value's words, split where a shell would split a command
# Variables that would make `git -C DIR` read another repository than the operator's git in DIR,
# or leave out the system configuration their git may read.
_OTHER_REPO = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_CONFIG_NOSYSTEM")


def configured(folder: str) -> Named:
    """What the host's git configuration in `folder` (the operator's, as the environment makes it)
    names below `folder`, as the module docstring says. Runs only `git config` and `git rev-parse`,
    which run no hook, fsmonitor or driver, so `folder` must still hold the operator's own state.
    Raises `InputError` when git fails, is too slow or says too much, or names more than `MAX_NAMED`
    entries or `MAX_FILES` files to list. No git at all: nothing is named, as no git runs anything."""
    top = os.path.abspath(folder)
    git = _Git(top)
    try:
        lines = os.fsdecode(git.run("rev-parse", "--absolute-git-dir", "--show-toplevel", check=False)).splitlines()
    except FileNotFoundError:
        return NOTHING
    # Where git runs what it runs and resolves relative origins (the worktree's top, or a bare
    # repository's folder; `--show-toplevel` fails there), and the folder itself.
    bases = list(dict.fromkeys([lines[-1] if lines else top, top]))
    found = _Found(top)
    for path in _defaults():  # read whenever they exist, so a command must not create one
        found.add(path, "entry")
    listed: set[str] = set()
    queue: list[str | None] = [None]  # the effective configuration, then each include target on its own
    while queue:
        target = queue.pop(0)
        args = ("--file", target, "--includes") if target else ()
        targets = []
        for origin, key, value in _entries(git.run("config", *args, "--show-scope", "--show-origin", "--list", "-z")):
            if origin is not None:
                origin = os.path.join(bases[0], origin)
                listed.add(os.path.realpath(origin))
                found.add(origin, "entry")
            if value is None:
                continue
            if _INCLUDE.fullmatch(key):
                if origin is None and not os.path.isabs(os.path.expanduser(value)):
                    continue  # git refuses a relative include from the command line
                path = os.path.join(os.path.dirname(origin or top), os.path.expanduser(value))
                found.add(path, "entry")
                targets.append(path)
            elif key == _HOOKS or key in _FILE_KEYS:
                for base in bases:
                    found.add(os.path.join(base, os.path.expanduser(value)), "hooks" if key == _HOOKS else "entry")
            elif not _DATA.fullmatch(key):
                for word in _WORDS.findall(value):
                    for base in bases:
                        found.word(os.path.join(base, os.path.expanduser(word)), slash="/" in word)
        # A target not listed yet (its condition does not hold now, as an `onbranch:` one's may after
        # the command's checkout) is listed on its own, with what it includes.
        for path in targets:
            if os.path.isfile(path) and (real := os.path.realpath(path)) not in listed:
                if len(listed) >= MAX_FILES:
                    raise InputError(f"the git configuration of {top} includes more than {MAX_FILES} files")
                listed.add(real)
                queue.append(os.path.abspath(path))
    return found.named()


def _defaults() -> Iterator[str]:
    """The files git reads as global or system configuration (or attributes) whenever they exist."""
    env = os.environ
    xdg = env.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    yield env.get("GIT_CONFIG_GLOBAL") or os.path.expanduser("~/.gitconfig")
    yield from (os.path.join(xdg, "git", name) for name in ("config", "attributes"))
    yield env.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig"


def _entries(out: bytes) -> Iterator[tuple[str | None, str, str | None]]:
    """(origin file or None, key, value or None) of each entry of a `--show-scope --show-origin -z`
    listing."""
    fields = os.fsdecode(out).split("\0")
    for i in range(0, len(fields) - 2, 3):
        _scope, origin, item = fields[i : i + 3]
        key, newline, value = item.partition("\n")
        yield origin.removeprefix("file:") if origin.startswith("file:") else None, key, value if newline else None


class _Git:
    """The host's git in a folder, bounded in time and in what it may print."""

    def __init__(self, folder: str):
        self.folder, self.deadline, self.left = folder, time.monotonic() + TIMEOUT_S, LISTING_BYTES
        self.env = {k: v for k, v in os.environ.items() if k not in _OTHER_REPO}
        self.env |= {"GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}

    def run(self, *args: str, check: bool = True) -> bytes:
        """git's standard output for `args`; raises `FileNotFoundError` when there is no git."""
        # safe.directory: in a folder another user owns git reads no repository configuration, while
        # that user's git would; listing it runs nothing.
        argv = ["git", "-c", "safe.directory=*", "-C", self.folder, *args]
        pipe, null = subprocess.PIPE, subprocess.DEVNULL
        proc = subprocess.Popen(argv, stdin=null, stdout=pipe, stderr=null, env=self.env)
        chunks = []
        try:
            while True:
                left = self.deadline - time.monotonic()
                if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
                    raise subprocess.TimeoutExpired(argv, TIMEOUT_S)
                if not (chunk := os.read(proc.stdout.fileno(), 1 << 16)):
                    break
                self.left -= len(chunk)
                if self.left < 0:
                    raise InputError(
                        f"the git configuration of {self.folder} lists more than {LISTING_BYTES >> 20} MiB"
                    )
                chunks.append(chunk)
            status = proc.wait(max(self.deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            raise InputError(f"git did not list the configuration of {self.folder} within {TIMEOUT_S:g} s") from None
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
        if check and status != 0:
            raise InputError(f"git cannot list the configuration of {self.folder} (exit {status})")
        return b"".join(chunks)


class _Found:
    """Entries named so far, as names below the folder's top."""

    def __init__(self, top: str):
        self.tops, self.trees, self.entries = (top, os.path.realpath(top)), set(), set()

    def _below(self, path: str) -> set[tuple[str, ...]]:
        """`path` (absolute) below the top, as written and through the symlinks it passes."""
        found = set()
        for p in {os.path.normpath(path), os.path.realpath(path)}:
            for t in self.tops:
                if p == t:
                    found.add(())
                elif p.startswith(t.rstrip("/") + "/"):
                    found.add(tuple(p[len(t.rstrip("/")) + 1 :].split("/")))
        return found

    def add(self, path: str, kind: str) -> None:
        """`path` as an `entry`, a `tree` (with everything under it) or the `hooks` folder (a tree
        that may be the top itself, whose symlinks' targets count too)."""
        for below in self._below(path):
            if below or kind == "hooks":  # a hooks folder at the top makes every entry a hook
                (self.entries if kind == "entry" else self.trees).add(below)
                self.entries.update(below[:i] for i in range(1, len(below)))
        if len(self.trees) + len(self.entries) > MAX_NAMED:
            raise InputError(f"the git configuration of {self.tops[0]} names more than {MAX_NAMED} entries in it")
        if kind == "hooks" and os.path.isdir(path):
            with os.scandir(path) as hooks:
                for i, hook in enumerate(hooks):
                    if i >= MAX_NAMED:
                        raise InputError(f"the hooks folder {path} holds more than {MAX_NAMED} entries")
                    if hook.is_symlink():  # git runs what it points to
                        self.add(os.path.realpath(hook.path), "entry")

    def word(self, path: str, *, slash: bool) -> None:
        """A word of a value: a path (`slash`) counts wherever it leads, any other word only when it
        names an existing entry; a folder a path names counts with everything under it."""
        if slash or os.path.lexists(path):
            self.add(path, "tree" if slash and os.path.isdir(path) else "entry")

    def named(self) -> Named:
        return Named(frozenset(self.trees), frozenset(self.entries))
