"""Call functions of a repository and compare what they return: the tests of a generated task.

A standalone script (standard library only, Python 3.8+), run by the sandbox's `python3` at the
repository root, so the repository's own packages import from the working directory:

    python3 check.py cases.json             # run the cases; exit 0 when every one passes
    python3 check.py --discover spec.json   # call each function on generated inputs, print JSON

A case is {"id", "module", "function", "args", "expected"}: `args` is the Python literal of the
positional arguments and `expected` the `repr` of the value the original function returned. Every
call has a time limit and its printing is captured, so a bug that loops or prints fails one case
without hiding the others. The limit counts the process's CPU time, not the clock, so a verdict does
not depend on how loaded the machine is; a generous wall-clock limit stops calls that wait instead
of compute (a sleep, a child process). Importing the module is not part of the call: it has its own,
larger limits. Discovery keeps only calls whose result has a stable `repr` (no
addresses) and prints {function: [[args, repr], ...]} as one line of JSON.
"""

import ast
import contextlib
import copy
import importlib
import inspect
import io
import json
import random
import signal
import sys

CALL_CPU_SECONDS = 0.5
IMPORT_CPU_SECONDS = 10.0
WALL_SECONDS = 20.0
POOL = [0, 1, 2, 7, -3, 2.5, "", "a", "abc", "Hello World", "a,b;c", "x_y-z.py", "  padded  "]
POOL += [[], [1, 2, 3], ["b", "a"], (1, 2), {"a": 1}, None, True, False, b"ab"]
CALLS_PER_FUNCTION = 24


class _Timeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _Timeout()


@contextlib.contextmanager
def _limits(cpu_seconds):
    """Raise _Timeout after `cpu_seconds` of this process's CPU time or WALL_SECONDS of the clock."""
    signal.signal(signal.SIGPROF, _alarm)
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_PROF, cpu_seconds)
    signal.setitimer(signal.ITIMER_REAL, WALL_SECONDS)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)


def call(module, function, args):
    """('ok', repr) or ('error', exception type name) of module.function(*args), within the limits."""
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            with _limits(IMPORT_CPU_SECONDS):
                fn = getattr(importlib.import_module(module), function)
            with _limits(CALL_CPU_SECONDS):
                return "ok", repr(fn(*args))
    except _Timeout:
        return "error", "timeout"
    except Exception as e:
        return "error", type(e).__name__


def _arity(fn):
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    required = [p for p in params if p.default is p.empty and p.kind in kinds]
    if any(p.default is p.empty and p.kind == p.KEYWORD_ONLY for p in params):
        return None
    return len(required) if 1 <= len(required) <= 3 else None


def discover(spec):
    """For each function of spec["functions"] in spec["module"], the calls on generated inputs that
    returned a value with a stable repr."""
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            module = importlib.import_module(spec["module"])
    except BaseException:
        return {}
    found = {}
    for name in spec["functions"]:
        fn = getattr(module, name, None)
        n = _arity(fn) if inspect.isfunction(fn) and fn.__module__ == spec["module"] else None
        if n is None:
            continue
        rng = random.Random(spec["module"] + "." + name)
        combos = [tuple(rng.choice(POOL) for _ in range(n)) for _ in range(4 * CALLS_PER_FUNCTION)]
        if n == 1:
            combos = [(v,) for v in POOL]
        seen, calls = set(), []
        for args in combos:
            text = repr(args)
            if text in seen or len(calls) >= CALLS_PER_FUNCTION:
                continue
            seen.add(text)
            status, value = call(spec["module"], name, copy.deepcopy(args))
            if status == "ok" and " at 0x" not in value and len(value) <= 200:
                calls.append([text, value])
        if calls:
            found[name] = calls
    return found


def run_cases(cases):
    """Run every case; print one line per case and return how many failed. A case without
    "expected" (the host keeps it and decides) prints what the call returned, "passed" null."""
    failed = 0
    for case in cases:
        status, value = call(case["module"], case["function"], ast.literal_eval(case["args"]))
        ok = status == "ok" and value == case["expected"] if "expected" in case else None
        failed += ok is False
        got = value if status == "ok" else "raised " + value
        print(json.dumps({"id": case["id"], "passed": ok, "got": got}))
    return failed


def main(argv):
    """Discover (`--discover SPEC`) or run the cases of a file; the exit status says whether all passed."""
    sys.path.insert(0, ".")
    if argv[:1] == ["--discover"]:
        with open(argv[1]) as f:
            print(json.dumps(discover(json.load(f))))
        return 0
    with open(argv[0]) as f:
        return 1 if run_cases(json.load(f)) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
