"""Check a command task's answer: a file the agent wrote, or the repository's state.

A standalone script (standard library only, Python 3.8+), run as a task's `tests/check.py` where
the verifier's container is trusted (Harbor's Docker backends), and imported by the host, which
grades every trial where the project runs it (`layout.command_verdict`): one rule for both.

    python3 check.py expected.json     # at the repository root; exit 0 when the answer is right

The reference (`expected.json`, the host's alone) is one of:

    {"kind": "answer", "file": F, "expected": TEXT, "paths": BOOL, "unchanged": {...}}
    {"kind": "state", "files": {PATH: TEXT or null}, "before": {...}, "unchanged": {...}}

An answer is right when file F, normalised (`normalise`), equals TEXT normalised. A state is right
when every PATH holds its TEXT (normalised; null: the path does not exist) and every other file of
the original repository, named in `unchanged` with its SHA-256, is byte for byte what it was.
"""

import hashlib
import json
import os
import stat
import sys

MAX_BYTES = 1 << 20  # a file the check reads: more than this is no answer


def normalise(text, paths=False):
    """`text` as answers are compared: line endings made `\\n`, trailing whitespace of every line and
    blank lines at either end dropped; with `paths`, a leading `./` of each line too."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    if paths:
        lines = [line[2:] if line.startswith("./") else line for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines)


def _text(data):
    return None if data is None else data.decode("utf-8", errors="replace")


def _digest(data):
    return None if data is None else hashlib.sha256(data).hexdigest()


def check(spec, read):
    """(right, written) for reference `spec`, where `read(path)` gives the bytes of a regular file at
    `path` (relative to the repository root), None when there is none or it is over MAX_BYTES.
    `written`: the answer file holds something, or some path of a state differs from before."""
    if spec.get("kind") == "answer":
        got = _text(read(spec["file"]))
        written = got is not None and normalise(got) != ""
        paths = bool(spec.get("paths"))
        right = written and normalise(got, paths) == normalise(spec["expected"], paths)
    elif spec.get("kind") == "state":
        now = {path: read(path) for path in spec["files"]}
        written = any(_digest(now[path]) != spec["before"].get(path) for path in spec["files"])
        right = all(
            (want is None and now[path] is None)
            or (want is not None and now[path] is not None and normalise(_text(now[path])) == normalise(want))
            for path, want in spec["files"].items()
        )
    else:
        return False, False
    unchanged = all(_digest(read(path)) == digest for path, digest in spec.get("unchanged", {}).items())
    return bool(right and unchanged), bool(written)


def _read(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        data = f.read(MAX_BYTES + 1)
    return None if len(data) > MAX_BYTES else data


def main(argv):
    """Check the reference file `argv[0]` against the working directory; print the verdict."""
    with open(argv[0]) as f:
        spec = json.load(f)
    right, written = check(spec, _read)
    print(json.dumps({"right": right, "written": written}))
    return 0 if right else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
