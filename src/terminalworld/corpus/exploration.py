"""The exploration policy of the recorded corpus, shaped like SWE-ZERO's execution-free agents:
find, ls, grep -n, cat, head/tail, sed -n, nl, wc, git, `sed -i` edits followed by re-reads, heredoc
writes, and the final `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`, grounded in a real code tree
(names that exist, files that exist, and sometimes paths that do not, for real error messages).

`TreeIndex` is what the policy knows of a tree before acting, `Policy` plans one trajectory from a
seeded random generator, and `run_on_fresh_copy` runs the planned commands in one sandbox over a
fresh copy of the tree, file times pinned after each. The recorder (`corpus.recorder`) and the
probe generator (`sim.probes`) both act through it.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from terminalworld.core.trajectories import SUBMIT_SENTINEL
from terminalworld.corpus.actions import Step, workspace_root
from terminalworld.env import copies
from terminalworld.env.codetrees import CodeTree, materialize, materialized_bytes, normalize_times
from terminalworld.env.sandbox import CommandResult, Sandbox, SandboxConfig

_DEF = re.compile(r"^(\s*)(def|class)\s+([A-Za-z_]\w*)")


@dataclass(frozen=True)
class Definition:
    """A `def` or `class` line of a tree: where it is and what it defines."""

    path: str
    line: int  # 1-based
    indent: str
    kind: str
    name: str


@dataclass
class TreeIndex:
    """What the policy knows about a tree before acting: files, sizes and definitions."""

    tree: CodeTree
    lines: dict[str, int] = field(default_factory=dict)
    definitions: list[Definition] = field(default_factory=list)

    @classmethod
    def build(cls, tree: CodeTree) -> TreeIndex:
        """Read every file of `tree` once: line counts, and definitions of the `.py` files."""
        idx = cls(tree)
        for src, rel in tree.files:
            text = src.read_text(encoding="utf-8", errors="replace").splitlines()
            idx.lines[rel] = len(text)
            if rel.endswith(".py"):
                for n, line in enumerate(text, start=1):
                    if m := _DEF.match(line):
                        idx.definitions.append(Definition(rel, n, m.group(1), m.group(2), m.group(3)))
        return idx

    @property
    def dirs(self) -> list[str]:
        """The tree's folders (below the root), sorted."""
        return sorted({str(Path(p).parent) for p in self.lines if str(Path(p).parent) != "."})


class Policy:
    """Plans one trajectory: a task about one definition, exploration, an edit, and the submit."""

    def __init__(self, index: TreeIndex, rng: random.Random, min_turns: int, max_turns: int):
        self.ix = index
        self.rng = rng
        self.n_turns = rng.randint(min_turns, max_turns)
        public = [d for d in index.definitions if not d.name.startswith("_")] or index.definitions
        self.target = rng.choice(public)
        self.kind = rng.choice(["rename", "deprecate"]) if self.target.kind == "def" else "rename"
        self.new_name = self.target.name + rng.choice(["_v2", "_impl", "_legacy", "_compat"])

    @property
    def name(self) -> str:
        """The distribution's name (the repo without `pypi/`)."""
        return self.ix.tree.repo.split("/", 1)[1]

    def task(self) -> str:
        """The issue-style task message about the target definition."""
        t = self.target
        if self.kind == "rename":
            title = f"Rename `{t.name}` to `{self.new_name}` in `{t.path}`"
            problem = (
                f"The {'function' if t.kind == 'def' else 'class'} `{t.name}` defined in `{t.path}` has a name "
                f"that no longer matches what it does, and callers are confused by it."
            )
            fix = [
                f"Rename the definition of `{t.name}` in `{t.path}` to `{self.new_name}`.",
                "Keep the behaviour of the code unchanged.",
                "Add a short regression test that documents the new name.",
            ]
        else:
            title = f"Deprecate `{t.name}` in `{t.path}`"
            problem = f"`{t.name}` is scheduled for removal but calling it gives no warning."
            fix = [
                f"Make `{t.name}` emit a `DeprecationWarning` when it is called.",
                "Do not change its return value or its signature.",
                "Add a short regression test for the warning.",
            ]
        bullets = "\n".join(f"- {f}  " for f in fix)
        return (
            f"Please solve this issue in the repository {self.ix.tree.repo}.\n\n## Issue\n\n**Title**  \n{title}\n\n"
            f"**Problem**  \n{problem}\n\n**Fix / Expected Behavior**  \n{bullets}\n"
        )

    # -- exploration menu: each entry returns a grounded step -----------------------------------
    def _file(self, small: bool = False) -> str:
        files = [p for p in self.ix.lines if p.endswith(".py")]
        if small:
            files = [p for p in files if self.ix.lines[p] <= 120] or files
        return self.rng.choice(files)

    def _range(self, path: str, around: int | None = None) -> tuple[int, int]:
        n = max(self.ix.lines.get(path, 1), 1)
        center = around if around is not None else self.rng.randint(1, n)
        a = max(1, center - self.rng.randint(5, 25))
        return a, min(n, a + self.rng.randint(15, 60))

    def orient(self) -> Step:
        """A first look at the repository."""
        r = self.rng
        options = [
            Step(
                "Let me start by getting an overview of the Python files in this repository.",
                f'find . -type f -name "*.py" | head -{r.choice([20, 30, 40])}',
            ),
            Step("I'll look at the top level of the repository first.", "ls"),
            Step(
                "Let me see how the source tree is organised.", "find . -maxdepth 2 -type d -not -path './.git*' | sort"
            ),
            Step("Let me check the repository state and recent history first.", "git log --oneline | head -5"),
        ]
        return r.choice(options)

    def explore(self) -> Step:
        """One exploration command, weighted towards reading around the target."""
        r, t = self.rng, self.target
        other = r.choice(self.ix.definitions)
        f = self._file(small=r.random() < 0.5)
        a, b = self._range(t.path, around=t.line if r.random() < 0.6 else None)
        dirs = self.ix.dirs
        missing = str(Path(t.path).parent / f"test_{Path(t.path).stem}.py").removeprefix("./")
        options = [
            (
                3,
                lambda: Step(
                    f"I need to find where `{t.name}` is defined and used.",
                    f'grep -rn "{t.name}" --include="*.py" . | head -20',
                ),
            ),
            (
                2,
                lambda: Step(
                    f"Let me look for references to `{other.name}`, which seems related.",
                    f'grep -rn "{other.name}" . | head -{r.choice([10, 20])}',
                ),
            ),
            (
                2,
                lambda: Step(
                    f"Let me list the definitions in `{t.path}`.", f'grep -n "def \\|class " {t.path} | head -40'
                ),
            ),
            (3, lambda: Step(f"Let me read the code around `{t.name}` in `{t.path}`.", f"sed -n '{a},{b}p' {t.path}")),
            (
                2,
                lambda: Step(
                    "I'll view this region with line numbers so that an edit can target the right line.",
                    f"nl -ba {t.path} | sed -n '{a},{b}p'",
                ),
            ),
            (2, lambda: Step(f"Let me read `{f}` to understand how the package fits together.", f"cat {f}")),
            (1, lambda: Step(f"Let me look at the beginning of `{f}`.", f"head -n {r.choice([30, 50, 80])} {f}")),
            (1, lambda: Step(f"Let me look at the end of `{t.path}`.", f"tail -n {r.choice([20, 40])} {t.path}")),
            (1, lambda: Step("Let me check how large these files are.", f"wc -l {t.path} {f}")),
            (1, lambda: Step("Let me see whether there is an existing test module for this file.", f"cat {missing}")),
            (
                1,
                lambda: Step(
                    f"Let me search for `{t.name}_test` in case a helper already exists.",
                    f'grep -rn "{t.name}_test" --include="*.py" .',
                ),
            ),
            (
                1,
                lambda: Step(
                    "Let me list the files in this directory.", f"ls -la {r.choice(dirs)}" if dirs else "ls -l"
                ),
            ),
            (
                1,
                lambda: Step(
                    f"Let me find files whose names relate to `{Path(f).stem}`.",
                    f'find . -name "*{Path(f).stem}*" -not -path "./.git/*"',
                ),
            ),
            (
                1,
                lambda: Step(
                    "Let me see which modules import from this file.",
                    f'grep -rln "import" --include="*.py" {Path(t.path).parent} | head -15',
                ),
            ),
            (1, lambda: Step("Let me check the git status before making changes.", "git status")),
        ]
        weights = [w for w, _ in options]
        return r.choices([fn for _, fn in options], weights=weights)[0]()

    def edit(self) -> list[Step]:
        """The edit, its verification, and a regression test written with a heredoc."""
        t = self.target
        a, b = max(1, t.line - 3), t.line + 12
        if self.kind == "rename":
            keyword = "def" if t.kind == "def" else "class"
            first = Step(
                f"The definition of `{t.name}` is at line {t.line} of `{t.path}`. I'll rename it in place.",
                f"sed -i '{t.line}s/{keyword} {t.name}\\b/{keyword} {self.new_name}/' {t.path}",
            )
        else:
            body = t.indent + "    "
            first = Step(
                f"`{t.name}` starts at line {t.line}. I'll insert a DeprecationWarning right after the signature line.",
                f'sed -i \'{t.line}a\\{body}import warnings; warnings.warn("{t.name} is deprecated", '
                f"DeprecationWarning, stacklevel=2)' {t.path}",
            )
        test_path = f"tests/test_{self.name.replace('-', '_')}_{t.name.lower()}.py"
        subject = self.new_name if self.kind == "rename" else t.name
        test_src = (
            f'"""Regression test for {subject}."""\n\n\ndef test_{subject.lower()}_exists():\n'
            f"    import importlib\n\n    module = importlib.import_module({Path(t.path).with_suffix('').as_posix().replace('/', '.')!r})\n"
            f"    assert hasattr(module, {subject!r})\n"
        )
        return [
            first,
            Step("Let me re-read the edited region to verify the change.", f"sed -n '{a},{b}p' {t.path}"),
            Step("Let me check the diff of my change.", "git diff"),
            Step(
                "Now I'll add a small regression test.", f"mkdir -p tests && cat <<'EOF' > {test_path}\n{test_src}EOF"
            ),
            Step("Let me verify the test file was written correctly.", f"cat {test_path}"),
            Step("Let me confirm the working tree has exactly the changes I expect.", "git status"),
        ]

    def plan(self) -> list[Step]:
        """The whole trajectory's commands: orient, explore (no verbatim repeats), edit, submit."""
        edit = self.edit()
        n_explore = max(self.n_turns - len(edit) - 2, 1)
        steps = [self.orient()]
        seen = {steps[0].command}
        for _ in range(n_explore):
            # An agent rarely repeats a command verbatim; redraw a few times before accepting one.
            for _ in range(8):
                step = self.explore()
                if step.command not in seen:
                    break
            seen.add(step.command)
            steps.append(step)
        steps += edit
        steps.append(Step("The change is complete and verified. Submitting.", f"echo {SUBMIT_SENTINEL}"))
        return steps


def run_on_fresh_copy(tree: CodeTree, commands: list[str], sandbox_config: SandboxConfig) -> list[CommandResult]:
    """Run `commands` in order in one sandbox over a fresh copy of `tree` (removed afterwards), file
    times pinned after each so that listings do not depend on when they ran."""
    content, cap = materialized_bytes(tree), sandbox_config.disk_bytes
    with copies.copy_space("tw-rec-", dir=workspace_root(), content_bytes=content, disk_bytes=cap) as work:
        repo_dir = materialize(tree, Path(work) / "repo")
        sandbox = Sandbox(str(repo_dir), sandbox_config)
        results = []
        for command in commands:
            results.append(sandbox.run(command))
            normalize_times(repo_dir)
        return results
