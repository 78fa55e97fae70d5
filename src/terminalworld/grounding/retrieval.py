"""The grounding block: the repository content a command is about, read from a repository state
under a token budget (`retrieved` and `replayed` grounding; docs/manual/stages.md, "Grounding").

`grounding.about.items` says what each simple command of a line is about (the paths it names, the
files its search patterns reach, a `python` command's sources, the files changed since the start
for `git status` and `git diff`), `blocks` reads them, `fit` applies the one budget rule and `delta` replaces a
block a session already saw unchanged. Git never runs on the host and `.git` is never read (a
command could have written its config), search patterns are linear-time RE2
(`grounding.patterns`), never Python's `re`, and what one command's blocks read, hold and diff is
capped (`_Work`), since all of them read what a command wrote.
"""

from __future__ import annotations

import hashlib
import itertools
import posixpath
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from terminalworld.grounding import patterns
from terminalworld.grounding.about import Item
from terminalworld.grounding.state import (
    DIFF_FILE_BYTES,
    MAX_ENTRIES,
    MAX_FILE_BYTES,
    MAX_VISITED,
    MAX_WALK,
    Baseline,
    ShadowReader,
)

HEADER = "Repository content for the next command (not part of its output):"
MAX_REACHED = 50  # files a search may reach before the rest are left out
# What one command's blocks may cost the host, whatever the copy holds (`_Work`).
MAX_READ = 64 << 20  # bytes read from the copy, all files together
MAX_CHARS = 1 << 20  # characters of all its blocks
MAX_PART_CHARS = 256 << 10  # characters of one block
MAX_DIFF_LINES = 1000  # lines of each side of one file that a diff compares: difflib is quadratic
MAX_DIFFED_LINES = 8000  # lines the diffs compare, all files together
CUT_READ = f"[... not read: a command's grounding reads at most {MAX_READ >> 20} MiB]"
CUT_CHARS = f"[... cut: a block holds at most {MAX_PART_CHARS >> 10} KiB and a command's {MAX_CHARS >> 20} MiB]"
CUT_WALK = f"[... more files not looked at: a walk stops at {MAX_WALK:,} files or {MAX_VISITED:,} entries]"


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


@dataclass
class _Work:
    """What one command's blocks may still read from the copy and hold, whatever the copy holds:
    `MAX_READ` bytes read, `MAX_CHARS` characters of blocks (`MAX_PART_CHARS` each), and
    `MAX_DIFFED_LINES` lines diffed. Past a cap, a block says so in a line of its own."""

    reader: ShadowReader
    read_left: int = MAX_READ
    chars_left: int = MAX_CHARS
    diff_left: int = MAX_DIFFED_LINES

    def read(self, rel: str, limit: int = MAX_FILE_BYTES) -> bytes | None:
        """The first `limit` bytes of the regular file at `rel`, whole or not at all (None: not a
        regular file, or more than the reads left)."""
        size = self.reader.size(rel)
        if size is None or min(size, limit, MAX_FILE_BYTES) > self.read_left:
            return None
        data = self.reader.read(rel, limit)
        self.read_left -= len(data or b"")
        return data

    def part(self, header: str, lines: Iterable[str]) -> list[str]:
        """`header` and `lines` (taken lazily) up to the characters left, then the cut's line."""
        cap = min(MAX_PART_CHARS, self.chars_left)
        out, used = [header], len(header) + 1
        for line in lines:
            if used + len(line) + 1 > cap:
                out.append(CUT_CHARS)
                break
            out.append(line)
            used += len(line) + 1
        self.chars_left -= used
        return out


def _file_block(work: _Work, item: Item) -> list[str]:
    kind = work.reader.kind(item.path)
    if kind is None:
        return [f"==> {item.path} <==", "(no such file or directory)"]
    if kind == "dir":
        return _folder_block(work, item.path)
    if kind != "file":
        return [f"==> {item.path} <==", "(not a regular file)"]
    data = work.read(item.path)
    if data is None:
        return [f"==> {item.path} <==", CUT_READ]
    lines = _text(data).splitlines()
    size = f"{len(lines)} lines, {len(data)} bytes"
    if item.lines is None:
        return work.part(f"==> {item.path} ({size}) <==", lines)
    a, b = item.lines
    if a < 0:
        a = max(1, len(lines) + a + 1)
    b = len(lines) if b is None else min(b, len(lines))
    return work.part(f"==> {item.path} (lines {a}-{b} of {size}) <==", lines[a - 1 : b])


def _folder_block(work: _Work, path: str) -> list[str]:
    listed = work.reader.listdir(path, MAX_ENTRIES + 1)
    more = len(listed) > MAX_ENTRIES
    entries = []
    for name, kind in listed[:MAX_ENTRIES]:
        rel = name if path == "." else f"{path}/{name}"
        if kind == "dir":
            entries.append(name + "/")
        elif kind == "file":
            entries.append(f"{name} ({work.reader.size(rel) or 0} bytes)")
        else:
            entries.append(name + " (link or special file)")
    count = (
        f"more than {MAX_ENTRIES:,} entries, the first {MAX_ENTRIES:,} listed" if more else f"{len(entries)} entries"
    )
    return work.part(f"==> {path}/ (folder, {count}) <==", entries)


def _tree_block(work: _Work, item: Item) -> list[str]:
    if work.reader.kind(item.path) != "dir":
        return _file_block(work, Item("file", item.path))
    files, cut = work.reader.files(item.path)
    if item.pattern is not None:
        files = [f for f in files if item.pattern.fullmatch(posixpath.basename(f))]
    what = "files whose name matches" if item.pattern is not None else "every file"
    return work.part(f"==> {item.path}/ ({what}, {len(files)}) <==", [*files, *([CUT_WALK] if cut else [])])


def _match_blocks(work: _Work, item: Item) -> list[list[str]]:
    kind = work.reader.kind(item.path)
    if kind is None:
        return [[f"==> {item.path} <==", "(no such file or directory)"]]
    files, cut = ([item.path], False) if kind == "file" else work.reader.files(item.path)
    include, exclude = [patterns.glob(g) for g in item.include], [patterns.glob(g) for g in item.exclude]
    blocks = []
    for f in files:
        base = posixpath.basename(f)
        if (include and not any(g.fullmatch(base) for g in include)) or any(g.fullmatch(base) for g in exclude):
            continue
        if work.chars_left <= 0:
            break
        data = work.read(f)
        if data is None:
            if work.reader.size(f) is not None:  # a regular file past the reads left
                blocks.append([f"==> {item.path} (search) <==", CUT_READ])
                break
            continue
        if _binary(data):
            continue
        hits = patterns.matching_lines(item.pattern, _text(data))
        part = work.part(f"==> {f} (matching lines) <==", (f"{n}:{x}" for n, x in hits))
        if len(part) > 1:
            blocks.append(part)
        if len(blocks) >= MAX_REACHED:
            break
    else:
        if cut:
            blocks.append([f"==> {item.path} (search) <==", CUT_WALK])
    return blocks


def _binary(data: bytes) -> bool:
    return b"\0" in data[:8192]


def _changes_block(work: _Work, item: Item, baseline: Baseline) -> list[str]:
    """The files changed since the episode began (under the item's paths), and with `diff` their
    changed lines as a unified diff: computed on the host from the two states, never by git."""
    roots = item.path.split(",")
    under = [r for r in roots if r != "."]

    def inside(f: str) -> bool:
        return not under or any(f == r or f.startswith(r.rstrip("/") + "/") for r in under)

    states: dict[str, str] = {}
    unknown = 0
    for f in sorted(filter(inside, baseline.files)):
        size = work.reader.size(f)
        if size is None:
            states[f] = "deleted"
        elif (changed := baseline.changed(f, size, lambda f=f: work.read(f))) is None:
            unknown += 1
        elif changed:
            states[f] = "modified"
    now, cut = work.reader.files(".")
    states |= {f: "new file" for f in now if inside(f) and f not in baseline.files}
    notes = [f"[... {unknown} files not compared: {CUT_READ.strip('[].')}]"] if unknown else []
    notes += [CUT_WALK] if cut else []
    if not states:
        return ["==> changes since the last commit <==", "(none)", *notes]
    changed = sorted(states)
    listing = [f"{states[f]}: {f}" for f in changed]
    diffs = _diffs(work, baseline, [(f, states[f]) for f in changed]) if item.diff else iter(())
    return work.part("==> changes since the last commit <==", itertools.chain(listing, notes, diffs))


def _diffs(work: _Work, baseline: Baseline, changed: list[tuple[str, str]]) -> Iterator[str]:
    """The unified diff of each changed file, taken lazily, each side at most `DIFF_FILE_BYTES` and
    `MAX_DIFF_LINES` lines (difflib is quadratic), `MAX_DIFFED_LINES` lines in all."""
    import difflib

    for at, (f, state) in enumerate(changed):
        if work.diff_left <= 0:
            yield f"[... the diffs of {len(changed) - at} more files not shown: {MAX_DIFFED_LINES:,} lines diffed]"
            return
        old = b"" if state == "new file" else baseline.text.get(f)
        new = b"" if state == "deleted" else work.read(f, DIFF_FILE_BYTES)
        if old is None or new is None:
            why = "its start is not kept" if old is None else CUT_READ.strip("[].")
            yield f"[diff of {f} not shown: {why}]"
            continue
        if _binary(old) or _binary(new):
            yield f"Binary files a/{f} and b/{f} differ"
            continue
        a, b = _text(old).splitlines(), _text(new).splitlines()
        sizes = (baseline.files.get(f, (0, None))[0], work.reader.size(f) or 0)
        whole = max(len(a), len(b)) <= MAX_DIFF_LINES and max(sizes) <= DIFF_FILE_BYTES
        a, b = a[:MAX_DIFF_LINES], b[:MAX_DIFF_LINES]
        work.diff_left -= len(a) + len(b)
        yield from difflib.unified_diff(a, b, f"a/{f}", f"b/{f}", lineterm="")
        if not whole:
            yield f"[... the diff of {f} compares its first {MAX_DIFF_LINES:,} lines or {DIFF_FILE_BYTES >> 10} KiB only]"


def blocks(reader: ShadowReader, found: list[Item], baseline: Baseline | None = None) -> list[list[str]]:
    """Each item's block of lines (its header first), in order; `changes` items need the state the
    episode began with (`baseline`) and are left out without it. The work is bounded whatever the
    copy holds (`_Work`)."""
    work = _Work(reader)
    out: list[list[str]] = []
    for it in found:
        if work.chars_left <= 0:
            out.append([f"==> {it.path} <==", CUT_CHARS])
        elif it.kind == "changes":
            if baseline is not None:
                out.append(_changes_block(work, it, baseline))
        elif it.kind == "matches":
            out += _match_blocks(work, it)
        elif it.kind == "tree":
            out.append(_tree_block(work, it))
        elif it.kind == "optional":
            if reader.kind(it.path) == "file":
                out.append(_file_block(work, it))
        else:
            out.append(_file_block(work, it))
    return out


@dataclass
class Budgeted:
    """A grounding block and how the budget shaped it."""

    text: str
    tokens: int
    blocks: int
    cut: bool
    left_out: list[str] = field(default_factory=list)


def fit(parts: list[list[str]], *, budget: int, count: Callable[[str], int]) -> Budgeted:
    """The module's budget rule over `parts` (each a header line and its lines)."""
    kept = [HEADER]
    used = count(HEADER + "\n")
    cut, left, shown = False, [], 0
    for part in parts:
        if cut:
            left.append(part[0].removeprefix("==> ").split(" ")[0])
            continue
        text = "\n".join(part) + "\n"
        need = count(text)
        if used + need <= budget:
            kept.append(text.rstrip("\n"))
            used += need
            shown += 1
            continue
        lo, hi = 0, len(part)  # the most lines (header included) that fit, by bisection
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if used + count("\n".join(part[:mid]) + "\n[... 00000 more lines not shown]\n") <= budget:
                lo = mid
            else:
                hi = mid - 1
        if lo:
            kept.append("\n".join(part[:lo]) + f"\n[... {len(part) - lo} more lines not shown]")
            shown += 1
        else:
            left.append(part[0].removeprefix("==> ").split(" ")[0])
        cut = True
    if left:
        kept.append(f"[not shown: {', '.join(left)}]")
    text = "\n".join(kept)
    return Budgeted(text, count(text), shown, cut, left)


def delta(parts: list[list[str]], seen: dict[str, str]) -> list[list[str]]:
    """`parts` with each block already shown unchanged in this session replaced by one line; `seen`
    (header's path → content digest) is updated."""
    out = []
    for part in parts:
        key = part[0]
        digest = hashlib.sha256("\n".join(part).encode()).hexdigest()
        if seen.get(key) == digest:
            out.append([key.removesuffix(" <==") + " <== unchanged, shown above"])
        else:
            seen[key] = digest
            out.append(part)
    return out
