"""The hybrid simulator's routing table: which commands the shadow repository answers exactly and
which the model generates.

One declared rule set (`RULES`), read top to bottom. A command line is split into its simple
commands (pipes, `&&`, `||`, `;`, command substitutions; heredoc bodies are data, not commands),
each simple command's program is found after variable assignments and transparent wrappers
(`timeout 10`, `env`, `nohup`, `time`, `command`, `xargs`; the program `find -exec` runs counts too), and the program's rule gives its family:

- `read`: programs that print files or filter text (`cat`, `head`, `sed` without `-i`, `grep`, `wc`, ...);
- `navigation`: programs that list or describe the tree and its history (`ls`, `find`, `git status`, ...);
- `edit`: programs that change files (`sed -i`, `mkdir`, `rm`, `git apply`, a redirection into a file);
- `execution`: interpreters, test runners, build and package tools (`python`, `pytest`, `make`, `pip`, ...).

The line's family is `execution` when any simple command executes, `unknown` when any program has no
rule, else `edit` when any simple command edits, else the first simple command's family. Read,
navigation and edit lines are served exactly (their output is a function of the repository's files,
which the shadow holds); execution and unknown lines are generated (their output depends on an
interpreter, installed packages and time, which a container-free simulator does not have — the
split SWE-World makes).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Literal

Family = Literal["read", "navigation", "edit", "execution", "unknown"]
Route = Literal["exact", "generated"]

EXACT_FAMILIES: frozenset[str] = frozenset({"read", "navigation", "edit"})


@dataclass(frozen=True)
class Rule:
    """Programs of one family; `git` rules name subcommands instead (`git SUB`)."""

    family: Family
    programs: frozenset[str]


def _rule(family: Family, names: str) -> Rule:
    return Rule(family, frozenset(names.split()))


RULES: tuple[Rule, ...] = (
    _rule(
        "execution",
        "python python2 python3 pytest py.test tox nox pip pip3 uv poetry conda make cmake ninja gcc g++ cc "
        "clang go cargo rustc node npm npx yarn pnpm java javac mvn gradle ruby gem bundle rake php perl "
        "bash sh zsh dash source . exec eval xargs coverage mypy ruff flake8 pylint black isort",
    ),
    _rule(
        "read",
        "cat head tail nl less more wc grep egrep fgrep rg ag awk gawk sort uniq cut tr diff cmp comm "
        "column file stat md5sum sha1sum sha256sum xxd od hexdump strings echo printf true false test [ "
        "basename dirname realpath readlink jq sed",
    ),
    _rule("navigation", "ls tree find pwd cd du df which type whereis locate"),
    _rule("edit", "mkdir rmdir touch rm mv cp ln chmod tee patch truncate"),
    _rule(
        "navigation",
        "git:status git:diff git:log git:show git:grep git:ls-files git:branch git:rev-parse git:blame "
        "git:describe git:shortlog git:tag git:remote git:config git:reflog git:cat-file git:ls-tree",
    ),
    _rule(
        "edit",
        "git:apply git:add git:checkout git:restore git:stash git:commit git:reset git:rm git:mv git:am "
        "git:cherry-pick git:revert git:switch git:clean git:init",
    ),
)
_WRAPPERS = {"timeout", "env", "nohup", "time", "command", "nice", "stdbuf", "sudo", "xargs"}
_FIND_EXEC = {"-exec", "-execdir", "-ok", "-okdir"}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_SUBSTITUTION = re.compile(r"\$\(([^()]*)\)|`([^`]*)`")
_SEPARATORS = {"|", "||", "&&", ";", "&", "|&", "\n"}
_REDIRECT = re.compile(r"^\d*>>?(.*)$")
_FD_DUP = re.compile(r"\d*[<>]&\d+|\d*>&-")


def strip_heredocs(line: str) -> str:
    """The command line without the bodies of its heredocs (the lines up to each terminator)."""
    lines, out, pending = line.split("\n"), [], []
    for text in lines:
        if pending:
            if text.strip() == pending[0]:
                pending.pop(0)
            continue
        out.append(text)
        pending += [m.group(2) for m in _HEREDOC.finditer(text)]
    return "\n".join(out)


def simple_commands(line: str) -> list[list[str]]:
    """The words of each simple command of a command line, in order (command substitutions after
    the command holding them). A line shlex cannot split (an open quote) is one command of its
    whitespace-separated words."""
    text = strip_heredocs(line)
    inner = [a or b for a, b in _SUBSTITUTION.findall(text)]
    text = _FD_DUP.sub(" ", _SUBSTITUTION.sub(" SUBST ", text)).replace("&>", ">").replace("\n", " ; ")
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        words = text.split()
    out: list[list[str]] = [[]]
    for w in words:
        if w in _SEPARATORS or w.strip("\n") == "":
            out.append([])
        else:
            out[-1].append(w)
    out = [c for c in out if c]
    for sub in inner:
        out += simple_commands(sub)
    return out


def program(words: list[str]) -> tuple[str, list[str]]:
    """The program of a simple command (`git SUB` as `git:SUB`) and its arguments, after variable
    assignments and wrappers (`timeout 10 python x.py` runs `python`)."""
    i = 0
    while i < len(words) and (_ASSIGNMENT.match(words[i]) or words[i] in _WRAPPERS):
        i += 1
        while i < len(words) and words[i - 1] in _WRAPPERS and (words[i].startswith("-") or words[i][0].isdigit()):
            i += 1  # the wrapper's own options and duration
    if i >= len(words):
        return "", []
    name, args = words[i].rsplit("/", 1)[-1], words[i + 1 :]
    if name == "git":
        sub = next((a for a in args if not a.startswith("-")), "")
        return f"git:{sub}", args
    return name, args


def simple_family(words: list[str]) -> Family:
    """The family of one simple command by `RULES` (a redirection into a file edits, `sed -i` edits)."""
    name, args = program(words)
    if not name:
        return "read"  # a bare assignment or redirection prints nothing of its own
    if name == "find" and (run := next((i for i, a in enumerate(args) if a in _FIND_EXEC), None)) is not None:
        inner = simple_family([a for a in args[run + 1 :] if a not in (";", "+", "{}")])
        if inner not in EXACT_FAMILIES:
            return inner
    family: Family = next((r.family for r in RULES if name in r.programs), "unknown")
    sed_in_place = name == "sed" and any(a.startswith(("-i", "--in-place")) for a in args)
    if family in ("read", "navigation") and (_writes_file(args) or sed_in_place):
        return "edit"
    return family


def _writes_file(args: list[str]) -> bool:
    """Whether the arguments redirect output into a file (not `/dev/null`)."""
    for i, a in enumerate(args):
        if m := _REDIRECT.match(a):
            target = m.group(1) or (args[i + 1] if i + 1 < len(args) else "")
            if target and target != "/dev/null":
                return True
    return False


def family(command: str) -> Family:
    """The family of a whole command line (the module's rule)."""
    families = [simple_family(words) for words in simple_commands(command)]
    if not families:
        return "unknown"
    for f in ("execution", "unknown"):
        if f in families:
            return f  # type: ignore[return-value]
    return "edit" if "edit" in families else families[0]


def edits(command: str) -> bool:
    """Whether the line changes the repository by `RULES`: any of its simple commands is of the edit
    family (`sed -i`, a heredoc or other redirection into a file, `git apply`, `mkdir`, `rm`, `cp`, ...),
    whatever else the line runs. An interpreter that writes files (`python -c "open(...)"`) is
    execution: the table cannot see inside it."""
    return any(simple_family(words) == "edit" for words in simple_commands(command))


def route(command: str) -> Route:
    """`exact` for read, navigation and edit lines (the shadow answers), `generated` otherwise."""
    return "exact" if family(command) in EXACT_FAMILIES else "generated"
