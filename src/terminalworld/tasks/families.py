"""The seven families of the command level (`tasks.commands`): each makes one task of the tree in
the host's `View`, its instruction, reference commands and reference, trying its variants in a
seeded order and making the first that fits the tree; None when none does.
"""

from __future__ import annotations

import json
import random
import re
import shlex
from collections import Counter
from collections.abc import Callable
from typing import Any

from terminalworld.env.codetrees import git, normalize_times
from terminalworld.tasks.treeview import ANSWER, LISTING, SAFE_PATH, Made, View, answer, state, text_lines

FAMILIES = ("locate", "count", "search", "inspect", "edit", "git", "files")
WHERE = "Write the number alone to `/testbed/answer.txt`."  # the count family's answer
WORDS = [
    "alder",
    "birch",
    "cedar",
    "delta",
    "ember",
    "falcon",
    "garnet",
    "heron",
    "iris",
    "juniper",
    "kestrel",
    "lumen",
    "maple",
    "nectar",
    "orchid",
    "pebble",
    "quartz",
    "raven",
    "sierra",
    "tundra",
    "umber",
    "violet",
    "willow",
    "yarrow",
    "zephyr",
]
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")


def _q(text: str) -> str:
    return shlex.quote(text)


def _words(lines: list[str], low: int, high: int) -> list[str]:
    """Words (identifier-like, 4+ characters) found on `low`..`high` lines, sorted."""
    on: Counter = Counter()
    for line in lines:
        on.update(set(WORD.findall(line)))
    return sorted(w for w, n in on.items() if low <= n <= high)


# Each family tries its variants in a seeded order and makes the first that fits the tree.


def _locate(rng: random.Random, view: View) -> Made | None:
    kinds = {
        "function": (r"^[ \t]*(async[ \t]+)?def {}\(", "^[[:space:]]*(async[[:space:]]+)?def {}\\(", "the function"),
        "class": (r"^[ \t]*class {}\b", "^[[:space:]]*class {}\\b", "the class"),
        "constant": (r"^{}[ \t]*(:[^=]*)?=", "^{}[[:space:]]*(:[^=]*)?=", "the module-level constant"),
    }
    sources = {f: (view.root / f).read_bytes().decode("utf-8", errors="replace") for f in view.all_py()}
    for variant in rng.sample(sorted(kinds), len(kinds)):
        pattern, ere, what = kinds[variant]
        name_re = {"function": r"def (\w+)\(", "class": r"class (\w+)\b", "constant": r"^([A-Z][A-Z0-9_]{3,})[ \t]*="}
        names = sorted({n for f in view.py() for n in re.findall(name_re[variant], view.text(f) or "", re.M)})
        for name in rng.sample(names, len(names)):
            if name.startswith("_") or len(name) < 4:
                continue
            where = [f for f, s in sources.items() if len(re.findall(pattern.format(name), s, re.M)) > 0]
            hits = sum(len(re.findall(pattern.format(name), sources[f], re.M)) for f in where)
            if len(where) != 1 or hits != 1:
                continue
            pat = _q(ere.format(name))
            return Made(
                variant=variant,
                instruction=f"Which file defines {what} `{name}`? Write its path, relative to the repository "
                f"root, alone to `/testbed/answer.txt`.\n",
                commands=f"grep -rlE --include='*.py' {pat} . | sed 's|^\\./||' > {ANSWER}",
                expected=answer(where[0], paths=True),
                target=where[0],
            )
    return None


def _count(rng: random.Random, view: View) -> Made | None:
    for variant in rng.sample(["py_files", "lines", "defs", "word"], 4):
        if variant == "py_files":
            fits = [
                d
                for d in view.dirs()
                if SAFE_PATH.fullmatch(d) and 3 <= sum(f.startswith(d + "/") for f in view.all_py()) <= 80
            ]
            if not fits:
                continue
            d = rng.choice(fits)
            n = sum(f.startswith(d + "/") for f in view.all_py())
            return Made(
                variant,
                f"How many files ending in `.py` are under the folder `{d}/` (at any depth)? {WHERE}\n",
                f"find {_q(d)} -name '*.py' | wc -l > {ANSWER}",
                answer(str(n)),
                None,
            )
        files = view.py()
        if not files:
            return None
        f = rng.choice(files)
        lines = text_lines(view.text(f) or "")
        if variant == "lines":
            question, commands, n = f"How many lines does the file `{f}` have?", f"wc -l < {_q(f)}", len(lines)
        elif variant == "defs":
            n = sum(line.startswith("def ") for line in lines)
            if n < 2:
                continue
            question = f"How many lines of the file `{f}` start with `def ` (at the start of the line)?"
            commands = f"grep -c '^def ' {_q(f)}"
        else:
            words = _words(lines, 2, 30)
            if not words:
                continue
            w = rng.choice(words)
            n = sum(w in line for line in lines)
            question, commands = f"How many lines of the file `{f}` contain the text `{w}`?", f"grep -cF {w} {_q(f)}"
        return Made(variant, f"{question} {WHERE}\n", f"{commands} > {ANSWER}", answer(str(n)), f)
    return None


def _search(rng: random.Random, view: View) -> Made | None:
    files = view.py()
    for variant in rng.sample(["word_lines", "def_lines", "word_files"], 3):
        if variant == "word_files":
            sources = {f: (view.root / f).read_bytes() for f in view.all_py()}
            words = sorted({w for f in files for w in WORD.findall(view.text(f) or "")})
            rng.shuffle(words)
            for w in words[:200]:
                hits = sorted(f for f, data in sources.items() if w.encode() in data)
                if 2 <= len(hits) <= 6:
                    return Made(
                        variant,
                        f"Which `.py` files of the repository contain the text `{w}`? Write their paths, relative "
                        "to the repository root, one per line, sorted, to `/testbed/answer.txt`.\n",
                        f"grep -rlF --include='*.py' {w} . | sed 's|^\\./||' | LC_ALL=C sort > {ANSWER}",
                        answer("\n".join(hits), paths=True),
                        None,
                    )
            continue
        if not files:
            return None
        f = rng.choice(files)
        lines = text_lines(view.text(f) or "")
        if variant == "def_lines":
            hits = [f"{i}:{x}" for i, x in enumerate(lines, 1) if x.startswith("def ")]
            if not 2 <= len(hits) <= 12:
                continue
            what, commands = "that start with `def `", f"grep -n '^def ' {_q(f)}"
        else:
            words = _words(lines, 2, 8)
            if not words:
                continue
            w = rng.choice(words)
            hits = [f"{i}:{x}" for i, x in enumerate(lines, 1) if w in x]
            what, commands = f"that contain the text `{w}`", f"grep -nF {w} {_q(f)}"
        return Made(
            variant,
            f"Find the lines of the file `{f}` {what}. Write each as `NUMBER:LINE` (its line number, a colon, "
            "the line), in file order, one per line, to `/testbed/answer.txt`.\n",
            f"{commands} > {ANSWER}",
            answer("\n".join(hits)),
            f,
        )
    return None


def _distinct_line(rng: random.Random, lines: list[str]) -> int | None:
    """A line number (1-based) whose line is long enough to recognise and occurs once in the file."""
    seen = Counter(lines)
    fits = [i for i, x in enumerate(lines, 1) if len(x.strip()) >= 12 and seen[x] == 1]
    return rng.choice(fits) if fits else None


def _inspect(rng: random.Random, view: View) -> Made | None:
    files = view.py()
    for variant in rng.sample(["line", "head", "tail", "json"], 4):
        if variant == "json":
            made = _json_field(rng, view)
            if made is not None:
                return made
            continue
        if not files:
            return None
        f = rng.choice(files)
        lines = text_lines(view.text(f) or "")
        if variant == "line":
            n = _distinct_line(rng, lines)
            if n is None:
                continue
            question, commands, want = f"Write line {n} of the file `{f}`", f"sed -n '{n}p' {_q(f)}", lines[n - 1]
        else:
            k = rng.randint(3, 6)
            part = lines[:k] if variant == "head" else lines[-k:]
            if sum(bool(x.strip()) for x in part) < 2:
                continue
            which = "first" if variant == "head" else "last"
            question = f"Write the {which} {k} lines of the file `{f}`"
            commands, want = f"{variant} -n {k} {_q(f)}", "\n".join(part)
        return Made(
            variant,
            f"{question}, exactly as they are, to `/testbed/answer.txt`.\n",
            f"{commands} > {ANSWER}",
            answer(want),
            f,
        )
    return None


def _json_field(rng: random.Random, view: View) -> Made | None:
    for f in rng.sample(
        [f for f in view.files if f.endswith(".json")], len([f for f in view.files if f.endswith(".json")])
    ):
        try:
            data = json.loads(view.text(f) or "")
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        keys = sorted(
            k
            for k, v in data.items()
            if WORD.fullmatch(k) and ((isinstance(v, str) and v.isprintable() and 0 < len(v) <= 200) or type(v) is int)
        )
        if keys:
            k = rng.choice(keys)
            return Made(
                "json",
                f"The file `{f}` holds a JSON object. Write the value of its top-level field `{k}` (the value "
                "alone, without quotes) to `/testbed/answer.txt`.\n",
                f"python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' {_q(f)} {k} > {ANSWER}",
                answer(str(data[k])),
                f,
            )
    return None


def _edit(rng: random.Random, view: View) -> Made | None:
    files = view.py()
    if not files:
        return None
    for variant in rng.sample(["replace", "delete", "append"], 3):
        f = rng.choice(files)
        lines = text_lines(view.text(f) or "")
        if variant == "append":
            new = f"# reviewed: {rng.choice(WORDS)} {rng.randint(100, 999)}"
            want = [*lines, new]
            instruction = f"Append the line `{new}` at the end of the file `{f}`."
            commands = f"echo {_q(new)} >> {_q(f)}"
        else:
            n = _distinct_line(rng, lines)
            if n is None:
                continue
            if variant == "delete":
                want = lines[: n - 1] + lines[n:]
                instruction = f"Delete line {n} of the file `{f}` (it reads `{lines[n - 1].strip()}`)."
                commands = f"sed -i '{n}d' {_q(f)}"
            else:
                olds = [w for w in WORD.findall(lines[n - 1]) if lines[n - 1].count(w) == 1]
                if not olds:
                    continue
                old = rng.choice(olds)
                new = f"{old}_{rng.choice(WORDS)}"
                want = [*lines[: n - 1], lines[n - 1].replace(old, new), *lines[n:]]
                instruction = f"On line {n} of the file `{f}`, replace the text `{old}` with `{new}`."
                commands = f"sed -i '{n}s/{old}/{new}/' {_q(f)}"
        return Made(
            variant,
            f"{instruction} Change nothing else in the repository.\n",
            commands,
            state(view, {f: "\n".join(want) + "\n"}),
            f,
        )
    return None


def _history(rng: random.Random, view: View) -> dict[str, Any] | None:
    """Give the repository a short history: 1 to 3 commits, each appending a note to one or two
    files, then a new branch checked out. What was done: subjects, last files, branch, commits."""
    files = view.py()
    if len(files) < 2:
        return None
    subjects, touched = [], []
    for _ in range(rng.randint(1, 3)):
        touched = sorted(rng.sample(files, rng.randint(1, 2)))
        word = rng.choice(WORDS)
        for f in touched:
            with open(view.root / f, "a") as out:
                out.write(f"# {word} note\n")
        verb = rng.choice(["Tidy", "Document", "Clarify", "Annotate", "Note"])
        subjects.append(f"{verb} {word} in {touched[0].rsplit('/', 1)[-1]} (#{rng.randint(1000, 9999)})")
        git(view.root, "add", "-A")
        git(view.root, "commit", "-q", "-m", subjects[-1])
    branch = f"{rng.choice(WORDS)}-{rng.randint(10, 99)}"
    git(view.root, "checkout", "-q", "-b", branch)
    normalize_times(view.root)
    return {"subject": subjects[-1], "files": touched, "branch": branch, "commits": 1 + len(subjects)}


def _git(rng: random.Random, view: View) -> Made | None:
    done = _history(rng, view)
    if done is None:
        return None
    variant = rng.choice(["subject", "files", "branch", "commits"])
    question, commands, want = {
        "subject": (
            "Write the subject (the first line of the message) of the last commit",
            "git log -1 --format=%s",
            done["subject"],
        ),
        "files": (
            "Write the paths of the files the last commit changed, one per line, sorted,",
            "git diff --name-only HEAD~1 HEAD | LC_ALL=C sort",
            "\n".join(done["files"]),
        ),
        "branch": ("Write the name of the branch that is checked out", "git branch --show-current", done["branch"]),
        "commits": (
            "Write the number of commits on the current branch",
            "git rev-list --count HEAD",
            str(done["commits"]),
        ),
    }[variant]
    return Made(
        variant,
        f"{question} to `/testbed/answer.txt`.\n",
        f"{commands} > {ANSWER}",
        answer(want, paths=variant == "files"),
        None,
    )


def _files(rng: random.Random, view: View) -> Made | None:
    files = view.py()
    for variant in rng.sample(["create", "move", "copy", "list"], 4):
        if variant == "list":
            dirs = [d for d in view.dirs() if SAFE_PATH.fullmatch(d)]
            entries = {
                d: sorted({f[len(d) + 1 :].split("/", 1)[0] for f in view.files if f.startswith(d + "/")}) for d in dirs
            }
            fits = [d for d in dirs if 2 <= len(entries[d]) <= 40 and all(SAFE_PATH.fullmatch(e) for e in entries[d])]
            if not fits:
                continue
            d = rng.choice(fits)
            return Made(
                variant,
                f"List the entries of the folder `{d}/`, one name per line, as `ls {d}` shows them, into the "
                f"new file `/testbed/{LISTING}`.\n",
                f"ls {_q(d)} > {LISTING}",
                answer("\n".join(entries[d]), file=LISTING),
                None,
            )
        if not files:
            return None
        f = rng.choice(files)
        folder = f.rsplit("/", 1)[0] + "/" if "/" in f else ""
        word, n = rng.choice(WORDS), rng.randint(10, 99)
        if variant == "create":
            new, line = f"{folder}{word}_{n}.txt", f"{word} {rng.randint(100, 999)}"
            return Made(
                variant,
                f"Create the file `{new}` holding exactly one line: `{line}`. Change nothing else in the repository.\n",
                f"echo {_q(line)} > {_q(new)}",
                state(view, {new: line + "\n"}),
                None,
            )
        new = f"{folder}{word}_{n}.py"
        if variant == "move":
            instruction, commands, want = (
                f"Move (rename) the file `{f}` to `{new}`.",
                f"mv {_q(f)} {_q(new)}",
                {f: None},
            )
        else:
            instruction, commands, want = f"Copy the file `{f}` to `{new}`.", f"cp {_q(f)} {_q(new)}", {}
        return Made(
            variant,
            f"{instruction} Change nothing else in the repository.\n",
            commands,
            state(view, {**want, new: view.text(f)}),
            f,
        )
    return None


MAKERS: dict[str, Callable[[random.Random, View], Made | None]] = {
    "locate": _locate,
    "count": _count,
    "search": _search,
    "inspect": _inspect,
    "edit": _edit,
    "git": _git,
    "files": _files,
}
