"""`terminalworld sim-eval`: a checkpoint generates the target observation of each held-out row or
probe (tiers 1 and 2), and each generation is compared with the real output (`sim.fidelity`); or it
answers an agent's commands on generated tasks with a real shadow sandbox beside it (tier 3,
`sim.closed_loop`).

Rows are the held-out schema; probe rows add their `family`, which replaces the command family in
the breakdowns. Each row's target is classed (`core.targets`: sentinel, copy, read, predict) and the
summary gives the rates per class and its headline on read + predict, the targets a simulator must
read or predict rather than echo or copy. With `all_depths`, every observation of a row is generated from its own real prefix
(free-running fidelity per depth). Output, as the scorer writes it: one JSON row per input row,
appended to `OUT.partial` as each finishes, so a rerun resumes; then `OUT` atomically, the rows in
input order and one `{"_summary": true, ...}` row with the rates, the breakdowns by family and by
length bucket, and the per-depth means.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from terminalworld.agent.harness import HarnessConfig
from terminalworld.core.assets import local_model_path
from terminalworld.core.decoding import generation_model
from terminalworld.core.heldout import heldout_trajectory, read_heldout
from terminalworld.core.paths import check_outputs
from terminalworld.core.precision import Precision, resolve
from terminalworld.core.render import build_renderer
from terminalworld.core.resumable import model_label, resumable, resumable_rows
from terminalworld.core.targets import CLASSES, classify, headline
from terminalworld.core.trajectories import OBSERVATION_PREFIX, command_family, extract_command
from terminalworld.corpus.actions import action_message
from terminalworld.corpus.solver import plan, wrong_fix
from terminalworld.errors import InputError
from terminalworld.grounding.modes import Grounder, GroundingOptions, blocks_of, same_grounding
from terminalworld.options import at_least, option
from terminalworld.sim.backend import (
    CAP_NOTE,
    EngineGenerator,
    HFGenerator,
    Simulated,
    Simulator,
    VLLMGenerator,
    stop_ids,
)
from terminalworld.sim.closed_loop import (
    Agent,
    LoopEpisode,
    LoopTurn,
    ModelAgent,
    ScriptedAgent,
    closed_loop_episode,
    loop_summary,
    real_episode,
)
from terminalworld.sim.fidelity import DEGENERATE_MIN_CHARS, fidelity
from terminalworld.tasks.layout import task_order

BUCKETS = ((200, "<=200"), (2000, "201-2000"), (None, ">2000"))  # real output length in characters


@dataclass(frozen=True)
class SimEvalConfig(GroundingOptions):
    """One free-running evaluation: a model, the rows, decoding, the grounding mode, and where the
    rows go."""

    model_path: str = option(flag=("--model", "--model-path"), help="HF folder, GGUF file, or smollm2")
    out: str = option(help="rows file; rerunning resumes it")
    heldout: str | None = option(None, help="held-out rows (JSON Lines): tier 1")
    probes: str | None = option(None, help="probe rows from `terminalworld probes make`: tier 2")
    tasks: str | None = option(None, help="task folder (`tasks make`): tier 3, the closed loop with a shadow")
    agent: Literal["solver", "model"] = option("solver", help="tier 3's agent: the solver's script or a model")
    agent_model: str | None = option(None, help="tier 3: the agent's checkpoint (with --agent model)")
    wrong_share: float = option(
        0.0, help="tier 3, --agent solver: the share of tasks it fixes wrongly (seeded by --seed)"
    )
    max_turns: int = option(12, help="tier 3: the harness's turn limit")
    context_tokens: int = option(8192, help="tier 3: the agent's context")
    max_tokens_per_turn: int = option(256, help="tier 3: the agent's tokens per reply")
    mode: Literal["agent", "sim"] = option("agent", help="agent: observation as the user turn; sim: as the reply")
    model_name: str | None = option(None, help="name in the summary (default: the model folder's name)")
    chat_template_from: str | None = option(None, help="render with this checkpoint's chat template (a base model)")
    max_new_tokens: int = option(1024, help="cap per observation; a capped output ends with a visible note")
    temperature: float = option(0.0, help="0 is greedy")
    seed: int = option(0)
    all_depths: bool = option(False, help="generate every observation of a row, each from its real prefix")
    backend: Literal["hf", "continuous", "vllm"] = option(
        "hf", help="hf: padded batches; continuous: transformers' continuous batching (tiers 1-2); vllm: GPU"
    )
    dtype: Precision = option("auto", help="compute precision; auto: bfloat16 where native and agreeing")
    device: Literal["cpu", "cuda"] = option("cpu")
    batch_size: int = option(1, help="rows served together: prompts per HF generate call")

    def __post_init__(self) -> None:
        super().__post_init__()
        at_least(self, wrong_share=0, max_turns=1, context_tokens=1, max_tokens_per_turn=1, max_new_tokens=1)
        at_least(self, temperature=0, seed=0, batch_size=1)

    def check_paths(self) -> None:
        """Refuse, before any work, outputs that cannot be written or that touch an input."""
        check_outputs(
            [("--out", self.out, "file", (".partial",))],
            [("--heldout", self.heldout), ("--probes", self.probes), ("--tasks", self.tasks), *self.grounding_inputs()],
        )


def bucket(chars: int) -> str:
    """The length bucket of a real output of `chars` characters."""
    return next(label for limit, label in BUCKETS if limit is None or chars <= limit)


def _compare(generated: str, capped: bool, target: str, n_cap: int) -> dict[str, Any]:
    # Metrics read what was generated, without the cap's note.
    text = generated[: -len(CAP_NOTE.format(n=n_cap))] if capped else generated
    return fidelity(text, target)


def _observations(
    sim: Simulator, jobs: list[tuple[Any, list[int]]], grounder: Grounder | None
) -> list[tuple[list[Simulated], dict]]:
    """Each (trajectory, turns)'s observations: generated (with its grounding block), or, in hybrid
    mode, served exactly by the shadow when the router says so; and the turns' grounding. Every
    generated observation of the jobs goes to the generator in one call, so rows are served
    together (batched, `--batch-size` at a time)."""
    requests, blocks, planned = [], [], []
    for traj, turns in jobs:
        grounded = grounder.trajectory(traj, turns) if grounder else {}
        generate = [t for t in turns if t not in grounded or grounded[t].served is None]
        requests += [(traj, t) for t in generate]
        blocks += [blocks_of(grounded)] * len(generate)
        planned.append((turns, grounded, generate))
    made_all = iter(sim.simulate(requests, blocks)) if requests else iter(())
    out = []
    for turns, grounded, generate in planned:
        made = {t: next(made_all) for t in generate}
        for t in turns:
            if t not in made:
                made[t] = Simulated(text=grounded[t].served, tokens=0, capped=False, prompt_tokens=0)
        out.append(([made[t] for t in turns], grounded))
    return out


def evaluate_rows(
    cfg: SimEvalConfig, sim: Simulator, rows: list[dict[str, Any]], done: dict, grounder: Grounder | None = None
) -> Iterator[dict[str, Any]]:
    """Generate and compare every pending row, `cfg.batch_size` rows served together (yielding
    each as its group finishes, in input order)."""
    from tqdm import tqdm

    pending = [r for r in rows if r["instance_id"] not in done]
    with tqdm(total=len(pending), desc="sim-eval", unit="row") as bar:
        for k in range(0, len(pending), cfg.batch_size):
            group = pending[k : k + cfg.batch_size]
            trajs = [heldout_trajectory(row) for row in group]
            turns = [list(range(len(t.turns))) if cfg.all_depths else [len(t.turns) - 1] for t in trajs]
            served = _observations(sim, list(zip(trajs, turns, strict=True)), grounder)
            for row, traj, ts, (sims, grounded) in zip(group, trajs, turns, served, strict=True):
                yield _row(cfg, row, traj, ts, sims, grounded, grounder is not None)
            bar.update(len(group))


def _row(cfg: SimEvalConfig, row, traj, turns, sims, grounded, grounding: bool) -> dict[str, Any]:
    parts = []
    for t, s in zip(turns, sims, strict=True):
        target = traj.turns[t].observation.removeprefix(OBSERVATION_PREFIX)
        family = row.get("family") or command_family(extract_command(traj.turns[t].action))
        parts.append((t, s, target, family, _compare(s.text, s.capped, target, cfg.max_new_tokens)))
    _, s, target, family, scores = parts[-1]
    out = {
        "instance_id": row["instance_id"],
        "repo": row.get("repo"),
        "grounding": cfg.grounding,
        **(grounded[turns[-1]].record() if grounding else {}),
        "family": family,
        "target_class": classify(row),
        "target_chars": len(target),
        "bucket": bucket(len(target)),
        "generated": s.text,
        "target": target,
        "capped": s.capped,
        "generated_tokens": s.tokens,
        "prompt_tokens": s.prompt_tokens,
        **scores,
    }
    if cfg.all_depths:
        out["depths"] = [
            {"depth": t + 1, "family": f, "capped": x.capped, **{k: sc[k] for k in _DEPTH_KEYS}}
            for t, x, _, f, sc in parts
        ]
    return out


_DEPTH_KEYS = ("exact_match", "similarity", "line_f1", "degenerate")


def _rates(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Exact-match rate, similarity (mean and median), mean line F1, degeneration rates."""
    if not rows:
        return {"n": 0}
    long = [r for r in rows if len(r["generated"]) > DEGENERATE_MIN_CHARS]
    return {
        "n": len(rows),
        "exact_match": sum(r["exact_match"] for r in rows) / len(rows),
        "similarity": statistics.fmean(r["similarity"] for r in rows),
        "median_similarity": statistics.median(r["similarity"] for r in rows),
        "line_f1": statistics.fmean(r["line_f1"] for r in rows),
        "degenerate_rate": sum(r["degenerate"] for r in rows) / len(rows),
        "n_long": len(long),
        "degenerate_rate_long": sum(r["degenerate"] for r in long) / len(long) if long else None,
        "capped_rate": sum(r["capped"] for r in rows) / len(rows),
    }


def summarize(rows: list[dict[str, Any]], cfg: SimEvalConfig, model_name: str) -> dict[str, Any]:
    """The `{"_summary": true, ...}` row: overall rates, by family, by length bucket, by depth."""
    summary = {
        "_summary": True,
        "model_name": model_name,
        "model_path": cfg.model_path,
        "mode": cfg.mode,
        "grounding": cfg.grounding,
        "tier": 2 if cfg.probes else 1,
        "decoding": {"temperature": cfg.temperature, "seed": cfg.seed, "max_new_tokens": cfg.max_new_tokens},
        **_rates(rows),
        "by_family": {f: _rates([r for r in rows if r["family"] == f]) for f in sorted({r["family"] for r in rows})},
        "by_bucket": {b: _rates([r for r in rows if r["bucket"] == b]) for _, b in BUCKETS},
        # What the grade can carry: the target classes (`core.targets`), the headline on read + predict,
        # so that a sentinel echo or a copy of the context never lifts it.
        "by_class": {c: _rates([r for r in rows if r.get("target_class") == c]) for c in CLASSES},
        "headline": _rates([r for r in rows if headline(r.get("target_class"))]),
    }
    if cfg.grounding == "hybrid":
        exact = [r for r in rows if r.get("route") == "exact"]
        summary["served_rows"] = len(exact)
        summary["served_share_chars"] = (
            sum(r["target_chars"] for r in exact) / total if (total := sum(r["target_chars"] for r in rows)) else None
        )
    if cfg.all_depths:
        depths = sorted({d["depth"] for r in rows for d in r["depths"]})
        summary["by_depth"] = {
            str(k): {
                key: statistics.fmean(float(d[key]) for r in rows for d in r["depths"] if d["depth"] == k)
                for key in _DEPTH_KEYS
            }
            for k in depths
        }
    return summary


def simulator(cfg: SimEvalConfig) -> Simulator:
    """The configured checkpoint as a simulator."""
    path = local_model_path(cfg.model_path)
    renderer = build_renderer(tokenizer=path, template_from=cfg.chat_template_from, view=cfg.mode)
    stop = stop_ids(renderer.tokenizer)
    if cfg.backend == "vllm":
        generator = VLLMGenerator(path, stop=stop, dtype=resolve(cfg.dtype, cfg.device))
    else:
        pad = renderer.tokenizer.pad_token_id if renderer.tokenizer.pad_token_id is not None else stop[0]
        model = generation_model(path, cfg.dtype, cfg.device)
        # Tier 3's turns extend one session, so each reuses the session's KV cache; tiers 1 and 2
        # score independent rows, batched, each from scratch.
        if cfg.backend == "continuous" and cfg.tasks is None:
            generator = EngineGenerator(model, stop=stop)
        else:
            generator = HFGenerator(
                model,
                stop=stop,
                pad=pad,
                batch_size=cfg.batch_size,
                device=cfg.device,
                reuse_cache=cfg.tasks is not None,
            )
    return Simulator(renderer, generator, cfg.max_new_tokens, cfg.temperature, cfg.seed)


def sim_eval(cfg: SimEvalConfig) -> dict[str, Any]:
    """Evaluate the configured checkpoint on held-out rows, probes or tasks (resuming a partial
    run) and write the rows file atomically; returns the summary."""
    if sum(x is not None for x in (cfg.heldout, cfg.probes, cfg.tasks)) != 1:
        raise InputError("give exactly one of --heldout, --probes and --tasks")
    if cfg.agent == "model" and not cfg.agent_model:
        raise InputError("--agent model needs --agent-model")
    _resume_check(cfg)  # before the model loads
    from terminalworld.core.threads import set_threads

    set_threads()  # the simulator and tier 3's agent take turns: one model runs at a time
    sim = simulator(cfg)
    return loop_file(cfg, sim) if cfg.tasks else evaluate_file(cfg, sim)


def _resume_check(cfg: SimEvalConfig) -> None:
    """Refuse an `--out` that another run, or a run under another `--grounding`, wrote."""
    if cfg.tasks:
        ids, source = [t.name for t in task_order(cfg.tasks)], cfg.tasks
    else:
        source = cfg.heldout or cfg.probes
        ids = [r["instance_id"] for r in read_heldout(source)]
    resumable(cfg.out, ids, source=source, accept=same_grounding(cfg.grounding, cfg.out))


def _agent(cfg: SimEvalConfig, task: Path, harness: HarnessConfig, model) -> Agent:
    if cfg.agent == "model":
        return ModelAgent(model, harness)
    wrong = wrong_fix(cfg.seed, task.name, cfg.wrong_share)
    return ScriptedAgent([action_message(s) for s in plan(task, random.Random(f"{cfg.seed}:{task.name}"), wrong=wrong)])


def loop_file(cfg: SimEvalConfig, sim: Simulator) -> dict[str, Any]:
    """Tier 3: one closed-loop episode per task with its real shadow, and the same agent against the
    real sandbox alone; rows per task and the loop's summary."""
    from tqdm import tqdm

    from terminalworld.agent.serve import ChatModel

    harness = HarnessConfig(
        max_turns=cfg.max_turns,
        context_tokens=cfg.context_tokens,
        max_tokens_per_turn=cfg.max_tokens_per_turn,
        temperature=cfg.temperature,
        seed=cfg.seed,
    )
    model = (
        ChatModel(local_model_path(cfg.agent_model), context_tokens=cfg.context_tokens)
        if cfg.agent == "model"
        else None
    )
    tasks = task_order(cfg.tasks)

    def produce(done: dict) -> Iterator[dict[str, Any]]:
        grounder = None  # made once the rows file is accepted
        if cfg.grounding != "none":
            grounded = replace(cfg, grounding_tasks=cfg.grounding_tasks or cfg.tasks)
            grounder = Grounder(grounded, sim.renderer.tokenizer)
        for task in tqdm([t for t in tasks if t.name not in done], desc="closed loop", unit="task"):
            loop = closed_loop_episode(
                agent=_agent(cfg, task, harness, model),
                simulator=sim,
                task_dir=task,
                harness=harness,
                grounder=grounder,
            )
            reward, outcome, seconds = real_episode(
                agent=_agent(cfg, task, harness, model), task_dir=task, harness=harness
            )
            yield {
                "instance_id": task.name,
                "grounding": cfg.grounding,
                "wrong_fix": cfg.agent == "solver" and wrong_fix(cfg.seed, task.name, cfg.wrong_share),
                **loop.row(),
                "real": {"reward": reward, "outcome": outcome, "seconds": seconds},
            }

    def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
        episodes = [_episode(r) for r in rows]
        real = [r["real"] for r in rows]
        name = model_label(cfg.model_name, cfg.model_path)
        stats = loop_summary(episodes, [x["reward"] for x in real], [s for x in real for s in x["seconds"]])
        return {
            "_summary": True,
            "model_name": name,
            "model_path": cfg.model_path,
            "tier": 3,
            "grounding": cfg.grounding,
            "agent": cfg.agent,
            "wrong_share": cfg.wrong_share if cfg.agent == "solver" else None,
            **stats,
        }

    return resumable_rows(
        cfg.out,
        [t.name for t in tasks],
        produce,
        summary,
        source=cfg.tasks,
        accept=same_grounding(cfg.grounding, cfg.out),
    )


def _episode(row: dict[str, Any]) -> LoopEpisode:
    return LoopEpisode(
        task=row["task"], outcome=row["outcome"], turns=[LoopTurn(**t) for t in row["turns"]], reward=row["reward"]
    )


def evaluate_file(cfg: SimEvalConfig, sim: Simulator) -> dict[str, Any]:
    """`sim_eval` with a given simulator."""
    path = cfg.heldout or cfg.probes
    rows = read_heldout(path)
    name = model_label(cfg.model_name, cfg.model_path)
    grounder = Grounder(cfg, sim.renderer.tokenizer) if cfg.grounding != "none" else None
    return resumable_rows(
        cfg.out,
        [r["instance_id"] for r in rows],
        lambda done: evaluate_rows(cfg, sim, rows, done, grounder),
        lambda results: summarize(results, cfg, name),
        source=path,
        accept=same_grounding(cfg.grounding, cfg.out),
    )
