"""Pilot II: the write-up's findings tested on a real pretrained model, in shards of at most 90 minutes.

    python experiments/pilot.py                  # print the plan: every step, its cost, the shards
    python experiments/pilot.py --shards         # the ledger: each shard's estimate and state
    python experiments/pilot.py --shard next     # run the next pending shard (or --shard NAME) and commit its rows
    python experiments/pilot.py --preset gpu     # the same graph sized for one GPU

SmolLM2-135M-Instruct fine-tuned under each loss-mask arm at three nested scales 3x apart under
two seeds, scored at every depth, graded as an agent on the task ladder and as a simulator. Each
shard (the shared inputs, the base, or one arm x seed chain) commits its rows and a ledger entry to
`docs/snapshots/pilot-ii/`; the cuts, their reasons and the departures are on docs/pilot.md.
"""

import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from terminalworld.agent import steps as agent
from terminalworld.agent.harness import HarnessConfig
from terminalworld.corpus import steps as corpus
from terminalworld.eval import steps as evaluation
from terminalworld.pipeline import cost
from terminalworld.pipeline.shards import Shard
from terminalworld.pipeline.step import Built, Checkpoint, Report
from terminalworld.pipeline.zephyr import local_workers
from terminalworld.report import steps as reports
from terminalworld.report.pilot import departures_from
from terminalworld.sim import steps as sim
from terminalworld.sim.steps import Decoding
from terminalworld.train import steps as train
from terminalworld.train.sft import MARIN_PRECISION, SftRecipe

PAGE = Path(__file__).resolve().parents[1] / "docs" / "pilot.md"  # the departures and the cuts
LEDGER = "docs/snapshots/pilot-ii"
CONTROL = "base-control"  # the dequantised base after the smallest scale's steps on unrelated text


@dataclass(frozen=True)
class Pilot:
    """The pilot's sizes, each overridable (`--heldout_n 30`, `--config_path`); cuts: the Pilot page."""

    version: str = "2026.12.07.1"  # Pilot II in shards; its cuts and earlier versions: the Pilot page
    base: str = "smollm2"  # SmolLM2-135M-Instruct's Q4_1 GGUF dequantised to float32
    tokenizer: str = "smollm2"
    trajectories: int = 320  # the corpus: exploration trajectories plus solving episodes
    solve_tasks: int = 24
    max_output_chars: int = 2000  # so that 14 context turns fit the 8,192-token window
    record_seed: int = 1
    seed: int = 42  # the data steps' draws, shared by every seed
    seeds: tuple[int, ...] = (42, 43)  # each seed a chain of nested scales per arm: data order, attempts
    arms: tuple[str, ...] = ("assistant", "full", "user")
    scale_names: tuple[str, ...] = ("x1", "x3", "x9")
    scale_steps: tuple[int, ...] = (2, 6, 18)  # checkpoints of one constant-LR run, 3x apart
    sft_size: int = 60
    seq_len: int = 8192  # SmolLM2's window: it covers every scored position
    batch_size: int = 1
    learning_rate: float = 1e-4
    warmup_steps: int = 2
    weight_decay: float = 0.1
    max_grad_norm: float = 30.0
    # The probe: its headline pools every read + predict turn at depth >= min_depth of each row's
    # one forward; the rows are the clusters (at least 20 rows, 40 targets a checkpoint).
    heldout_n: int = 20
    min_depth: int = 8
    context_turns: int = 14
    expected_row_tokens: int = 3500  # for the estimate only, until the held-out set exists
    # The agent grade on the task ladder: the base in the base shard, (a) and (b) at each seed's
    # largest scale in their chains; a level the gate closes is graded on `gated_attempts`.
    agent_tasks: int = 16
    agent_levels: tuple[str, ...] = ("function", "pinpoint")
    attempts: int = 2
    gated_attempts: int = 1
    concurrent_trials: int = 4
    harness: HarnessConfig = field(
        default_factory=lambda: HarnessConfig(max_turns=3, context_tokens=8192, max_tokens_per_turn=64, temperature=0.8)
    )
    # The simulator grade: tiers 1-2 for the base and each seed's largest (b) and (c); tier 3 (the
    # solver's loop, half its fixes wrong) for the base only.
    sim_heldout_n: int = 8
    probes: int = 10
    loop_tasks: int = 12
    loop_wrong_share: float = 0.5
    sim: Decoding = field(default_factory=lambda: Decoding(max_new_tokens=64))
    device: Literal["cpu", "cuda"] = "cpu"
    sft_mp: str = MARIN_PRECISION  # Marin's p=f32,c=bfloat16: 1.37x float32 on these cores
    precision: Literal["float32", "bfloat16"] = "float32"  # scoring and generation
    workers: int = 2
    shard_rows: int = 20


PRESETS = {
    "cpu": Pilot(),
    "gpu": Pilot(sft_size=90, scale_steps=(9, 27, 81), heldout_n=80, agent_tasks=24, attempts=8, device="cuda"),
}


def recipe(p: Pilot, steps: int, seed: int) -> SftRecipe:
    """The write-up's SFT recipe, scaled: constant LR after the warm-up; `seed` keys the data order."""
    return SftRecipe(
        shuffle=True,
        epochs=1.0,
        steps=steps,
        batch_size=p.batch_size,
        learning_rate=p.learning_rate,
        warmup=float(p.warmup_steps),
        min_lr_ratio=1.0,
        lr_schedule="constant",
        weight_decay=p.weight_decay,
        max_grad_norm=p.max_grad_norm,
        seed=seed,
        seq_len=p.seq_len,
        max_seq_len=8192,
        checkpoint_minutes=10.0,
        mp=p.sft_mp,
    )


@dataclass(frozen=True)
class PilotGraph:
    """The pilot's artifacts by role and its shards, in the order they run."""

    models: dict[str, Checkpoint | str]
    shards: dict[str, Shard]
    report: Report
    eval_sets: Built


def build(p: Pilot = Pilot(), closed: frozenset[str] = frozenset()) -> PilotGraph:
    """The step graph and its shards; a level the gate `closed` gets `gated_attempts` in the chains."""
    if len(set(p.seeds)) != len(p.seeds) or not p.seeds or p.scale_steps[0] < 2 or "function" not in p.agent_levels:
        raise ValueError("seeds: at least one, distinct; scale_steps: 2 at least (an HF export); the function level")
    v, workers = p.version, local_workers(p.workers)
    inputs, base = Shard("inputs", whole=True), Shard("base")
    shards = {"inputs": inputs, "base": base}
    train_tasks = agent.task_suite(purpose="train", n=p.solve_tasks, seed=p.record_seed, level="ladder", version=v)
    recorded = corpus.recorded_corpus(trajectories=p.trajectories, seed=p.record_seed, tasks=train_tasks,
                                      max_output_chars=p.max_output_chars, version=v)  # fmt: skip
    subsets = corpus.subsets(corpus=recorded, sizes=[p.sft_size], seed=p.seed, workers=workers, version=v)
    unseen = dict(unseen_in=subsets, size=p.sft_size, version=v)
    rows = dict(corpus=recorded, subsets=subsets, train_size=p.sft_size, context_turns=p.context_turns, version=v)
    probe_rows = corpus.heldout(n=p.heldout_n, seed=p.seed, workers=workers, **rows)
    sim_rows = corpus.heldout(n=p.sim_heldout_n, seed=p.seed + 1, workers=workers, **rows)
    n_tasks = 3 * p.solve_tasks + len(p.agent_levels) * p.agent_tasks + p.loop_tasks
    record = cost.record_work(trajectories=p.trajectories, solving=3 * p.solve_tasks, tasks=n_tasks)
    inputs.add(train_tasks, "record corpus, make tasks", record)
    inputs.extend(recorded, subsets, probe_rows, sim_rows)
    suites = {
        lv: inputs.add(agent.task_suite(purpose="heldout", n=p.agent_tasks, seed=p.seed, level=lv, **unseen))
        for lv in p.agent_levels
    }
    probes = inputs.add(sim.probe_set(n=p.probes, seed=p.seed, **unseen))
    loop_tasks = inputs.add(agent.task_suite(purpose="loop", n=p.loop_tasks, seed=p.seed + 1, **unseen))
    pack = dict(subsets=subsets, size=p.sft_size, tokenizer=p.tokenizer, seq_len=p.seq_len, version=v)
    data = train.arm_sets(arms=p.arms, scale="pilot", workers=workers, shard_rows=p.shard_rows, **pack)
    plain = train.plain_text(sequences=p.scale_steps[0] * p.batch_size, **pack)
    inputs.extend(*data.values(), plain)
    models: dict[str, Checkpoint | str] = {"base": p.base}
    control = recipe(p, p.scale_steps[0], p.seeds[0])
    models[CONTROL] = base.train(
        train.checkpoint(tokenized=plain, arm=CONTROL, scale="x1-s1", recipe=control, init_from=p.base, version=v),
        f"sft {CONTROL}",
        cost.sft_work(steps=control.steps, done=0, batch_size=p.batch_size, seq_len=p.seq_len),
    )
    owner = {"base": base, CONTROL: base}
    for k, seed in enumerate(p.seeds):
        for arm in p.arms:
            chain = shards[f"{arm}-s{k + 1}"] = Shard(f"{arm}-s{k + 1}")
            steps = [(f"{n}-s{k + 1}", recipe(p, s, seed)) for n, s in zip(p.scale_names, p.scale_steps, strict=True)]
            run = train.nested_scales(tokenized=data[arm], arm=arm, scales=steps, init_from=p.base, version=v)
            for (scale, r), done in zip(steps, (0, *p.scale_steps), strict=False):
                work = cost.sft_work(steps=r.steps, done=done, batch_size=p.batch_size, seq_len=p.seq_len)
                models[f"{arm}-{scale}"] = chain.train(run[scale], f"sft {arm}-{scale}", work)
                owner[f"{arm}-{scale}"] = chain
    template = models[CONTROL]  # the base is rendered with a checkpoint's template: its own shard's
    tmpl = lambda name: template if name == "base" else None  # noqa: E731
    probe = dict(heldout=probe_rows, all_depths=True, window=p.seq_len, device=p.device, precision=p.precision)
    scores = [
        owner[name].add(
            evaluation.scores(model=m, model_name=name, chat_template_from=tmpl(name), **probe, version=v),
            f"score {name}",
            cost.probe_work(rows=p.heldout_n, row_tokens=p.expected_row_tokens),
        )
        for name, m in models.items()
    ]
    largest = [f"{arm}-{p.scale_names[-1]}-s{k + 1}" for k in range(len(p.seeds)) for arm in p.arms]
    grades, ladder, sims = [], {}, []
    for level, suite in suites.items():
        for name in ["base", *(n for n in largest if n.startswith(("assistant-", "full-")))]:
            k = 0 if name == "base" else int(name.rsplit("-s", 1)[1]) - 1
            n = p.gated_attempts if level in closed and name != "base" else p.attempts
            harness, suite_name = replace(p.harness, seed=p.harness.seed + k), f"heldout-{level}-tasks"
            grade = agent.local_grade(
                model=models[name], model_name=name, tasks=suite, n_attempts=n, dtype=p.precision, harness=harness,
                n_concurrent=p.concurrent_trials, version=v,
                benchmark="heldout-tasks" if level == "function" else suite_name,
            )  # fmt: skip
            work = cost.agent_work(tasks=p.agent_tasks, attempts=n, harness=harness, concurrent=p.concurrent_trials)
            owner[name].add(grade, f"agent {name} ({level})", work)
            (grades if level == "function" else ladder.setdefault(level, [])).append(grade)
    decode = replace(p.sim, device=p.device, dtype=p.precision)
    for name in ["base", *(n for n in largest if n.startswith(("full-", "user-")))]:
        loops = [{"tasks": loop_tasks, "wrong_share": p.loop_wrong_share}] if name == "base" else []
        for source in [{"heldout": sim_rows}, {"probes": probes}, *loops]:
            graded = sim.sim_grade(model=models[name], model_name=name, decoding=decode, version=v,
                                   chat_template_from=tmpl(name), **source)  # fmt: skip
            sims.append(owner[name].add(graded))
        owner[name].costs[f"sim {name}"] = cost.sim_work(
            heldout=p.sim_heldout_n, probes=p.probes, loop_turns=8 * len(loops) * p.loop_tasks, decoding=p.sim,
            row_tokens=p.expected_row_tokens,
        )  # fmt: skip
    report = reports.pilot_report(
        scores=scores,
        base="base",
        arms=list(p.arms),
        scales=[f"{s}-s1" for s in p.scale_names],
        grades=grades,
        sims=sims,
        departures=departures_from(str(PAGE)),
        ladder=ladder,
        version=v,
        training=data,
        scale_sequences={f"{n}-s1": s * p.batch_size for n, s in zip(p.scale_names, p.scale_steps, strict=True)},
        seeds=[f"s{k + 1}" for k in range(len(p.seeds))],
        scale_names=list(p.scale_names),
        control=CONTROL,
        walltimes=True,
    )
    eval_sets = evaluation.eval_sets(heldout=probe_rows, scores=scores, version=v)
    return PilotGraph(models=models, shards=shards, report=report, eval_sets=eval_sets)


if __name__ == "__main__":
    os.environ.setdefault("MARIN_PREFIX", os.path.abspath("local-prefix"))
    os.environ.setdefault("WANDB_MODE", "offline")
    from terminalworld.pipeline.entry import main
    from terminalworld.pipeline.shards import read_ledger
    from terminalworld.report.shard_run import plan_text, recipe_column, shard_command

    if (code := shard_command(sys.argv[1:], build, Pilot, PRESETS, LEDGER)) is not None:
        sys.exit(code)

    def targets(p: Pilot) -> list:
        graph = build(p)
        if "--run" not in sys.argv[1:]:
            print(plan_text(graph.shards, read_ledger(LEDGER), recipe_column(p), p.device) + "\n")
        return [graph.report, graph.eval_sets]

    sys.exit(main(targets, __doc__.split("\n\n")[0], recipe=Pilot, presets=PRESETS))
