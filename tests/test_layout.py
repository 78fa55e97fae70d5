"""The package's shape: no import cycle between modules, imports only downward through the stages,
no stage reaching into another's generators, foreign-environment modules that import only what
their environment has, one episode loop, small modules, docstrings on the public API."""

import ast
import re
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "terminalworld"


def _module(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """terminalworld modules imported anywhere in the file (function-level imports included)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("terminalworld"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                out.add(candidate if (SRC.parent / (candidate.replace(".", "/") + ".py")).exists() else node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("terminalworld")}
    return out


# The stages, lowest first (docs/design.md, "Layout"): a module imports only from its own stage
# and the ones before it. `agent` sits below `train` because its harness is the format the
# checkpoints are trained in (the ECHO rollouts drive it), and the agent grade needs no training code.
STAGES = (
    "errors",
    "core",
    "options",
    "pipeline",
    "env",
    "tasks",
    "corpus",
    "grounding",
    "agent",
    "train",
    "eval",
    "sim",
    "report",
    "cli",
)

# Modules that make a stage's artifacts. Another stage runs them only through a Marin step (its
# `steps` module) or the command line; readers of what they make live in lower modules.
GENERATORS = ("terminalworld.tasks.make", "terminalworld.corpus.recorder", "terminalworld.sim.probes")

# Modules that load only inside another environment, and the packages that environment has
# beyond the standard library. Their own imports (function-level too) stay inside it, and the
# project modules they import load in a bare interpreter that has only those packages.
FOREIGN = {
    "terminalworld.agent.harbor.agent": ("harbor",),
    "terminalworld.agent.harbor.environment": ("harbor",),
    "terminalworld.sim.harbor_environment": ("harbor", "tokenizers", "re2"),
    "terminalworld.agent.harbor.job": ("harbor",),
    "terminalworld.train.skyrl.plugin": ("skyrl", "ray", "megatron", "torch", "transformers", "numpy"),
}


def _stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "errors"  # the package itself: its version, nothing else


def _third_party(path: Path) -> set[str]:
    """Top-level names of the non-project packages a file imports (function-level imports included)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
    return out - {"terminalworld", "__future__"} - set(sys.stdlib_module_names)


def _graph() -> dict[str, set[str]]:
    return {_module(p): _imports(p) - {_module(p)} for p in SRC.rglob("*.py")}


def test_imports_go_down_the_stages():
    rank = {s: i for i, s in enumerate(STAGES)}
    upward = [f"{m} -> {d}" for m, deps in _graph().items() for d in deps if rank[_stage(d)] > rank[_stage(m)]]
    assert upward == []


# A module named by a string: `"terminalworld.x.y"` (run with `python -m`) or `"terminalworld.x.y:Name"`
# (an import path). Loaded at run time, it is an import that the graph above does not see.
_NAMED = re.compile(r"terminalworld(\.\w+)+(:\w+)?")

# Modules that load modules by a name computed at run time (`importlib.import_module`, `__import__`),
# and what they load: never this package's, which the string check could not see.
LOADS_BY_NAME = {"terminalworld.tasks.casecheck": "a generated task's own code, inside the sandbox"}


def _named_by_strings(tree: ast.Module) -> set[str]:
    """Modules of the package that the file's string constants name, whole."""
    return {
        node.value.split(":")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _NAMED.fullmatch(node.value)
    }


def _loads_by_name(tree: ast.Module) -> bool:
    """Whether the file calls `import_module` or `__import__` (under any owner)."""
    return any(
        isinstance(node, ast.Call)
        and (getattr(node.func, "attr", None) or getattr(node.func, "id", None)) in ("import_module", "__import__")
        for node in ast.walk(tree)
    )


def _upward_by_name(module: str, tree: ast.Module) -> list[str]:
    rank = {s: i for i, s in enumerate(STAGES)}
    named = _named_by_strings(tree) - set(FOREIGN)  # loaded by their environment's own process
    upward = [f"{module} -> {d} (by name)" for d in sorted(named) if rank[_stage(d)] > rank[_stage(module)]]
    loads = [f"{module} loads by a computed name"] if _loads_by_name(tree) and module not in LOADS_BY_NAME else []
    return upward + loads


def test_no_module_reaches_upward_by_name():
    # A stage above hands its function to the caller that owns both stages (the command line or a
    # step), rather than a module below naming it by import path. Modules that load only inside
    # another environment are named to that environment's process, which loads them there.
    found = [f for p in SRC.rglob("*.py") for f in _upward_by_name(_module(p), ast.parse(p.read_text()))]
    assert found == []


def test_the_reach_by_name_rule_sees_an_import_path_and_a_computed_import():
    loop = 'LOOP = "terminalworld.sim.harbor_loop:write_closed_loop"\n'
    assert _upward_by_name("terminalworld.agent.evaluate", ast.parse(loop)) == [
        "terminalworld.agent.evaluate -> terminalworld.sim.harbor_loop (by name)"
    ]
    computed = "import importlib\nmodule = importlib.import_module(name)\nother = __import__(name)\n"
    assert _upward_by_name("terminalworld.agent.evaluate", ast.parse(computed)) != []
    down = 'JOB = "terminalworld.core.records"\nENV = "terminalworld.sim.harbor_environment:SimulatedEnvironment"\n'
    assert _upward_by_name("terminalworld.agent.evaluate", ast.parse(down)) == []


def test_no_stage_imports_another_stages_generator():
    reach = [
        f"{m} -> {d}"
        for m, deps in _graph().items()
        for d in deps
        if d in GENERATORS and _stage(m) != _stage(d) and not m.endswith(".steps") and m != "terminalworld.cli"
    ]
    assert reach == []


def test_foreign_environment_modules_import_only_what_their_environment_has():
    found = {_module(p) for p in SRC.rglob("*.py") if _third_party(p) & {"harbor", "skyrl", "ray", "megatron"}}
    found |= {m for m, deps in _graph().items() if deps & set(FOREIGN)}  # and what extends such a module
    assert found == set(FOREIGN)  # every module that needs Harbor or SkyRL is declared
    for module, packages in FOREIGN.items():
        path = SRC.parent / (module.replace(".", "/") + ".py")
        assert _third_party(path) <= set(packages), module


# Loads a module in an interpreter without site-packages; the environment's own packages are
# stand-ins (any attribute, call or subclass works), so any other import fails.
_BARE_IMPORT = """
import importlib, importlib.abc, importlib.machinery, sys, types
sys.path.insert(0, {src!r})
allowed = set({allowed!r})

class Stub:
    def __init__(self, *a, **k): pass
    def __call__(self, *a, **k): return Stub()
    def __getattr__(self, name): return Stub()

class StubModule(types.ModuleType):
    __path__ = []
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (Stub,), {{}})

class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in allowed:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
    def create_module(self, spec):
        return StubModule(spec.name)
    def exec_module(self, module):
        pass

sys.meta_path.insert(0, Finder())
importlib.import_module({module!r})
"""


def test_foreign_environment_modules_load_in_a_bare_interpreter():
    for module, packages in FOREIGN.items():
        code = _BARE_IMPORT.format(src=str(SRC.parent), allowed=list(packages), module=module)
        r = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True)
        assert r.returncode == 0, f"{module}: {r.stderr.strip().splitlines()[-1:]}"


def test_the_bare_import_check_fails_on_a_module_outside_the_environment():
    code = _BARE_IMPORT.format(src=str(SRC.parent), allowed=["harbor"], module="terminalworld.core.render")
    r = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True)
    assert r.returncode != 0 and "numpy" in r.stderr


def test_one_function_drives_every_episode():
    # `Episode.act` and `Episode.observe` are called only by the episode driver.
    driving = [
        p.relative_to(SRC).as_posix()
        for p in SRC.rglob("*.py")
        if any(call in p.read_text() for call in ("episode.act(", "episode.observe(", "while episode.outcome"))
    ]
    assert driving == ["agent/driver.py"]


def test_no_import_cycle():
    graph = _graph()
    state: dict[str, int] = {}

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*stack[stack.index(d) :], d]))
            if d in graph and not state.get(d):
                visit(d, [*stack, d])
        state[m] = 2

    for m in sorted(graph):
        if not state.get(m):
            visit(m, [m])


def test_a_step_runs_the_stages_own_function_on_its_own_config():
    # No adapter between a step and its stage: no `*_fn` step function, no path-pair plumbing.
    adapters = [
        f"{p.relative_to(SRC)}:{node.name}"
        for p in SRC.rglob("steps.py")
        for node in ast.parse(p.read_text()).body
        if isinstance(node, ast.FunctionDef) and node.name.endswith("_fn")
    ]
    step_module = {n.name for n in ast.parse((SRC / "pipeline" / "step.py").read_text()).body if hasattr(n, "name")}
    assert adapters == [] and not {"step", "inside", "joined", "model_input"} & step_module


def _defined_in(tree: ast.Module) -> set[str]:
    """Names a module defines itself: its functions and classes, nested ones too."""
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}


def test_every_step_runs_a_function_its_stage_exports():
    # `config_step(name, run, config, ...)`: `run` is a library function imported by name, never a
    # lambda, a local adapter or a function the builder's module writes for the step.
    found, wrong = 0, []
    for p in SRC.rglob("*.py"):
        tree = ast.parse(p.read_text())
        own = _defined_in(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "config_step" and len(node.args) > 1:
                found += 1
                run = node.args[1]
                if not isinstance(run, ast.Name) or run.id in own:
                    wrong.append(f"{p.relative_to(SRC)}:{node.lineno} {ast.unparse(run)}")
    assert found >= 10 and wrong == []


def test_every_import_path_names_a_definition():
    # Harbor's environments and agent are named by import path ("terminalworld.x.y:Name", loaded
    # where they run), and modules run with `python -m` by name: each names a module that defines it.
    paths = [
        node.value
        for p in SRC.rglob("*.py")
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _NAMED.fullmatch(node.value)
    ]
    missing = []
    for path in paths:
        module, _, name = path.partition(":")
        file = SRC.parent / (module.replace(".", "/") + ".py")
        if not file.is_file() or (name and name not in _defined_in(ast.parse(file.read_text()))):
            missing.append(path)
    assert len(paths) >= 5 and missing == []


# Markdown a report module could write by hand: a table row, or an edit of a heading.
_HAND_TABLE = ("|---", "| ")


def test_each_report_table_is_data_with_one_renderer():
    # Tables are `report.tables.Table` values rendered by `report.tables` alone, for `report.md` and the
    # site alike: no report module writes a table row itself or edits another's Markdown.
    written = []
    for p in (SRC / "report").glob("*.py"):
        if p.name == "tables.py":
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            text = node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""
            if any(line.lstrip().startswith(_HAND_TABLE) for line in text.splitlines()):
                written.append(f"{p.name}:{node.lineno} {node.value[:40]!r}")
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "replace" and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and str(first.value).startswith("#"):
                    written.append(f"{p.name}:{node.lineno} replace({first.value!r})")
    assert written == []


def test_the_report_rule_sees_a_hand_written_row():
    bad = ast.parse('lines.append(f"| {name} | {x:.2f} |")')
    strings = [n.value for n in ast.walk(bad) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert any(s.lstrip().startswith(_HAND_TABLE) for s in strings)


def test_modules_stay_small():
    sizes = {p.relative_to(SRC).as_posix(): len(p.read_text().splitlines()) for p in SRC.rglob("*.py")}
    assert {m: n for m, n in sizes.items() if n > 450} == {}


def test_public_functions_and_classes_have_docstrings():
    missing = []

    def check(body, where: Path) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_"):
                if ast.get_docstring(node) is None:
                    missing.append(f"{where.relative_to(SRC)}:{node.lineno} {node.name}")
                if isinstance(node, ast.ClassDef):
                    check(node.body, where)

    for p in SRC.rglob("*.py"):
        check(ast.parse(p.read_text()).body, p)
    assert missing == []


# Imports every module (but those of foreign environments) and prints what importing did: the
# signals whose handler changed, and each call a project module made itself (its own line the
# caller) that outlives the import: a signal handler, a fork hook, an exit hook, a loaded library,
# a started thread; and any environment variable set. Importing is reading: only the process that
# runs sandboxes installs its cleanup, and only code that needs libc loads it.
_IMPORT_ALL = """
import atexit, ctypes, importlib, os, signal, sys, threading
sys.path.insert(0, {path!r})
before = {{s: signal.getsignal(s) for s in signal.valid_signals()}}
environ = dict(os.environ)
calls = []

def watch(owner, name):
    real = getattr(owner, name)
    def wrapper(*args, **kwargs):
        caller = sys._getframe(1).f_code.co_filename
        if {src!r} in caller:
            calls.append(f"{{name}} from {{caller.split({src!r})[1]}}")
        return real(*args, **kwargs)
    setattr(owner, name, wrapper)

for owner, name in ((signal, "signal"), (os, "register_at_fork"), (atexit, "register"), (threading.Thread, "start")):
    watch(owner, name)
real_init = ctypes.CDLL.__init__
def cdll_init(self, *args, **kwargs):
    caller = sys._getframe(1).f_code.co_filename
    if {src!r} in caller:
        calls.append(f"CDLL from {{caller.split({src!r})[1]}}")
    real_init(self, *args, **kwargs)
ctypes.CDLL.__init__ = cdll_init
for module in {modules!r}:
    importlib.import_module(module)
print(sorted(signal.Signals(s).name for s, h in before.items() if signal.getsignal(s) != h))
print(sorted(set(calls)))
print(sorted(k for k in os.environ if os.environ.get(k) != environ.get(k)))
"""


def _import_all(modules: list[str], src: Path = SRC) -> list[str]:
    code = _IMPORT_ALL.format(modules=modules, src=str(src), path=str(src.parent))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()


def test_importing_any_module_has_no_side_effect():
    assert _import_all(sorted(m for m in _graph() if m not in FOREIGN)) == ["[]", "[]", "[]"]


def test_the_import_check_sees_a_side_effect(tmp_path):
    # The check itself: a module that loads libc and installs a handler at import is caught.
    package = tmp_path / "noisy"
    package.mkdir()
    (package / "__init__.py").write_text("")
    code = "import ctypes, signal\nctypes.CDLL(None)\nsignal.signal(signal.SIGHUP, lambda *a: None)\n"
    (package / "probe.py").write_text(code)
    out = _import_all(["noisy.probe"], package)
    assert out[0] == "['SIGHUP']" and "CDLL from" in out[1] and "signal from" in out[1]


def test_the_signal_check_sees_the_cleanup_once_asked_for():
    code = "import signal\nfrom terminalworld.core import scratch\nscratch.install_cleanup()\n"
    code += "print(signal.getsignal(signal.SIGTERM) is scratch._on_signal)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "True"


def test_one_parse_path():
    """Every command line of the package, its experiments and scripts goes through
    `options.parse` (draccus): no other module builds an argparse parser or a Click command."""
    root = SRC.parents[1]
    files = [*SRC.rglob("*.py"), *(root / "experiments").glob("*.py"), *(root / "scripts").glob("*.py")]
    others = []
    for path in files:
        if path == SRC / "options.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import | ast.ImportFrom) else []
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if {"argparse", "click"} & {*names, module} or (module or "").startswith("click"):
                others.append(str(path.relative_to(root)))
    assert len(files) > 50 and others == []
