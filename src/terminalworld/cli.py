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
from pathlib import Path

from terminalworld.errors import InputError, TerminalworldError


def run_cli(fn: Callable[[], object]) -> int:
    """Run `fn`, turning expected failures into a one-line message and exit status 2."""
    try:
        result = fn()
    except TerminalworldError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; finished outputs are kept and a rerun resumes", file=sys.stderr)
        return 130
    if isinstance(result, int):
        return result
    if isinstance(result, dict):
        print(
            json.dumps(
                {k: v for k, v in result.items() if k not in ("bad_lines", "train_bad_lines", "shards", "code_trees")},
                indent=2,
            )
        )
    return 0


def _corpus_record(a: argparse.Namespace) -> object:
    from terminalworld.corpus.recorder import RecordConfig, record_corpus

    return record_corpus(
        RecordConfig(
            out=a.out,
            trajectories=a.trajectories,
            seed=a.seed,
            shard_size=a.shard_size,
            workers=a.workers,
            timeout_s=a.timeout,
        )
    )


def _corpus_subsets(a: argparse.Namespace) -> object:
    from terminalworld.corpus.sampling import SubsetsConfig, make_subsets

    return make_subsets(SubsetsConfig(corpus=a.corpus, out=a.out, sizes=a.sizes, seed=a.seed))


def _render(a: argparse.Namespace) -> object:
    from terminalworld.core.render import RenderConfig, render_file

    return render_file(
        RenderConfig(
            tokenizer=a.tokenizer,
            inputs=a.inputs,
            out=a.out,
            arm=a.arm,
            chat_template=a.chat_template,
            max_len=a.max_len,
            exclude_harness_text=a.exclude_harness_text,
            view=a.view,
        )
    )


def _show_mask(a: argparse.Namespace) -> object:
    from terminalworld.core.assets import load_tokenizer
    from terminalworld.core.formats import load_trajectories
    from terminalworld.core.maskview import Coverage, highlight
    from terminalworld.core.render import ARMS, Renderer

    template = Path(a.chat_template).read_text() if a.chat_template else None
    renderer = Renderer(load_tokenizer(a.tokenizer), template, a.view, a.exclude_harness_text, a.max_len)
    trajs = load_trajectories(a.inputs.split(","))
    if not 0 <= a.index < len(trajs):
        raise InputError(f"--index {a.index} is out of range: the input has {len(trajs)} trajectories")
    color = sys.stdout.isatty() if a.color == "auto" else a.color == "always"
    shown = renderer.render(trajs[a.index])
    for arm in ARMS if a.arm == "all" else (a.arm,):
        print(f"=== {shown.instance_id}: arm {arm} (trained tokens {'highlighted' if color else 'in [[ ]]'}) ===")
        print(highlight(shown, arm, color, a.max_chars))
    coverage = Coverage()
    for t in trajs:
        coverage.add(renderer.render(t))
    print(f"\n=== coverage over {len(trajs)} trajectories, {coverage.tokens} tokens ===")
    print(coverage.table())
    return None


def _sandbox_exec(a: argparse.Namespace) -> int:
    from terminalworld.env.sandbox import exec_main

    words = a.command_words[1:] if a.command_words[:1] == ["--"] else a.command_words
    return exec_main(
        repo=a.repo, command=" ".join(words), timeout_s=a.timeout, memory_mb=a.memory_mb, disk_mb=a.disk_mb
    )


def _compare(a: argparse.Namespace) -> object:
    from terminalworld.report.probe.probe import markdown, write_comparison

    table = write_comparison(a.results, a.base, a.reference, a.out)
    print(markdown(table))
    return None


def _render_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tokenizer", required=True, help="tokenizer folder, GGUF file, or qwen3 / smollm2")
    p.add_argument("--in", dest="inputs", required=True, help="trajectory file or glob (comma-separated for several)")
    p.add_argument("--chat-template", default=None, help="Jinja chat template file (default: the tokenizer's)")
    p.add_argument("--max-len", type=int, default=None)
    p.add_argument("--exclude-harness-text", action="store_true", help="harness text owns nothing (ECHO's O')")
    p.add_argument("--view", choices=["agent", "sim"], default="agent", help="sim: the dedicated-simulator framing")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="terminalworld", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    corpus = sub.add_parser("corpus", help="record and sample trajectory corpora").add_subparsers(
        dest="sub", required=True
    )
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

    render = sub.add_parser("render", help="tokenize trajectories with one loss-mask arm")
    _render_flags(render)
    render.add_argument("--arm", choices=["assistant", "full", "user"], required=True)
    render.add_argument("--out", required=True, help=".jsonl, .jsonl.gz or .parquet")
    render.set_defaults(fn=_render)

    show = sub.add_parser("show-mask", help="print a trajectory with each arm's trained tokens highlighted")
    _render_flags(show)
    show.add_argument("--arm", choices=["assistant", "full", "user", "all"], default="all")
    show.add_argument("--index", type=int, default=0, help="which trajectory of the input to print")
    show.add_argument("--max-chars", type=int, default=None, help="cut each printed arm after this many characters")
    show.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    show.set_defaults(fn=_show_mask)

    sandbox = sub.add_parser("sandbox", help="the sandbox for model-issued commands").add_subparsers(
        dest="sub", required=True
    )
    exe = sandbox.add_parser("exec", help="run one command in the sandbox and print what an agent would see")
    exe.add_argument("--repo", required=True, help="the repository folder, mounted writable at /testbed")
    exe.add_argument("--timeout", type=float, default=None, help="wall-clock limit, seconds")
    exe.add_argument("--memory-mb", type=int, default=None)
    exe.add_argument("--disk-mb", type=int, default=None)
    exe.add_argument("command_words", nargs=argparse.REMAINDER, metavar="-- COMMAND")
    exe.set_defaults(fn=_sandbox_exec)

    cmp_ = sub.add_parser("compare", help="the probe table, plots and metrics.json from scorer outputs")
    cmp_.add_argument("results", nargs="+", help="scorer outputs (one JSONL per checkpoint)")
    cmp_.add_argument("--base", required=True, help="model name of the base checkpoint")
    cmp_.add_argument("--reference", default=None, help="model name to count degradations against")
    cmp_.add_argument("--out", required=True)
    cmp_.set_defaults(fn=_compare)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_cli(lambda: args.fn(args))


if __name__ == "__main__":
    sys.exit(main())
