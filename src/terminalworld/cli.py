"""The `terminalworld` command.

Every subcommand fills one typed config dataclass (the same ones the Marin steps take) and calls
one library function. Flags are spelled as in the docs (`--max-len`, `--in`), which is why the
parsing is argparse rather than draccus. Expected failures (bad inputs, too few trajectories,
a missing sandbox) print one line and exit with status 2; they never end in a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence

from terminalworld.records import InputError
from terminalworld.sandbox import SandboxUnavailable
from terminalworld.trajectories import TrajectoryError

EXPECTED_ERRORS: tuple[type[BaseException], ...] = (InputError, TrajectoryError, SandboxUnavailable, FileNotFoundError)


def run_cli(fn: Callable[[], object]) -> int:
    """Run `fn`, turning expected failures into a one-line message and exit status 2."""
    try:
        result = fn()
    except EXPECTED_ERRORS as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; finished outputs are kept and a rerun resumes", file=sys.stderr)
        return 130
    if isinstance(result, dict):
        print(json.dumps({k: v for k, v in result.items() if k not in ("bad_lines", "train_bad_lines", "shards", "code_trees")}, indent=2))
    return 0


def _corpus_record(a: argparse.Namespace) -> object:
    from terminalworld.recorder import RecordConfig, record_corpus

    return record_corpus(RecordConfig(out=a.out, trajectories=a.trajectories, seed=a.seed, shard_size=a.shard_size,
                                      workers=a.workers, timeout_s=a.timeout))  # fmt: skip


def _corpus_subsets(a: argparse.Namespace) -> object:
    from terminalworld.sampling import SubsetsConfig, make_subsets

    return make_subsets(SubsetsConfig(corpus=a.corpus, out=a.out, sizes=a.sizes, seed=a.seed))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="terminalworld", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    corpus = sub.add_parser("corpus", help="record and sample trajectory corpora").add_subparsers(dest="sub", required=True)
    rec = corpus.add_parser("record", help="record real-shell trajectories in SWE-ZERO format")
    rec.add_argument("--out", required=True)
    rec.add_argument("--trajectories", type=int, default=120)
    rec.add_argument("--seed", type=int, default=0)
    rec.add_argument("--shard-size", type=int, default=50)
    rec.add_argument("--workers", type=int, default=0, help="parallel sandboxes (0: one per core)")
    rec.add_argument("--timeout", type=float, default=10.0, help="per-command time limit, seconds")
    rec.set_defaults(fn=_corpus_record)

    sub_ = corpus.add_parser("subsets", help="nested deterministic training subsets")
    sub_.add_argument("--corpus", required=True, help="glob(s), comma-separated")
    sub_.add_argument("--sizes", default="10000,100000,1000000")
    sub_.add_argument("--seed", type=int, default=42)
    sub_.add_argument("--out", required=True)
    sub_.set_defaults(fn=_corpus_subsets)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_cli(lambda: args.fn(args))


if __name__ == "__main__":
    sys.exit(main())
