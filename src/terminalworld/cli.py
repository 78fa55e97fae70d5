"""The `terminalworld` command.

Every subcommand parses its flags into one config dataclass (`terminalworld.options`), whose
`__post_init__` checks its values, checks its output paths against its inputs (the config's
`check_paths`), and calls one library function. Expected failures
(`TerminalworldError`: bad inputs, too few trajectories, a missing sandbox) and bad flag values
print one line and exit with status 2; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import functools
import itertools
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from terminalworld.core import scratch
from terminalworld.core.terminal import for_terminal
from terminalworld.errors import TerminalworldError
from terminalworld.options import parse

# Long lists that the printed result of a command leaves to its manifest file.
_NOT_PRINTED = ("bad_lines", "train_bad_lines", "shards", "code_trees", "skipped")


def run_cli(fn: Callable[[], object]) -> int:
    """Run `fn` and return the exit status: an int result is the status itself, a dict result is
    printed as JSON; a `TerminalworldError` prints one line and gives 2."""
    try:
        result = fn()
    except TerminalworldError as e:
        print(f"error: {for_terminal(str(e), sys.stderr)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; finished outputs are kept and a rerun resumes", file=sys.stderr)
        return 130
    if isinstance(result, bool) or result is None:
        return 0
    if isinstance(result, int):
        return result
    if isinstance(result, dict):
        print(json.dumps({k: v for k, v in result.items() if k not in _NOT_PRINTED}, indent=2))
    return 0


class Commands:
    """Subcommands: a dict from the words (`"corpus record"`) to (help line, config class, function
    taking the config). `parse(argv)` picks the command its leading words name and parses the rest;
    no or unknown words print the commands."""

    def __init__(self, prog: str, description: str, commands: Mapping[str, tuple[str, type, Callable]]):
        self.prog, self.description, self.commands = prog, description, dict(commands)
        self.words = {tuple(w.split()): w for w in self.commands}

    def help(self, under: tuple[str, ...] = ()) -> str:
        """The commands under the words `under` (all of them for none), one a line with its help."""
        rows = [(w, self.commands[w][0]) for s, w in self.words.items() if s[: len(under)] == under]
        listed = "".join(f"  {w.ljust(max(len(r) for r, _ in rows))}  {h}\n" for w, h in rows)
        return f"usage: {' '.join([self.prog, *under])} COMMAND [--FLAG VALUE ...]\n\n{self.description}\n\ncommands:\n{listed}"

    def parse(self, argv: Sequence[str]) -> tuple[Any, Callable]:
        """(the config, the function) that `argv` names; exits 0 after help and 2 on bad input."""
        argv = list(argv)
        words = list(itertools.takewhile(lambda w: not w.startswith("-"), argv))
        for n in range(1, len(words) + 1):
            if (key := self.words.get(tuple(words[:n]))) is not None:
                help_, cls, fn = self.commands[key]
                return parse(cls, argv[n:], f"{self.prog} {key}", description=help_), fn
        under: tuple[str, ...] = ()
        for word in words:
            if not any(s[: len(under) + 1] == (*under, word) for s in self.words):
                break
            under = (*under, word)
        if len(under) == len(words) and {"-h", "--help"} & set(argv):
            print(self.help(under), end="")
            raise SystemExit(0)
        choices = sorted({s[len(under)] for s in self.words if s[: len(under)] == under})
        what = f"no command {' '.join(words[: len(under) + 1])!r}" if len(words) > len(under) else "a command is needed"
        print(
            f"error: {' '.join([self.prog, *under])}: {what} (choose from {', '.join(choices)}; see --help)",
            file=sys.stderr,
        )
        raise SystemExit(2)


# The command's words -> (help, config class, function taking the config), for every command.
def _commands() -> dict[str, tuple[str, type, Callable[[Any], object]]]:
    from terminalworld.agent.evaluate import AgentEvalConfig, agent_eval
    from terminalworld.corpus.recorder import RecordConfig, record_corpus
    from terminalworld.corpus.sampling import HeldoutConfig, SubsetsConfig, make_subsets, sample_heldout
    from terminalworld.env.exec_cli import ExecConfig, exec_main
    from terminalworld.eval.scoring import ScoreConfig, score
    from terminalworld.pipeline.walltime import WalltimeConfig, print_walltimes
    from terminalworld.report.probe import CompareConfig, compare_main
    from terminalworld.report.site import DocsBuildConfig, build_docs
    from terminalworld.report.verify import VerifyConfig, print_verify
    from terminalworld.sim.evaluate import SimEvalConfig, sim_eval
    from terminalworld.sim.harbor_loop import write_closed_loop
    from terminalworld.sim.probes import ProbesConfig, make_probes
    from terminalworld.tasks.make import MakeTasksConfig, make_tasks
    from terminalworld.train.maskview import ShowMaskConfig, show_mask
    from terminalworld.train.render_rows import RenderConfig, render_file

    return {
        "corpus record": ("record real-shell trajectories in SWE-ZERO format", RecordConfig, record_corpus),
        "corpus subsets": ("nested deterministic training subsets", SubsetsConfig, make_subsets),
        "heldout": ("the held-out set from repos unseen in training", HeldoutConfig, sample_heldout),
        "render": ("tokenize trajectories with one loss-mask arm", RenderConfig, render_file),
        "show-mask": ("print a trajectory with each arm's trained tokens highlighted", ShowMaskConfig, show_mask),
        "score": ("env-token PPL of a model on held-out rows (resumable)", ScoreConfig, score),
        "probes make": (
            "tier-2 probe sets: real session prefixes, true outputs from the sandbox",
            ProbesConfig,
            make_probes,
        ),
        "sim-eval": ("free-running fidelity of a simulator on held-out rows or probes", SimEvalConfig, sim_eval),
        "compare": ("the probe table, plots and metrics.json from scorer outputs", CompareConfig, compare_main),
        "sandbox exec": ("run one command in the sandbox; print what an agent would see", ExecConfig, exec_main),
        "tasks make": ("SWE-style bug-fix tasks in Harbor's format, validated", MakeTasksConfig, make_tasks),
        "agent-eval": (
            "grade an agent on Harbor-format tasks with Harbor (resumable)",
            AgentEvalConfig,
            # The command line owns both stages: a simulated job's closed loop is the simulator's.
            functools.partial(agent_eval, closed_loop=write_closed_loop),
        ),
        "docs build": ("the docs site's generated pages, from report artifacts", DocsBuildConfig, build_docs),
        "docs verify": (
            "recompute a committed snapshot's reports from its rows and compare every figure",
            VerifyConfig,
            print_verify,
        ),
        "walltime": (
            "a run's wall time per step and stage, from its steps' timed attempts",
            WalltimeConfig,
            print_walltimes,
        ),
    }


def commands() -> Commands:
    """The whole command tree."""
    return Commands("terminalworld", __doc__.split("\n\n")[0], _commands())


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` (default: the process's) and run the command; returns the exit status."""
    cfg, fn = commands().parse(sys.argv[1:] if argv is None else argv)
    scratch.install_cleanup()  # commands run sandboxes and copies: end them at SIGTERM/SIGHUP too
    return run_cli(lambda: _run(fn, cfg))


def _run(fn: Callable[[Any], object], cfg: Any) -> object:
    if callable(check := getattr(cfg, "check_paths", None)):
        check()  # the config's own check of its inputs and outputs, before any work
    return fn(cfg)


if __name__ == "__main__":
    sys.exit(main())
