"""The hand-written pages tell the truth about what the project does.

Every sentence of `docs/*.md` that says what the demo, the miniature or the pilot does (`CLAIM`
finds them) is registered here, page by page and word for word, with the checks that make it true:
against the committed snapshots' reports and rows (`docs/snapshots/*/`, the demo's in
`docs/snapshots/local-demo`), or, for what a graph or an option is, against the experiment files and
the code. Some claims that `CLAIM` cannot
find (the recipes, the grounding options) are registered the same way. So:

- a new snapshot or a changed demo that contradicts a page fails its check until the page is
  rewritten;
- a new or edited sentence is unregistered until it is registered with a check, and a registered
  sentence that is no longer on its page fails too, so an edit to one page is caught on that page
  even when another page says the same.
"""

import ast
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import get_args

import pytest

from tests.paths import REPO_ROOT

DOCS = REPO_ROOT / "docs"
SNAPSHOTS = DOCS / "snapshots"
SNAPSHOT = SNAPSHOTS / "local-demo"
EXPERIMENTS = REPO_ROOT / "experiments"
RECORD = ".artifact.json"

# A sentence about what the demo (the miniature, ECHO's miniature, the local demo) or the pilot does.
CLAIM = re.compile(
    r"\b(?:the|ECHO's)\s+(?:[\w-]+\s+)?\[?(?:miniature|demo|pilot)\b|\bin miniature\b|\bno complete pilot run\b",
    re.I,
)


# The committed snapshot, read.


@cache
def _manifest() -> dict:
    return json.loads((SNAPSHOT / "snapshot.json").read_text())


def _report_dir(name: str) -> Path:
    ident = next(r for r in _manifest()["reports"] if r.startswith(f"terminalworld/reports/{name}@"))
    return SNAPSHOT / ident.replace("@", "/")


def _json(name: str, file: str) -> dict:
    return json.loads((_report_dir(name) / file).read_text())


def _record(dep: str) -> dict:
    """The recorded `.artifact.json` of a step of the snapshot, by `name@version`."""
    return json.loads((SNAPSHOT / dep.replace("@", "/") / RECORD).read_text())


def _config(dep: str) -> dict:
    """The recorded config of an upstream step of the snapshot, by `name@version`."""
    return _record(dep)["config"]


_ABSENT = object()


def _field(config, *keys: str):
    """A recorded config's field by any of its names (`exclude_from` was renamed
    `exclude_repos_from`), wherever it is nested: a stage's config may wrap its job's (`job`,
    `sampling`). Raises `KeyError` when no name is found, so a check never passes on a missing field."""

    def find(value, key):
        if isinstance(value, dict):
            if key in value:
                return value[key]
            value = list(value.values())
        for v in value if isinstance(value, list) else []:
            if (found := find(v, key)) is not _ABSENT:
                return found
        return _ABSENT

    for key in keys:
        if (found := find(config, key)) is not _ABSENT:
            return found
    raise KeyError(f"none of {keys} in the recorded config")


def _path(value) -> str:
    """A recorded path: a string, or the older `[folder, file]` pair joined."""
    return value if isinstance(value, str) else "/".join(value)


def _subset_size(config) -> int:
    """The size of the one training subset a tokenize step's config reads (`subset-N.jsonl.gz`)."""
    (size,) = set(re.findall(r"subset-(\d+)\.jsonl\.gz", json.dumps(config)))
    return int(size)


def _deps(name: str) -> list[str]:
    deps, todo = [], [json.loads((_report_dir(name) / RECORD).read_text())]
    while todo:
        for dep in todo.pop().get("deps", []):
            if dep not in deps and (SNAPSHOT / dep.replace("@", "/") / RECORD).exists():
                deps.append(dep)
                todo.append(_record(dep))
    return deps


def _steps(prefix: str) -> list[str]:
    return [d for d in dict.fromkeys(_deps("world-model-probe") + _deps("echo-miniature")) if d.startswith(prefix)]


def _names() -> set[str]:
    return {d.split("@")[0] for d in _steps("")}


def _models() -> list[str]:
    return [a["arm"] for a in _json("world-model-probe", "report.json")["arms"]]


def _reports() -> list[dict]:
    return [_record(r) for r in _manifest()["reports"]]


# The checks: each returns whether its claim holds (they are cached: several sentences share one).


@cache
def tiny_models() -> bool:
    """A 2-layer, width-32 Qwen3 pretrained on 60 trajectories, and every arm fine-tuned from it."""
    (base,) = _steps("checkpoints/terminalworld/base-")
    shape = _field(_config(base), "tiny")
    arms = [_config(c) for c in _steps("checkpoints/terminalworld/") if c != base]
    text = _config(next(d for d in _steps("terminalworld/tokenized/pretrain-")))
    pretrain_rows = _subset_size(text) - _field(text, "skip")
    return (
        (shape["num_layers"], shape["hidden_dim"], pretrain_rows) == (2, 32, 60)
        and len(arms) == 3
        and all(base.split("@")[0] in _path(_field(c, "init_from")) and _field(c, "tiny") is None for c in arms)
    )


@cache
def one_scale() -> bool:
    """Every arm trained on the same 40-trajectory subset, at one scale."""
    data = [_config(d) for d in _steps("terminalworld/tokenized/") if "pretrain-" not in d]
    names = {d.split("@")[0].rsplit("-", 1)[1] for d in _steps("terminalworld/tokenized/")}
    return names == {"demo"} and all(_subset_size(c) == 40 and _field(c, "skip") == 0 for c in data)


@cache
def agent_grade() -> bool:
    """Every model graded as an agent on the same 4 held-out tasks, from repositories unseen in training."""
    report = _json("world-model-probe", "report.json")
    grades = _steps("agent-eval/")
    (tasks,) = {_path(_field(_config(g), "tasks")) for g in grades}
    task_step = next(d for d in _steps("terminalworld/tasks/heldout@"))
    return (
        report["agent"]["tasks"] == 4
        and len(grades) == len(_models())
        and all(a["scored_trials"] == 4 for a in report["arms"])
        and tasks.endswith(task_step.replace("@", "/"))
        and bool(_field(_config(task_step), "exclude_from", "exclude_repos_from"))  # repositories unseen in training
    )


@cache
def no_solve() -> bool:
    """No model solves any task."""
    return all(
        a["solved_trials"] == 0 and a["pass_at_1"] == 0 for a in _json("world-model-probe", "report.json")["arms"]
    )


@cache
def sim_tiers() -> bool:
    """Tiers 1 and 2 for every model, tier 3 for the full-transcript model only."""
    tiers = _json("world-model-probe", "report.json")["sim"]["tiers"]
    return tiers == {m: [1, 2, 3] if m == "full" else [1, 2] for m in _models()}


@cache
def sim_weak() -> bool:
    """Free-running similarity below 0.5 for every model, in tiers 1 and 2."""
    sim = _json("world-model-probe", "metrics.json")["sim"]["checkpoints"]
    free = [row[t] for row in sim.values() for t in ("tier1", "tier2") if t in row]
    return len(free) == 2 * len(_models()) and all(r["similarity"] < 0.5 for r in free)


@cache
def degeneration_unmeasured() -> bool:
    """A 128-token cap, and no output long enough for the degeneration rule."""
    sim = _json("world-model-probe", "metrics.json")["sim"]["checkpoints"]
    caps = {_field(_config(d), "max_new_tokens") for d in _steps("sim-eval/")}
    return caps == {128} and all(
        row[t]["degenerate_rate_long"] is None for row in sim.values() for t in ("tier1", "tier2")
    )


@cache
def echo_without_signal() -> bool:
    """ECHO's three arms for 5 steps from the demo's full-transcript checkpoint, no reward anywhere."""
    arms = _json("echo-miniature", "echo_report.json")["arms"]
    policies = {_path(_field(_config(d), "policy")) for d in _steps("terminalworld/echo/")}
    return (
        set(arms) == {"grpo", "echo", "env-only"}
        and all(len(a["reward_per_step"]) == 5 and not any(a["reward_per_step"]) for a in arms.values())
        and len(policies) == 1
        and "/checkpoints/terminalworld/full-demo/" in policies.pop()
    )


@cache
def echo_on_policy() -> bool:
    """The three arms from the demo's full checkpoint on the demo's generated tasks, with identical
    seeds, λ = 0 for GRPO and 0.05 for ECHO, each paired on the demo's held-out trajectories."""
    from terminalworld.train.echo.miniature import EchoRecipe

    configs = {_field(_config(d), "arm"): _config(d) for d in _steps("terminalworld/echo/")}
    (heldout,) = _steps("heldout/")
    lam = {arm: EchoRecipe(arm=arm, lam=c["recipe"]["lam"]).loss() for arm, c in configs.items()}
    return (
        set(configs) == {"grpo", "echo", "env-only"}
        and len({c["recipe"]["seed"] for c in configs.values()}) == 1
        and all(
            _path(c["tasks"]).endswith("/terminalworld/tasks/train/" + heldout.split("@")[1]) for c in configs.values()
        )
        and all(f"/{heldout.replace('@', '/')}" in _path(c["heldout"]) for c in configs.values())
        and all(
            _path(c["policy"]).split("/checkpoints/")[1].startswith("terminalworld/full-demo/")
            for c in configs.values()
        )
        and (lam["grpo"].lam, lam["echo"].lam, lam["env-only"].env_only) == (0.0, 0.05, True)
    )


@cache
def local_processes() -> bool:
    """Every step of the demo's and ECHO miniature's graphs runs as a local process, and none uses
    vLLM (the HF backends score, serve and simulate)."""
    from marin.experiment.cli import graph_handles

    from terminalworld.pipeline.step import describe_resources
    from tests.conftest import load_experiment

    demo, echo = load_experiment("local_demo"), load_experiment("echo_local")
    graph = demo.build()
    handles = graph_handles([t.step for t in (graph.report, graph.eval_sets, echo.build())])
    configs = json.dumps([_config(d) for d in _steps("")])
    return all(describe_resources(h) == "local process" for h in handles) and "vllm" not in configs


@cache
def demo_stages() -> bool:
    """A recorded corpus, a pretrained base, each arm fine-tuned from it, and every model scored on
    held-out rows and graded as an agent and as a simulator, in the probe report."""
    names, models = _names(), _models()
    return (
        models == ["base", "assistant", "full", "user"]
        and "terminalworld/corpus/recorded" in names
        and {f"checkpoints/terminalworld/{m}-demo" for m in models} <= names
        and all(
            {f"sim-ppl-eval/sim_ppl_{m}", f"agent-eval/heldout-tasks/{m}", f"sim-eval/tier1/{m}"} <= names
            for m in models
        )
    )


@cache
def every_stage() -> bool:
    """Besides `demo_stages`: subsets, a held-out set, a tokenized set per arm, tier 2 and 3, and
    ECHO's three arms, all in the graphs of the snapshot's two reports."""
    names = _names()
    return (
        demo_stages()
        and {
            "terminalworld/subsets/swe-zero",
            "heldout/sim_ppl_heldout_24",
            "terminalworld/tokenized/assistant-demo",
            "terminalworld/tokenized/full-demo",
            "terminalworld/tokenized/user-demo",
            "sim-eval/tier2/base",
            "sim-eval/tier3/full",
            "terminalworld/echo/grpo",
            "terminalworld/echo/echo",
            "terminalworld/echo/env-only",
        }
        <= names
    )


@cache
def recorded_corpus() -> bool:
    """160 recorded trajectories plus the solving episodes of 12 generated tasks, and every subset
    drawn from that recording (no SWE-ZERO download)."""
    (corpus,) = _steps("terminalworld/corpus/")
    (tasks,) = _steps("terminalworld/tasks/train@")
    (subsets,) = _steps("terminalworld/subsets/")
    config = _config(corpus)
    return (
        corpus.startswith("terminalworld/corpus/recorded@")
        and _field(config, "trajectories") == 160
        and _path(_field(config, "tasks")).endswith(tasks.replace("@", "/"))
        and _field(_config(tasks), "n") == 12
        and _record(subsets)["deps"] == [corpus]
    )


@cache
def one_run() -> bool:
    """The snapshot's reports are the demo's and ECHO miniature's, each from one run at a clean commit of
    this repository's history (ECHO's may come from an earlier run of its own)."""
    import subprocess

    reports = _reports()
    in_history = [
        subprocess.run(
            ["git", "merge-base", "--is-ancestor", r["provenance"]["base_commit"], "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
        ).returncode
        == 0
        for r in reports
    ]
    return (
        [r["name"] for r in reports]
        == ["terminalworld/reports/world-model-probe", "terminalworld/reports/echo-miniature"]
        and all(in_history)
        and not any(r["provenance"]["dirty"] for r in reports)
        and [r["provenance"]["command_line"][0] for r in reports]
        == ["experiments/local_demo.py", "experiments/echo_local.py"]
    )


@cache
def agent_beside_ppl() -> bool:
    """The probe report's *Agent and world model* section: every model's pass@1 beside its PPL."""
    rows = _json("world-model-probe", "metrics.json")["agent"]["rows"]
    return (
        "## Agent and world model" in (_report_dir("world-model-probe") / "report.md").read_text()
        and [r["name"] for r in rows] == _models()
        and all(r["pass_at_1"] is not None and r["median_ppl"] for r in rows)
    )


@cache
def local_prefix() -> bool:
    """The demo's artifacts are written under `./local-prefix` (the experiment's default prefix), which
    the snapshot names logically."""
    default = 'os.environ.setdefault("MARIN_PREFIX", os.path.abspath("local-prefix"))'
    return default in (EXPERIMENTS / "local_demo.py").read_text() and all(
        path.startswith("{MARIN_PREFIX}/") for path in _manifest()["from"]
    )


@cache
def no_grounding_in_demo() -> bool:
    """No step of the snapshot was configured with a grounding mode, and neither experiment names one."""

    def modes(value) -> list:
        if isinstance(value, dict):
            return [v for k, v in value.items() if k == "grounding"] + [m for v in value.values() for m in modes(v)]
        return [m for v in value for m in modes(v)] if isinstance(value, list) else []

    return all(m in (None, "none") for d in _steps("") for m in modes(_config(d))) and not any(
        "grounding" in (EXPERIMENTS / f"{name}.py").read_text() for name in ("local_demo", "echo_local")
    )


@cache
def grounding_options() -> bool:
    """`score` and `sim-eval` take every grounding option, `agent-eval` the mode and the budget."""
    from terminalworld.agent.evaluate import AgentEvalConfig
    from terminalworld.eval.scoring import ScoreConfig
    from terminalworld.grounding.modes import MODES, GroundingMode, GroundingOptions
    from terminalworld.sim.evaluate import SimEvalConfig

    every = {"grounding", "grounding_budget", "grounding_tasks", "grounding_store", "grounding_output_chars"}
    return (
        MODES == get_args(GroundingMode) == ("none", "retrieved", "replayed", "hybrid")
        and {f.name for f in fields(GroundingOptions)} == every
        and issubclass(ScoreConfig, GroundingOptions)
        and issubclass(SimEvalConfig, GroundingOptions)
        and {"grounding", "grounding_budget"} <= {f.name for f in fields(AgentEvalConfig)}
        and GroundingOptions().grounding == "none"
    )


@cache
def grounding_measured_untrained_with_it() -> bool:
    """The grounding page's numbers come from SmolLM2-135M-Instruct's stock weights, never trained with
    a grounding block, and the pilot's recipe never names grounding."""
    commands = (REPO_ROOT / "benchmarks" / "grounding.py").read_text().split('"""')[1]
    models = re.findall(r"--model(?:-path)? (\S+)", commands)
    return (
        set(models) == {"smollm2"}
        and _pilot().Pilot().base == "smollm2"
        and "grounding" not in (EXPERIMENTS / "pilot.py").read_text()
    )


GROUNDING_RESULTS = REPO_ROOT / "benchmarks" / "results" / "grounding"


def _grounding_summary(name: str) -> dict:
    return next(r for r in _gz_rows(GROUNDING_RESULTS / name) if r.get("_summary"))


@cache
def grounding_on_demo_rows() -> bool:
    """The grounding page's rows are the demo's held-out rows and probes (the snapshot's steps, in
    the shape the page gives), as the snapshot commits them: `grounding.json`'s SHA-256 of each is
    the committed file's, and every mode scored all of them."""
    import gzip
    import hashlib

    benchmark = REPO_ROOT / "benchmarks"
    commands = (benchmark / "grounding.py").read_text().split('"""')[1]
    [heldout] = _steps("heldout/sim_ppl_heldout_24@")
    [probes] = _steps("terminalworld/probes@")
    version = heldout.split("@")[1]
    committed = {
        "heldout.jsonl": SNAPSHOT / heldout.replace("@", "/") / "sim_ppl_heldout_24.jsonl.gz",
        "probes.jsonl": SNAPSHOT / probes.replace("@", "/") / "probes.jsonl.gz",
    }
    sha = {k: hashlib.sha256(gzip.decompress(p.read_bytes())).hexdigest() for k, p in committed.items()}
    modes = ("none", "retrieved", "replayed", "hybrid")
    return (
        (_field(_config(heldout), "n"), _field(_config(heldout), "context_turns"), _field(_config(probes), "n"))
        == (24, 3, 20)
        and bool(_field(_config(heldout), "train"))
        and bool(_field(_config(probes), "exclude_from", "exclude_repos_from"))  # unseen repos
        and _field(_config(next(iter(_steps("terminalworld/corpus/recorded@")))), "max_output_chars") == 1000
        and f"V={version}" in commands
        and "$S/heldout/sim_ppl_heldout_24/$V/sim_ppl_heldout_24.jsonl.gz > DATA/heldout.jsonl" in commands
        and "$S/terminalworld/probes/$V/probes.jsonl.gz > DATA/probes.jsonl" in commands
        and all(
            (
                _grounding_summary(f"score-heldout-{m}.jsonl.gz")["n_trajectories"],
                _grounding_summary(f"score-probes-{m}.jsonl.gz")["n_trajectories"],
            )
            == (24, 20)
            for m in modes
        )
        and json.loads((GROUNDING_RESULTS / "grounding.json").read_text())["data_sha256"] == sha
    )


@cache
def grounding_pilot_awaits_rerun() -> bool:
    """The grounding page measures no pilot checkpoint: no committed scores row names one, and the
    script's commands say the pilot's are measured from its re-run."""
    commands = (REPO_ROOT / "benchmarks" / "grounding.py").read_text().split('"""')[1]
    names = {_grounding_summary(p.name)["model_name"] for p in GROUNDING_RESULTS.glob("score-*.jsonl.gz")}
    return (
        names == {"smollm2"} and "The pilot's checkpoints (`experiments/pilot.py`) are measured here again" in commands
    )


def _pilot():
    from tests.conftest import load_experiment

    return load_experiment("pilot")


@cache
def _pilot_graph() -> tuple:
    """The pilot module and the steps of its default graph."""
    from marin.experiment.cli import graph_handles

    pilot = _pilot()
    graph = pilot.build(pilot.Pilot())
    return pilot, graph_handles([graph.report.step, graph.eval_sets.step])


@cache
def pilot_precision_measured() -> bool:
    """Both pilot presets train in Marin's policy and the CPU preset scores and generates in float32,
    as the committed precision benchmark decided: on this CPU kind bf16 SFT is faster, bf16 scoring
    misses the agreement bound (so `auto` is float32) and bf16 decoding is slower; the ratios the
    plan applies are the benchmark's."""
    from terminalworld.core.precision import resolve
    from terminalworld.pipeline.machines import machines
    from terminalworld.train.sft import MARIN_PRECISION

    pilot, cpu = _pilot(), _pilot().Pilot()
    results = json.loads((REPO_ROOT / "benchmarks" / "results" / "precision.json").read_text())
    measured = {
        "sft": results["sft"]["speedup_bf16_compute"],
        "score": results["scoring"]["speedup_bfloat16"],
        "generate": results["generation_one_thread"]["speedup_bfloat16"],
        "prefill": results["generation_one_thread"]["float32"]["prefill_s"]
        / results["generation_one_thread"]["bfloat16"]["prefill_s"],
    }
    return (
        (cpu.precision, cpu.sft_mp) == ("float32", MARIN_PRECISION)
        and pilot.PRESETS["gpu"].sft_mp == MARIN_PRECISION
        and resolve("auto", "cpu", frozenset(results["bf16_features"])) == "float32"
        and measured["sft"] > 1.2
        and measured["generate"] < 1
        and all(abs(machines().bf16_ratios[k] - v) < 0.005 for k, v in measured.items())
        and max(r["load"] for r in (results["sft"]["f32"], results["sft"]["p=f32,c=bfloat16"])) < 2
    )


def _batched_attempts_measured(recipe, costs) -> bool:
    """The agent steps run their trials at once and the CPU columns charge them the generation ratios
    committed in benchmarks/results/sampled_batching.json."""
    from terminalworld.pipeline.machines import machines

    measured = json.loads((REPO_ROOT / "benchmarks" / "results" / "sampled_batching.json").read_text())
    ratio = measured["ratio_to_one_at_a_time"]["cached"][str(recipe.concurrent_trials)]
    batched = machines().quiet.batched[recipe.concurrent_trials]
    agent = [w for n, w in costs.items() if n.startswith("agent ")]
    return all(w.rows == recipe.concurrent_trials for w in agent) and (ratio["prefill"], ratio["generate"]) == (
        batched.prefill,
        batched.generate,
    )


# The pilot's own SFT steps, alone on the cores: float32, then the recipe's bf16 compute.
SFT_RATE = REPO_ROOT / "benchmarks" / "results" / "pilot_sft_rate.json"
SFT_RATE_BF16 = REPO_ROOT / "benchmarks" / "results" / "pilot_sft_rate_bf16.json"


@cache
def pilot_shard_plan() -> bool:
    """In shards the plan estimates 9h 20m on the quiet figures with SFT in bf16 as its recipe trains
    (both SFT rates read from the pilot's own steps), in 8 shards each within 90 minutes, the
    longest a (b) chain at 1h 27m; two seeds, the base control, two ladder levels."""
    from terminalworld.pipeline.cost import hours
    from terminalworld.pipeline.machines import machines
    from terminalworld.report.shard_run import SHARD_BUDGET_S, recipe_column

    pilot = _pilot()
    recipe = pilot.Pilot()
    shards = pilot.build(recipe).shards
    column = recipe_column(recipe)
    est = {n: s.seconds(column) for n, s in shards.items()}
    costs = {n: w for s in shards.values() for n, w in s.costs.items()}
    return (
        hours(sum(est.values())) == "9h 20m"
        and max(est, key=est.get) == "full-s1"
        and hours(est["full-s1"]) == "1h 27m"
        and len(shards) <= 8
        and max(est.values()) <= SHARD_BUDGET_S == 90 * 60
        and machines().quiet.sft_tokens_per_s == json.loads(SFT_RATE.read_text())["tokens_per_s"]
        and column.sft_tokens_per_s == json.loads(SFT_RATE_BF16.read_text())["tokens_per_s"]
        and _batched_attempts_measured(recipe, costs)
        and len(recipe.seeds) == 2
        and "sft base-control" in costs
        and len(recipe.agent_levels) == 2
    )


@cache
def pilot_scales() -> bool:
    """The pilot's recipe: SmolLM2 (its dequantised Q4_1 GGUF), the three arms, three nested scales 3x apart."""
    recipe = _pilot().Pilot()
    steps = list(recipe.scale_steps)
    return (
        recipe.base == "smollm2"
        and tuple(recipe.arms) == ("assistant", "full", "user")
        and len(steps) == 3
        and all(b == 3 * a for a, b in pairwise(steps))
    )


@cache
def pilot_local() -> bool:
    """Every step of the pilot's default graph runs on this machine, as a local process."""
    from terminalworld.pipeline.step import describe_resources

    return all(describe_resources(h) == "local process" for h in _pilot_graph()[1])


@cache
def pilot_departures() -> bool:
    """The pilot's report step is given every departure the Pilot page lists, and its page prints them."""
    import inspect

    from marin.execution.lazy import materialized_config

    from terminalworld.pipeline.artifacts import PILOT_REPORT
    from terminalworld.report import pages

    pilot, handles = _pilot_graph()
    (report,) = [h for h in handles if h.name == PILOT_REPORT]
    departures = materialized_config(report, "local-prefix").departures
    listed = pilot.departures_from(str(pilot.PAGE))
    return (
        len(listed) >= 8
        and departures == listed
        and "Departures from the write-up" in inspect.getsource(pages.pilot_page)
    )


@cache
def committed_snapshots_carry_rows() -> bool:
    """Every committed snapshot lists the row sets its figures come from, and each listed set holds
    row files, so every figure a page quotes from it can be recomputed."""
    manifests = sorted(SNAPSHOTS.glob("*/snapshot.json"))
    for path in manifests:
        manifest = json.loads(path.read_text())
        folders = [path.parent / dep.replace("@", "/") for dep in manifest["rows"]]
        if not folders or "rows_note" in manifest:
            return False
        if not all(any(_row_file(p) for p in f.rglob("*")) for f in folders):
            return False
    return bool(manifests)


def _row_file(path: Path) -> bool:
    """A row file as a snapshot keeps it: gzipped, of a kind `report.snapshot` copies."""
    from terminalworld.report.snapshot import ROW_SUFFIXES

    return path.name.endswith(".gz") and path.name.removesuffix(".gz").endswith(ROW_SUFFIXES)


@cache
def pilot_results_await_rows() -> bool:
    """No committed snapshot holds a pilot report yet, every committed snapshot carries its rows, and
    the pilot's recipe has two seeds: its results land with a snapshot of its rows, none before."""
    from terminalworld.pipeline.artifacts import PILOT_REPORT

    reports = [r for p in SNAPSHOTS.glob("*/snapshot.json") for r in json.loads(p.read_text())["reports"]]
    return (
        committed_snapshots_carry_rows()
        and not any(r.startswith(f"{PILOT_REPORT}@") for r in reports)
        and len(_pilot().Pilot().seeds) == 2
    )


@cache
def first_pilot_superseded() -> bool:
    """The first pilot's version is older than the recipe's, its row-less snapshot is gone, and the
    commits it ran from and the one its report can be read at are in this repository's history."""
    import subprocess

    def in_history(commit: str) -> bool:
        done = subprocess.run(
            ["git", "merge-base", "--is-ancestor", commit, "HEAD"], cwd=REPO_ROOT, capture_output=True
        )
        return done.returncode == 0

    page = (DOCS / "pilot.md").read_text()
    [(report_commit, report_path)] = re.findall(r"/blob/([0-9a-f]{40})/(docs/snapshots/pilot/\S+?\.md)\)", page)
    shown = subprocess.run(
        ["git", "cat-file", "-e", f"{report_commit}:{report_path}"], cwd=REPO_ROOT, capture_output=True
    )
    return (
        _pilot().Pilot().version > FIRST_PILOT_VERSION
        and not (SNAPSHOTS / "pilot").exists()
        and all(in_history(c) for c in (*FIRST_PILOT_COMMITS, report_commit))
        and shown.returncode == 0
        and committed_snapshots_carry_rows()
    )


FIRST_PILOT_VERSION = "2026.12.04.1"  # the first pilot's recipe version (superseded; its rows were not kept)
FIRST_PILOT_COMMITS = ("0d36882", "cc7a7b6", "d745209")  # the clean commits its steps ran from


def recipe_classes() -> dict[str, str]:
    """Each experiment file that has a recipe, and its recipe dataclass: a top-level dataclass with a
    `version` field (the calendar version an override moves, `pipeline.entry.versioned`)."""
    found = {}
    for path in sorted(EXPERIMENTS.glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if (
                isinstance(node, ast.ClassDef)
                and any("dataclass" in ast.unparse(d) for d in node.decorator_list)
                and any(isinstance(s, ast.AnnAssign) and ast.unparse(s.target) == "version" for s in node.body)
            ):
                found[path.stem] = node.name
    return found


@cache
def recipes_parsed_with_draccus() -> bool:
    """Every experiment with a recipe dataclass passes it to `entry.main(..., recipe=...)`, which
    parses it with draccus, and draccus parses its defaults back to the default recipe."""
    from terminalworld.pipeline.entry import parse_recipe
    from tests.conftest import load_experiment

    unparsed = []
    for stem, cls in recipe_classes().items():
        calls = [n for n in ast.walk(ast.parse((EXPERIMENTS / f"{stem}.py").read_text())) if isinstance(n, ast.Call)]
        passed = any(
            ast.unparse(n.func).endswith("main")
            and any(k.arg == "recipe" and ast.unparse(k.value) == cls for k in n.keywords)
            for n in calls
        )
        recipe = getattr(load_experiment(stem), cls)
        if not passed or parse_recipe(recipe, []) != recipe():
            unparsed.append(f"experiments/{stem}.py:{cls}")
    assert not unparsed, f"recipes not parsed with draccus through entry.main(recipe=...): {unparsed}"
    return True


def claims_registered_on(page: str) -> Callable[[], bool]:
    """A check that every claim `CLAIM` finds on `page` is registered (for a page that says so)."""

    def check() -> bool:
        return not unregistered(page, (DOCS / page).read_text())

    check.__name__ = f"claims_registered_on_{page.removesuffix('.md')}"
    return check


# The registry: each page's claims, word for word, with their checks.


@dataclass(frozen=True)
class Claim:
    """A sentence of a page and the checks that make it true."""

    page: str
    sentence: str
    checks: tuple[Callable[[], bool], ...]


AGENT_GRADE_RISKS = (
    "**An agent grade that cannot rank.** The miniature grades every model as an agent with real Harbor, every "
    "command in the sandbox, on 4 bug-fix tasks from repositories unseen in training, and no model solves any of them."
)
SIM_GRADE = (
    "The miniature grades every model as a simulator in tiers 1 and 2 and the full-transcript model in the closed loop "
    "(tier 3)"
)

CLAIMS: list[Claim] = [
    Claim(
        "design.md",
        "The pilot's CPU preset therefore trains in Marin's policy, as its GPU preset does, and keeps float32 for "
        "scoring and generation.",
        (pilot_precision_measured,),
    ),
    Claim(
        "pilot.md",
        "In shards the plan estimates 9 h 20 min on 2 quiet cores with SFT in bf16, the longest shard (a (b) chain) "
        "1 h 27 min.",
        (pilot_shard_plan,),
    ),
    Claim(
        "index.md",
        "The whole graph runs in miniature on CPU:",
        (local_processes, demo_stages),
    ),
    Claim(
        "index.md",
        "The demo records a real-shell corpus, pretrains a tiny Qwen3 as the base model, fine-tunes it under each "
        "arm, scores every model on held-out rows, grades every model as an agent in Harbor and as a simulator, and "
        "writes the probe report.",
        (demo_stages, tiny_models),
    ),
    Claim(
        "index.md",
        "The miniature grades every model as an agent with real Harbor on 4 bug-fix tasks from repositories unseen "
        "in training.",
        (agent_grade,),
    ),
    Claim("index.md", SIM_GRADE + ".", (sim_tiers,)),
    Claim(
        "index.md",
        "The [pilot](pilot.md) (`experiments/pilot.py`) runs the same graph on one machine with "
        "SmolLM2-135M-Instruct's dequantised Q4_1 weights, the three arms at three nested scales 3× apart under each "
        "of two seeds; its results land with the committed snapshot of its rows.",
        (pilot_scales, pilot_local, pilot_results_await_rows),
    ),
    Claim(
        "index.md",
        "The [grounding](grounding.md) stage (`src/terminalworld/grounding/`, the `--grounding` option of `score`, "
        "`sim-eval` and `agent-eval --environment simulated`) gives a simulator the repository's state: the content "
        "a command is about, in its context, or the exact output of a shadow sandbox for read, navigation and edit "
        "commands; the demo runs without it.",
        (grounding_options, no_grounding_in_demo),
    ),
    Claim(
        "index.md",
        "Every recipe is a dataclass parsed with draccus, as Marin and Levanter parse theirs: any field is a flag, "
        "nested fields are dotted, `--config_path` reads YAML, and a changed recipe gets its own version, so it "
        "never reuses the pinned recipe's artifacts.",
        (recipes_parsed_with_draccus,),
    ),
    Claim(
        "index.md",
        "Build and serve it locally from the committed snapshot of the local demo's results:",
        (one_run, committed_snapshots_carry_rows),
    ),
    Claim(
        "risks.md",
        "The local demo (`experiments/local_demo.py`, with ECHO's miniature `experiments/echo_local.py` on top) "
        "runs the experiment's stages end to end on a CPU: recording, subsets, held-out sampling, the three arms, "
        "Levanter training, scoring, the agent grade in Harbor, the simulator grade in three tiers, ECHO's three "
        "arms, the report and this site.",
        (every_stage, local_processes),
    ),
    Claim(
        "grounding.md",
        "Rows: the local demo's own 20 probes (two per family) and 24 held-out rows (3 context turns, "
        "1,000-character outputs), from repos unseen in its training, as its snapshot commits them "
        "(`docs/snapshots/local-demo`); `benchmarks/grounding.py` lists the commands, and `grounding.json` records "
        "the two files' SHA-256.",
        (grounding_on_demo_rows, grounding_measured_untrained_with_it),
    ),
    Claim(
        "grounding.md",
        "The pilot's checkpoints are measured here again from its re-run.",
        (grounding_pilot_awaits_rerun,),
    ),
    Claim(
        "risks.md",
        "This page lists what it cannot show, what the [pilot](pilot.md) and the [grounding](grounding.md) stage "
        "add, and the known ways the full experiment can mislead.",
        (pilot_scales, grounding_options),
    ),
    Claim(
        "risks.md",
        "Every sentence of this page that says what the demo or the pilot does is registered in "
        "`tests/test_docs_claims.py` with a check against the committed snapshots' reports and rows (or the "
        "experiment files): a new snapshot that contradicts one, or an edit to one, fails the tests until the page "
        "and its check agree again.",
        (claims_registered_on("risks.md"),),
    ),
    Claim(
        "risks.md",
        "**Tiny models.** The miniature's models are a Qwen3 of 2 layers and hidden width 32, pretrained for "
        "minutes on 60 trajectories.",
        (tiny_models,),
    ),
    Claim(
        "risks.md",
        "**One scale.** The miniature trains each arm at one scale, on 40 trajectories.",
        (one_scale,),
    ),
    Claim(
        "risks.md",
        "The pilot (`experiments/pilot.py`) has one on a real pretrained model, SmolLM2-135M-Instruct: each arm at "
        "three nested scales 3× apart under each of two seeds, on one machine; its results land with the committed "
        "snapshot of its rows.",
        (pilot_scales, pilot_local, pilot_results_await_rows),
    ),
    Claim("risks.md", AGENT_GRADE_RISKS, (agent_grade, no_solve)),
    Claim(
        "risks.md",
        "**Simulators that do not simulate.** "
        + SIM_GRADE
        + ", and the free-running similarity of every model stays below 0.5: the tables rank failure modes, not "
        "fidelity.",
        (sim_tiers, sim_weak),
    ),
    Claim(
        "risks.md",
        "The miniature does not measure degeneration: no generated output reaches the write-up's 800 characters at "
        "its 128-token cap, so the rule cannot fire.",
        (degeneration_unmeasured,),
    ),
    Claim(
        "risks.md",
        "**ECHO without a reward signal.** The miniature runs ECHO's three arms (GRPO, ECHO, env-only) for 5 steps "
        "from the demo's full-transcript checkpoint, and no rollout of any arm solves a task: GRPO has no signal, "
        "so only L<sub>Env</sub> moves the weights.",
        (echo_without_signal, echo_on_policy),
    ),
    Claim(
        "risks.md",
        "**A recorded corpus, not SWE-ZERO.** The demo records 160 trajectories of a seeded exploration policy in a "
        "real shell over real code trees, plus the solver's episodes on 12 generated tasks, in SWE-ZERO's row "
        "format.",
        (recorded_corpus,),
    ),
    Claim(
        "risks.md",
        "SWE-ZERO itself (12M trajectories from a 1.7B agent over 3,222 repositories) is read the same way by the "
        "production experiments, but its distribution of commands and outputs is not what the demo trains on.",
        (recorded_corpus,),
    ),
    Claim(
        "risks.md",
        "**No accelerator, no GCS, no containers.** The miniature runs every step as a local process: no TPU, no "
        "GPU, no vLLM, no Daytona.",
        (local_processes,),
    ),
    Claim(
        "risks.md",
        "**A snapshot, not a live run.** This site is built from a committed snapshot of one run of the demo "
        "(`docs/snapshots/local-demo`).",
        (one_run,),
    ),
    Claim(
        "risks.md",
        "Production pages come from the `gs://` report artifacts through the same generator, and the pilot's results "
        "page will come from its own committed snapshot, with its rows.",
        (pilot_results_await_rows,),
    ),
    Claim(
        "risks.md",
        "Its measurements so far are of SmolLM2-135M-Instruct zero-shot, on CPU-sized sets; neither the demo nor "
        "the pilot trains with grounding, so whether a simulator trained with it closes the gap is still open.",
        (grounding_measured_untrained_with_it, no_grounding_in_demo),
    ),
    Claim(
        "evaluation.md",
        SIM_GRADE + "; its [risks](risks.md) say why its simulators' numbers rank failure modes, not fidelity.",
        (sim_tiers, sim_weak),
    ),
    Claim(
        "evaluation.md",
        "Every tier can give the simulator the repository's state: `score`, `sim-eval` and `agent-eval "
        "--environment simulated` take `--grounding {none,retrieved,replayed,hybrid}` and `--grounding-budget` (the "
        "grounding block's tokens), and `score` and `sim-eval` also take `--grounding-tasks`, `--grounding-store` "
        "and `--grounding-output-chars` (where a session's repository comes from, and the shadow's output cap).",
        (grounding_options,),
    ),
    Claim(
        "pilot.md",
        "The local demo proves the plumbing; the pilot tests the write-up's science on one machine.",
        (every_stage, pilot_local),
    ),
    Claim(
        "pilot.md",
        "Every departure from the write-up is listed [below](#departures-from-the-write-up) and printed in the "
        "pilot's report beside its numbers.",
        (pilot_departures,),
    ),
    Claim(
        "pilot.md",
        "No figure of Pilot II is shown before then.",
        (pilot_results_await_rows,),
    ),
    Claim(
        "pilot.md",
        "The first pilot ran version `2026.12.04.1` of the earlier recipe (one seed per arm, no base control, no "
        "target classes, no trained window, no task ladder) on the CPU preset, from the clean commits 0d36882, "
        "cc7a7b6 and d745209.",
        (first_pilot_superseded,),
    ),
    Claim(
        "pilot.md",
        "Its held-out rows, score rows, agent trials and simulator rows were not kept and its checkpoints are gone, "
        "so none of its figures can be recomputed from committed rows, and this site quotes none of them.",
        (first_pilot_superseded,),
    ),
    Claim(
        "pilot.md",
        "Its report, as it was committed, can be read in the repository's history at commit "
        "[044a4ca](https://github.com/marin-community/terminalworld/blob/044a4cac63af49d5e274357f47e775a146cc9a61/"
        "docs/snapshots/pilot/terminalworld/reports/pilot/2026.12.04.1/report.md).",
        (first_pilot_superseded,),
    ),
    Claim(
        "agent-grade.md",
        "The miniature grades every model as an agent with real Harbor, every command in the sandbox, on 4 bug-fix "
        "tasks from repositories unseen in training, and no model solves any of them: its models are tiny, rarely "
        "keep the format and cannot fix a bug.",
        (agent_grade, no_solve, tiny_models),
    ),
    Claim(
        "echo.md",
        "The [results page](results/echo.md) is generated from ECHO's report artifacts (the local miniature's, "
        "`terminalworld/reports/echo-miniature`), each with a Reproduce section pinned to the commit that produced "
        "it.",
        (one_run,),
    ),
    Claim(
        "echo.md",
        "The miniature runs ECHO's three arms (GRPO, ECHO, env-only) for 5 steps from the demo's full-transcript "
        "checkpoint, and no rollout of any arm solves a task, so GRPO has no signal and the arms differ only by "
        "L<sub>Env</sub>.",
        (echo_without_signal, echo_on_policy),
    ),
    Claim(
        "echo.md",
        "**The on-policy miniature** (`experiments/echo_local.py --run`, on the local demo): the demo's "
        "full-transcript checkpoint acts on the demo's generated bug-fix tasks through the agent harness, every "
        "command in the sandbox, rewarded by each task's own tests; GRPO (λ = 0), ECHO (λ = 0.05) and env-only run "
        "with identical seeds and task order; the report pairs their env-token cross-entropy on the demo's held-out "
        "trajectories, before and after.",
        (echo_on_policy,),
    ),
    Claim(
        "phase0.md",
        "The same comparison in miniature — every arm's pass@1 beside its env-token PPL — is on the [world-model "
        "probe's results](results/world-model-probe.md), section *Agent and world model*, with a Reproduce section "
        "pinned to its commit.",
        (agent_beside_ppl, one_run),
    ),
    Claim(
        "design.md",
        "Marin resolves the prefix, for the printed plan and the run alike; the production experiments pin "
        "`gs://marin-us-east5`, the local demo `./local-prefix`.",
        (local_prefix,),
    ),
    Claim(
        "world-model-probe.md",
        "`experiments/world_model_probe.py` scores the base and the nine Phase 0 checkpoints; "
        "`experiments/local_demo.py` runs the same graph in miniature on CPU.",
        (demo_stages, local_processes),
    ),
]


# Finding the sentences of a page.

_LIST_ITEM = re.compile(r"(?:[-*+]|\d+\.)\s+")


def sentences_of(text: str) -> list[str]:
    """The prose sentences of a page's Markdown, whitespace collapsed. Headings, tables, code blocks
    and admonition titles are left out; a blank line, a list item, a heading or a code block ends a
    sentence, so a sentence never runs across a code block into the next paragraph."""
    blocks: list[list[str]] = [[]]
    fenced = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            fenced = not fenced
            blocks.append([])
        elif fenced:
            continue
        elif not stripped or stripped.startswith(("#", "|", "!!!", "<!--")):
            blocks.append([])
        elif item := _LIST_ITEM.match(stripped):
            blocks.append([stripped[item.end() :]])
        else:
            blocks[-1].append(stripped)
    found = []
    for block in blocks:
        prose = re.sub(r"\s+", " ", " ".join(block)).strip()
        found += [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z*\[(`])", prose) if s]
    return found


def sentences(page: Path) -> list[str]:
    """The prose sentences of `page` (see `sentences_of`)."""
    return sentences_of(page.read_text())


def registered(page: str) -> dict[str, Claim]:
    """The claims registered for `page`, by sentence."""
    return {c.sentence: c for c in CLAIMS if c.page == page}


def unregistered(page: str, text: str) -> list[str]:
    """The sentences of `text` (as page `page`) that make a claim `CLAIM` finds and are not registered
    for that page word for word."""
    known = registered(page)
    return [s for s in sentences_of(text) if CLAIM.search(s) and s not in known]


PAGES = sorted(DOCS.glob("*.md"))


def test_every_claim_is_registered_on_its_page():
    missing = [f"{p.name}: {s}" for p in PAGES for s in unregistered(p.name, p.read_text())]
    assert not missing, (
        "register each, word for word, with the checks that make it true in CLAIMS, or rewrite it:\n"
        + "\n".join(missing)
    )


def test_every_registered_claim_is_on_its_page():
    gone = [f"{c.page}: {c.sentence}" for c in CLAIMS if c.sentence not in sentences(DOCS / c.page)]
    assert not gone, "claims no longer on their page (rewritten? register the new sentence):\n" + "\n".join(gone)


@pytest.mark.parametrize("claim", CLAIMS, ids=[f"{c.page}:{'+'.join(f.__name__ for f in c.checks)}" for c in CLAIMS])
def test_each_claim_holds(claim):
    assert claim.checks, "a registered claim needs at least one check"
    failing = [f.__name__ for f in claim.checks if not f()]
    assert not failing, f"{claim.page} says {claim.sentence!r}, but {failing} do not hold"


def test_the_finder_sees_a_claim_on_each_page_and_registers_none_by_its_twin():
    page = (
        "# The miniature\n\nIntro. The miniature trains each arm at one scale, on 40 trajectories.\n```\nthe "
        "miniature\n```\nThe demo does not grade agents.\n\n- **One.** The pilot runs here.\n"
        "- The [pilot](pilot.md) is big. ECHO's miniature is small. It runs in miniature on CPU:\n\n"
        "```bash\nx\n```\n\nNot a claim.\n"
    )
    assert [s for s in sentences_of(page) if CLAIM.search(s)] == [
        "The miniature trains each arm at one scale, on 40 trajectories.",
        "The demo does not grade agents.",
        "**One.** The pilot runs here.",
        "The [pilot](pilot.md) is big.",
        "ECHO's miniature is small.",
        "It runs in miniature on CPU:",
    ]
    # Registered on risks.md, this sentence is unregistered on any other page, and any edit of it
    # is unregistered on risks.md itself.
    one_scale = "**One scale.** The miniature trains each arm at one scale, on 40 trajectories."
    assert registered("risks.md")[one_scale]
    assert unregistered("risks.md", f"- {one_scale}\n") == []
    assert unregistered("phase0.md", f"- {one_scale}\n") == [one_scale]
    edited = one_scale.replace("40", "80")
    assert unregistered("risks.md", f"- {edited}\n") == [edited]


def test_the_recipe_finder_lists_the_experiments_with_recipes():
    found = recipe_classes()
    assert {"local_demo": "Demo", "echo_local": "EchoLocal", "pilot": "Pilot"}.items() <= found.items()
    assert "phase0_grid" not in found  # production recipes are pinned in code, with no version field


def _snapshots_with_rows() -> list[Path]:
    return [p.parent for p in sorted(SNAPSHOTS.glob("*/snapshot.json")) if json.loads(p.read_text()).get("rows")]


def _scores_rows(snapshot: Path, model: str) -> dict[str, dict]:
    """A model's scored rows (skipped ones apart) from a snapshot's gzipped scores file."""
    import gzip

    # Snapshots keep the names they ran under: `sim-ppl-eval/sim_ppl_*` before the probe's rename.
    [path] = [
        *snapshot.glob(f"probe-eval/probe_{model}/*/*.jsonl.gz"),
        *snapshot.glob(f"sim-ppl-eval/sim_ppl_{model}/*/*.jsonl.gz"),
    ]
    rows = [json.loads(line) for line in gzip.decompress(path.read_bytes()).decode().splitlines() if line.strip()]
    return {r["instance_id"]: r for r in rows if not r.get("_summary") and "skipped" not in r}


@pytest.mark.parametrize("snapshot", _snapshots_with_rows() or [None], ids=lambda p: p.name if p else "none")
def test_the_probe_figures_recompute_from_the_snapshot_rows(snapshot):
    """Every checkpoint's probe figures in a snapshot's `metrics.json` (the pages quote them) are
    recomputed from the score rows the snapshot carries: tokens, token-weighted and median PPL, and
    each target class's. A snapshot taken before rows travelled (`rows_note`) cannot be checked."""
    import math
    import statistics

    if snapshot is None:
        pytest.skip("no committed snapshot carries its rows yet (each manifest's rows_note says so)")
    [report] = snapshot.glob("terminalworld/reports/world-model-probe/*/metrics.json")
    metrics = json.loads(report.read_text())
    rows = {c["name"]: _scores_rows(snapshot, c["name"]) for c in metrics["checkpoints"]}
    common = sorted(set.intersection(*(set(r) for r in rows.values())))
    assert len(common) == metrics["n_common"]
    for c in metrics["checkpoints"]:
        mine = [rows[c["name"]][i] for i in common]
        tokens = sum(r["n_target_tokens"] for r in mine)
        assert c["tokens"] == tokens
        assert c["token_weighted_ppl"] == pytest.approx(math.exp(math.fsum(r["sum_nll"] for r in mine) / tokens))
        assert c["median_ppl"] == pytest.approx(statistics.median(r["ppl"] for r in mine))
        base = [rows[metrics["base"]][i] for i in common]
        if c["name"] != metrics["base"]:
            assert c["beats_base"] == sum(r["ppl"] < b["ppl"] for r, b in zip(mine, base, strict=True))
        for cls, got in (c.get("by_class") or {}).items():
            inside = [r for r in mine if r["target_class"] == cls]
            assert got["n"] == len(inside)
        if head := c.get("headline"):
            from terminalworld.core.targets import HEADLINE

            inside = [r for r in mine if r["target_class"] in HEADLINE]
            assert (head["n"], head["tokens"]) == (len(inside), sum(r["n_target_tokens"] for r in inside))
            if inside:
                assert head["median_ppl"] == pytest.approx(statistics.median(r["ppl"] for r in inside))
    # The agent table's pass@1 and valid-action share, from each model's trial rows.
    for row in metrics.get("agent", {}).get("rows", []):
        found = list(snapshot.glob(f"agent-eval/*/{row['name']}/*/trials.jsonl.gz"))
        if len(found) != 1:
            continue
        scored = [t for t in _gz_rows(found[0]) if t["scored"]]
        assert row["scored"] == len(scored)
        assert row["pass_at_1"] == pytest.approx(statistics.fmean(t["reward"] for t in scored))
        assert row["valid_action_rate"] == pytest.approx(
            statistics.fmean(t["process"]["valid_reply_share"] for t in scored)
        )


@pytest.mark.parametrize("snapshot", sorted(p.parent for p in SNAPSHOTS.glob("*/snapshot.json")), ids=lambda p: p.name)
def test_every_report_of_a_committed_snapshot_recomputes_from_its_rows(snapshot):
    """Every report a committed snapshot holds is recomputed by its own function from the rows the
    snapshot carries, and every figure of the JSON its page is built from comes out the same
    (`terminalworld docs verify`); what is not a row (the pilot's tokenized caches, its timed
    attempts) is named and checked apart."""
    from terminalworld.report.verify import verify_snapshot

    results = verify_snapshot(str(snapshot))
    assert results and [r for r in results if r["status"] != "recomputed"] == []


README = REPO_ROOT / "README.md"


def test_the_readme_quotes_the_committed_pilot_exactly_as_its_snapshot_holds_it():
    """The README's pilot findings and wall time are `report.pilot.readme_summary` of the newest
    committed pilot snapshot's `pilot.json` (whose figures `docs verify` recomputes from its rows);
    before one is committed, the README quotes no pilot figure and says where they will come from."""
    from terminalworld.report.pilot import readme_summary

    text = README.read_text()
    snaps = sorted(p.parent for p in SNAPSHOTS.glob("pilot-*/snapshot.json"))
    if not snaps:
        assert "Pilot II's findings" not in text and "Its figures come with the snapshot of its rows." in text
        return
    [doc] = snaps[-1].glob("terminalworld/reports/pilot/*/pilot.json")
    assert readme_summary(json.loads(doc.read_text()), f"docs/snapshots/{snaps[-1].name}") in text


def _gz_rows(path: Path) -> list[dict]:
    import gzip

    return [json.loads(line) for line in gzip.decompress(path.read_bytes()).decode().splitlines() if line.strip()]


def _readme_demo_table() -> dict[str, list[str]]:
    """The README's headline table of the miniature: its cells by arm (the row's first word)."""
    part = README.read_text().split("**The miniature**")[1].split("**The pilot**")[0]
    lines = [x for x in part.splitlines() if x.startswith("| ") and not x.startswith("| arm")]
    return {cells[0].split()[0]: cells[1:] for cells in ([c.strip() for c in x.strip("|").split("|")] for x in lines)}


def _shown(cell: str) -> tuple[float, int]:
    """A quoted number and its decimals (`**1,167**` is 1167 with 0, `12.5 %` is 12.5 with 1)."""
    text = cell.strip("* %").replace(",", "")
    return float(text), len(text.partition(".")[2])


def _matches(cell: str, value: float) -> bool:
    shown, decimals = _shown(cell)
    return round(value, decimals) == shown


def test_the_readme_demo_table_recomputes_from_the_snapshot_rows():
    """Every figure of the README's table of the miniature is recomputed from the demo snapshot's rows:
    each arm's median and token-weighted PPL over the headline rows (read + predict) every model
    scored, the rows it beats the base on, its pass@1 and valid-action share from its agent trials;
    and the sentence above it counts those rows and their class."""
    import math
    import statistics

    from terminalworld.core.targets import HEADLINE

    table = _readme_demo_table()
    models = {"base": "base", "assistant": "assistant", "full": "full", "user": "user"}
    assert set(table) == set(models)
    rows = {m: _scores_rows(SNAPSHOT, m) for m in models}
    common = sorted(set.intersection(*(set(r) for r in rows.values())))
    head = [i for i in common if rows["base"][i]["target_class"] in HEADLINE]
    classes = {rows["base"][i]["target_class"] for i in common}
    text = re.sub(r"\s+", " ", README.read_text())
    sentence = f"on the {len(common)} held-out rows that fit and have a target to score"
    assert sentence in text
    if classes == {"read"}:
        assert "(all of class read, so the read + predict headline is every row)" in text
    # The sentence under the table: (a) above its base, (b) and (c) below it, (c) at or below (b).
    medians = {m: statistics.median(rows[m][i]["ppl"] for i in head) for m in models}
    assert "Training on actions only makes the world model worse than its base, while any loss on " in text
    assert medians["assistant"] > medians["base"] > max(medians["full"], medians["user"])
    assert "with (c) ≤ (b)" in text and medians["user"] <= medians["full"]
    for name, cells in table.items():
        mine = [rows[name][i] for i in head]
        tokens = sum(r["n_target_tokens"] for r in mine)
        assert _matches(cells[0], statistics.median(r["ppl"] for r in mine)), name
        assert _matches(cells[1], math.exp(math.fsum(r["sum_nll"] for r in mine) / tokens)), name
        wins = sum(rows[name][i]["ppl"] < rows["base"][i]["ppl"] for i in head)
        assert cells[2] == ("—" if name == "base" else f"{wins} of {len(head)}"), name
        [trials] = SNAPSHOT.glob(f"agent-eval/heldout-tasks/{name}/*/trials.jsonl.gz")
        scored = [t for t in _gz_rows(trials) if t["scored"]]
        assert _matches(cells[3], statistics.fmean(t["reward"] for t in scored)), name
        valid = statistics.fmean(t["process"]["valid_reply_share"] for t in scored)
        assert _matches(cells[4], 100 * valid), name


# The grounding page: every figure it quotes is recomputed from the rows committed under
# `benchmarks/results/grounding` and the demo snapshot's held-out rows and probes.

GROUNDING_PAGE = DOCS / "grounding.md"
GROUNDING_SETS = {"probes": "probes", "held-out (24)": "heldout"}  # page heading: scores files' infix
GROUNDING_DATA = {
    "heldout": SNAPSHOT / "heldout/sim_ppl_heldout_24/2026.12.03/sim_ppl_heldout_24.jsonl.gz",
    "probes": SNAPSHOT / "terminalworld/probes/2026.12.03/probes.jsonl.gz",
}


def _grounding_scores(infix: str, mode: str) -> list[dict]:
    return [r for r in _gz_rows(GROUNDING_RESULTS / f"score-{infix}-{mode}.jsonl.gz") if not r.get("_summary")]


def _page_tables(text: str) -> dict[tuple[str, str], list[list[str]]]:
    """The page's Markdown tables by (section, subsection) heading, each a list of body rows' cells."""
    tables: dict[tuple[str, str], list[list[str]]] = {}
    section = sub = ""
    for line in text.splitlines():
        if line.startswith("## "):
            section, sub = line[3:], ""
        elif line.startswith("### "):
            sub = line[4:]
        elif line.startswith("| ") and not line.startswith("|---"):
            tables.setdefault((section, sub), []).append([c.strip() for c in line.strip().strip("|").split("|")])
    return {k: rows[1:] for k, rows in tables.items()}  # the header row apart


def _ppl_cell(rows: list[dict], served: int = 0) -> str:
    """A cell as the page writes it: token-weighted PPL (rows scored), and the rows served exactly."""
    import math

    tokens = sum(r["n_target_tokens"] for r in rows)
    text = f"{math.exp(math.fsum(r['sum_nll'] for r in rows) / tokens):.2f} ({len(rows)})" if tokens else "–"
    return text + (f"; {served} served exactly" if served else "")


def grounding_page_errors(text: str) -> list[str]:
    """Each figure of the grounding page that a recomputation from the committed rows does not give:
    the length and class tables, the rows that edit first and the modes on them, the verbatim-in-block
    and differing-rows counts of the intro, and the unseen rows per model."""
    import gzip
    import hashlib
    import statistics

    from terminalworld.core.heldout import read_heldout
    from terminalworld.report.grounding import edited_rows

    errors: list[str] = []
    tables = _page_tables(text)
    flat = re.sub(r"\s+", " ", text)

    def expect(what: str, shown, wanted) -> None:
        if shown != wanted:
            errors.append(f"{what}: the page shows {shown!r}, the rows give {wanted!r}")

    recorded = json.loads((GROUNDING_RESULTS / "grounding.json").read_text())["data_sha256"]
    for name, path in GROUNDING_DATA.items():
        expect(
            f"{name} SHA-256", recorded[f"{name}.jsonl"], hashlib.sha256(gzip.decompress(path.read_bytes())).hexdigest()
        )
    heldout = {name: read_heldout(str(path)) for name, path in GROUNDING_DATA.items()}
    edits = {name: edited_rows(rows) for name, rows in heldout.items()}
    buckets = (("<=20", 0, 20), ("21-200", 21, 200), (">200", 201, 10**9), ("all", 0, 10**9))
    for heading, infix in GROUNDING_SETS.items():
        by_mode = {m: _grounding_scores(infix, m) for m in ("none", "retrieved", "replayed", "hybrid")}
        # By target length: every scored row with a target, per bucket; hybrid's served rows apart.
        for cells in tables["Env PPL by target length", heading]:
            rows = [r for r in by_mode[cells[0]] if "skipped" not in r and r.get("target_chars") != 0]
            for (label, lo, hi), cell in zip(buckets, cells[1:], strict=True):
                inside = [r for r in rows if lo <= r["n_target_tokens"] <= hi]
                served = sum(r.get("route") == "exact" and "ppl" not in r for r in inside)
                expect(f"{heading} {cells[0]} {label}", cell, _ppl_cell([r for r in inside if "ppl" in r], served))
        # By target class: the headline is read + predict; a cell counts the targets in their block.
        labels = {"headline": ("read", "predict"), "read": ("read",), "predict": ("predict",), "copy": ("copy",)}
        labels |= {"sentinel": ("sentinel",)}
        for cells in tables["Env PPL by target class", heading]:
            classes = labels[cells[0].split()[0].rstrip(":")]
            for mode, cell in zip(by_mode, cells[1:], strict=True):
                inside = [r for r in by_mode[mode] if "skipped" not in r and r["target_class"] in classes]
                scored = [r for r in inside if "ppl" in r]
                wanted = _ppl_cell(scored).split("; ")[0]
                if block := sum(bool(r.get("target_in_block")) for r in scored):
                    wanted += f"; {block} verbatim in block"
                if served := len(inside) - len(scored):
                    wanted += f"; {served} served exactly"
                expect(f"{heading} {cells[0]} {mode}", cell, wanted)
        # The rows that edit first: none, retrieved and replayed on the rows all three scored.
        ids = set(edits[infix])
        scored = {
            m: {r["instance_id"]: r for r in by_mode[m] if "ppl" in r and r["instance_id"] in ids} for m in by_mode
        }
        common = sorted(set(scored["none"]) & set(scored["retrieved"]) & set(scored["replayed"]))
        sentence = f"{len(ids)} of the {len(heldout[infix])} rows' sessions edit the repository before the target"
        expect(f"{heading} edited rows", sentence in flat, True)
        if common:
            below = sum(scored["replayed"][i]["ppl"] < scored["retrieved"][i]["ppl"] for i in common)
            expect(
                f"{heading} replayed below retrieved",
                f"Replayed scores below retrieved on {below} of them" in flat,
                True,
            )
            for cells in tables["Replayed against retrieved where the session edits first", heading]:
                mine = [scored[cells[0]][i] for i in common]
                tw = _ppl_cell(mine).split(" (")[0]
                wanted = [str(len(common)), str(sum(r["n_target_tokens"] for r in mine)), tw]
                wanted.append(f"{statistics.median(r['ppl'] for r in mine):.2f}")
                expect(f"{heading} edited {cells[0]}", cells[1:], wanted)
        # The intro: targets verbatim in the retrieved block, and rows where retrieved and replayed differ.
        block = [r for r in by_mode["retrieved"] if "ppl" in r]
        verbatim = sum(bool(r.get("target_in_block")) for r in block)
        kind = "scored held-out targets" if infix == "heldout" else "probes"
        expect(f"{heading} verbatim", f"{verbatim} of the {len(block)} {kind}" in flat, True)
        a = {r["instance_id"]: r["sum_nll"] for r in block}
        b = {r["instance_id"]: r["sum_nll"] for r in by_mode["replayed"] if "ppl" in r}
        differ = [i for i in a.keys() & b.keys() if a[i] != b[i]]
        noun = "held-out rows" if infix == "heldout" else "probes"
        wanted = f"{len(differ)} {noun} ({sum(i in ids for i in differ)} of them edit first)"
        expect(f"{heading} differing rows", wanted in flat, True)
    edited_counts = (
        f"Of the held-out rows {len(edits['heldout'])} of 24 edit first, of the probes {len(edits['probes'])} of 20"
    )
    expect("edited counts", edited_counts in flat, True)
    # Unseen, per model: the scored held-out rows from repos each model's training subsets hold.
    repos = json.loads((GROUNDING_RESULTS / "grounding.json").read_text())["training_repos"]
    scored_ids = {r["instance_id"] for r in _grounding_scores("heldout", "none") if "ppl" in r}
    repo_of = {r["instance_id"]: r["repo"] for r in heldout["heldout"]}
    unseen = {cells[0]: cells[1:] for cells in tables.get(("Unseen, per model", ""), [])}
    expect("unseen models", sorted(unseen), sorted(repos))
    for model, cells in unseen.items():
        seen = sum(repo_of[i] in set(repos.get(model, ())) for i in scored_ids)
        expect(f"unseen {model}", cells, [f"{seen} of {len(scored_ids)}", str(len(scored_ids) - seen)])
    return errors


def test_the_grounding_page_recomputes_from_the_committed_rows():
    assert grounding_page_errors(GROUNDING_PAGE.read_text()) == []


def test_a_wrong_figure_on_the_grounding_page_fails():
    """Each kind of figure, changed by one unit in its last digit, is caught."""
    text = GROUNDING_PAGE.read_text()
    tables = _page_tables(text)
    edited_line = next(x for x in text.splitlines() if x.startswith("| replayed |") and x.count("|") == 6)
    class_line = next(x for x in text.splitlines() if x.startswith("| headline: read + predict |"))
    for line in (edited_line, class_line):
        number = re.findall(r"\d+\.\d\d", line)[-1]
        wrong = f"{float(number) + 0.01:.2f}"
        assert grounding_page_errors(text.replace(line, line.replace(number, wrong))), line
    sentence = re.search(r"Of the held-out rows\s+(\d+) of 24", text)
    assert sentence
    wrong = text[: sentence.start(1)] + str(int(sentence.group(1)) + 1) + text[sentence.end(1) :]
    assert grounding_page_errors(wrong)
    unseen = next(x for x in text.splitlines() if x.startswith("| base-demo |"))
    assert grounding_page_errors(text.replace(unseen, unseen.replace("0 of", "1 of")))
    assert tables[("Unseen, per model", "")]


def test_the_grounding_page_is_what_its_script_writes_from_the_committed_rows():
    """Every figure, the family and route tables and the closed loop's included: the page is the
    script's rebuild from the committed rows alone (no model runs)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("grounding_benchmark", REPO_ROOT / "benchmarks" / "grounding.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    page, out, _ = bench.build(bench.RESULTS, bench.data_files(None), bench.training_repos(bench.RESULTS, []))
    assert page == GROUNDING_PAGE.read_text()
    assert json.loads(json.dumps(out)) == json.loads((GROUNDING_RESULTS / "grounding.json").read_text())
