"""What a command is about: for each simple command of a line, the paths it names, the files its
search patterns reach, a `python` command's sources, and the changes `git status` and `git diff`
report (`items`), as the grounding block reads them (`grounding.retrieval`). Parsing only: nothing
here reads the copy.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from terminalworld.core.routing import program, simple_commands
from terminalworld.grounding import patterns

WORKDIRS = ("/testbed/",)
_TAKES_VALUE = {
    "head": {"-n", "-c"},
    "tail": {"-n", "-c"},
    "sed": {"-e", "-f", "-l"},
    "awk": {"-f", "-v", "-F"},
    "gawk": {"-f", "-v", "-F"},
    "sort": {"-k", "-t", "-o"},
    "cut": {"-d", "-f", "-c", "-b"},
    "nl": {"-b", "-w", "-s", "-v", "-i"},
    "diff": {"-U", "-C"},
}
_RANGE_SED = re.compile(r"^(\d+)(?:,(\d+|\$))?p$")


@dataclass(frozen=True)
class Item:
    """One thing a command is about."""

    kind: str  # file, tree, matches, changes, or optional (a file shown only when it exists)
    path: str
    lines: tuple[int, int | None] | None = None  # 1-based inclusive range of a file, None: whole
    pattern: patterns.Matcher | None = None  # matches: the search; tree: the name glob (`grounding.patterns`)
    include: tuple[str, ...] = ()  # matches: grep's --include globs
    exclude: tuple[str, ...] = ()
    diff: bool = False  # changes: the changed lines too, not only the changed paths


def _norm(path: str, cwd: str) -> str | None:
    for w in WORKDIRS:
        if path.startswith(w) or path == w.rstrip("/"):
            path = path[len(w) :] or "."
            break
    else:
        if path.startswith("/"):
            return None
        path = posixpath.join(cwd, path)
    path = posixpath.normpath(path)
    return None if path.startswith("..") else path


def grep_pattern(args: list[str]) -> tuple[patterns.Matcher | None, list[str], dict[str, list[str]], bool]:
    """(pattern, path arguments, include/exclude globs, recursive) of a grep command."""
    flags, found, rest, globs, i = set(), [], [], {"include": [], "exclude": []}, 0
    with_value = {"-e", "-f", "-A", "-B", "-C", "-m", "--max-count", "--context"}
    while i < len(args):
        a = args[i]
        if a in ("-e", "--regexp"):
            found.append(args[i + 1] if i + 1 < len(args) else "")
            i += 2
            continue
        if a.startswith("--include=") or a.startswith("--exclude="):
            key, _, value = a[2:].partition("=")
            globs[key].append(value)
        elif a in with_value:
            i += 1
        elif a.startswith("--"):
            flags.add(a)
        elif a.startswith("-") and len(a) > 1:
            flags.update(a[1:])
        else:
            rest.append(a)
        i += 1
    if not found and rest:
        found.append(rest.pop(0))
    if not found:
        return None, rest, globs, False
    fixed = "F" in flags or "--fixed-strings" in flags
    ere = "E" in flags or "--extended-regexp" in flags
    fold, words = "i" in flags or "--ignore-case" in flags, "w" in flags or "--word-regexp" in flags
    regex = patterns.grep(found, fixed=fixed, extended=ere, fold=fold, words=words)
    recursive = bool({"r", "R", "--recursive"} & flags)
    return regex, rest, globs, recursive


def _int(digits: str) -> int:
    """A line number as typed, capped: Python refuses to convert more than 4,300 digits."""
    return int(digits) if len(digits) <= 18 else 10**18


def _range(name: str, args: list[str]) -> tuple[int, int | None] | None:
    """The line range `sed -n 'A,Bp'`, `head -n K` or `tail -n K` (negative start: from the end) reads."""
    if name == "sed" and "-n" in args:
        for a in args:
            if m := _RANGE_SED.match(a):
                b = m.group(2)
                return _int(m.group(1)), None if b == "$" else _int(b or m.group(1))
    if name in ("head", "tail"):
        k = 10
        for i, a in enumerate(args):
            if a == "-n" and i + 1 < len(args) and args[i + 1].lstrip("+-").isdigit():
                k = _int(args[i + 1].lstrip("+-"))
            elif re.fullmatch(r"-n?\d+", a):
                k = _int(a.lstrip("-n"))
        return (1, k) if name == "head" else (-k, None)
    return None


def _options_and_paths(name: str, args: list[str]) -> list[str]:
    """The arguments of a read or navigation program that may be paths."""
    out, skip = [], False
    takes_value = _TAKES_VALUE.get(name, set())
    script_first = name in ("sed", "awk", "gawk") and not any(a in ("-e", "-f") for a in args)
    for a in args:
        if skip:
            skip = False
            continue
        if a in takes_value:
            skip = True
            continue
        if a.startswith("-"):
            continue
        if script_first:
            script_first = False
            continue
        out.append(a)
    return out


def _python_paths(args: list[str]) -> list[str]:
    """The script, `-m` module or `-c` imports a python command touches, as candidate paths."""
    for i, a in enumerate(args):
        if a == "-m" and i + 1 < len(args):
            mod = args[i + 1].replace(".", "/")
            return [mod + ".py", mod + "/__init__.py", *[x for x in args[i + 2 :] if x.endswith(".py")]]
        if a == "-c" and i + 1 < len(args):
            mods = re.findall(r"(?:^|[;\n]\s*)(?:import|from)\s+([A-Za-z_][\w.]*)", args[i + 1])
            return [p for m in mods for p in (m.replace(".", "/") + ".py", m.replace(".", "/") + "/__init__.py")]
        if not a.startswith("-"):
            return [a]
    return []


def items(command: str) -> list[Item]:
    """What `command` is about, in the order the budget rule takes it (see the module's rule)."""
    named: list[Item] = []
    reached: list[Item] = []
    cwd = "."
    for words in simple_commands(command):
        name, args = program(words)
        if name == "cd":
            target = _norm(args[0], cwd) if args else "."
            cwd = target or cwd
            continue
        rng = _range(name, args)
        if name == "grep" or name in ("egrep", "fgrep", "rg"):
            regex, paths, globs, recursive = grep_pattern(args)
            if regex is None:
                continue
            roots = paths or (["."] if recursive or name == "rg" else [])
            include, exclude = tuple(globs["include"]), tuple(globs["exclude"])
            for p in roots:
                if (q := _norm(p, cwd)) is not None:
                    reached.append(Item("matches", q, pattern=regex, include=include, exclude=exclude))
            continue
        if name == "find":
            paths = []
            for a in args:
                if a.startswith(("-", "(", "!")):
                    break
                paths.append(a)
            at = next((i for i, a in enumerate(args[:-1]) if a in ("-name", "-iname")), None)
            regex = None if at is None else patterns.glob(args[at + 1], fold=args[at] == "-iname")
            for p in paths or ["."]:
                if (q := _norm(p, cwd)) is not None:
                    named.append(Item("tree", q, pattern=regex))
            continue
        if name in ("python", "python3"):
            candidates = _python_paths(args)
            script = bool(candidates) and "-m" not in args and "-c" not in args
            kind = "file" if script else "optional"
            named += [Item(kind, q) for p in candidates if (q := _norm(p, cwd)) is not None]
            continue
        if name in ("git:status", "git:diff"):
            paths = [q for a in args[1:] if not a.startswith("-") and (q := _norm(a, cwd)) is not None]
            named.append(Item("changes", ",".join(paths) or ".", diff=name == "git:diff"))
            continue
        if name.startswith("git:") or name in ("echo", "printf", "mkdir", "touch", "true", "false"):
            continue
        paths = [q for p in _options_and_paths(name, args) if (q := _norm(p, cwd)) is not None]
        if not paths and name == "ls":
            paths = [cwd]
        if not paths and rng and named and named[-1].kind == "file" and named[-1].lines is None:
            named[-1] = Item("file", named[-1].path, rng)  # `nl -ba F | sed -n 'A,Bp'`
            continue
        named += [Item("file", p, rng) for p in paths]
    return _unique(named + reached)


def _unique(found: list[Item]) -> list[Item]:
    seen, out = set(), []
    for it in found:
        key = (it.kind, it.path, it.lines)
        if key not in seen:
            seen.add(key)
            out.append(it)
    return out
