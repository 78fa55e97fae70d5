"""The whole pipeline in miniature on CPU, under MARIN_PREFIX (default: ./local-prefix).

    python experiments/local_demo.py            # print the plan
    python experiments/local_demo.py --run      # run it (finished steps are reused)
    python experiments/local_demo.py --run --trajectories 80 --tiny.hidden_dim 64   # an overridden recipe
    python experiments/local_demo.py --config_path my_demo.yaml                      # the same from YAML

Record a real-shell corpus (exploration trajectories and the solving episodes of generated
bug-fix tasks); draw nested subsets, whose smaller one is the SFT set and whose
remainder is the base model's pretraining text (held apart from SFT); sample held-out rows from
repos unseen in either; pretrain a tiny Qwen3 "base" as a plain language model (every token
trained), so that, like Qwen3-1.7B-Base, it starts with some knowledge of terminal output;
fine-tune it under each loss-mask arm; export to HF; score the base and the arms on the held-out
rows; generate bug-fix tasks from repos unseen in training and grade every model as an agent on
them with Harbor, every command in the sandbox; grade every model as a simulator (free-running on
the held-out rows and on probes with known answers, one in the closed loop with a real shadow
sandbox); compare the grades. Writes report.json / report.md / plots under the report artifact, and the
held-out set with every model's scores as Hugging Face datasets. Subsets, held-out sampling and
rendering run as Zephyr jobs on local worker processes.
"""

import os
import sys
from dataclasses import dataclass, field

from terminalworld.agent import steps as agent
from terminalworld.agent.steps import Episodes
from terminalworld.corpus import steps as corpus
from terminalworld.eval import steps as evaluation
from terminalworld.pipeline.step import Built, Checkpoint, Corpus, HeldoutSet, Report, Subsets, TaskSet
from terminalworld.pipeline.zephyr import local_workers
from terminalworld.report import steps as reports
from terminalworld.sim import steps as sim
from terminalworld.sim.steps import Decoding
from terminalworld.train import steps as train
from terminalworld.train.sft import FLOAT32, SftRecipe, TinyQwen3


@dataclass(frozen=True)
class Demo:
    """The miniature's sizes and recipe (CPU-sized: minutes on 2 cores). Every field can be
    overridden on the command line (`--trajectories 80`, nested ones dotted: `--tiny.hidden_dim 64`)
    or from YAML (`--config_path`); an overridden recipe gets its own version (see
    `terminalworld.pipeline.entry`)."""

    version: str = "2026.12.03"
    trajectories: int = 160
    record_seed: int = 0
    max_output_chars: int = 1000  # shorter observations than SWE-ZERO's 8000 keep rows CPU-sized
    sft_size: int = 40
    pretrain_size: int = 100  # rows sft_size..pretrain_size of the larger subset
    heldout_n: int = 24
    context_turns: int = 3  # rows of about 1.7K tokens, inside the trained sequence length
    seed: int = 42
    tokenizer: str = "smollm2"  # a real tokenizer with a small vocabulary keeps CPU training fast
    seq_len: int = 2048
    # Corpus-scale stages run as Zephyr jobs with this many local worker processes, one shard each
    # for sampling; rendering cuts shards of shard_rows rows.
    workers: int = 2
    shard_rows: int = 20
    # Training cost on CPU is dominated by the 49K-word softmax, i.e. by width x tokens.
    tiny: TinyQwen3 = field(
        default_factory=lambda: TinyQwen3(
            hidden_dim=32, intermediate_dim=96, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=16
        )
    )
    pretrain_epochs: float = 3.0
    pretrain_lr: float = 5e-3
    sft_epochs: float = 2.0
    sft_lr: float = 3e-3
    batch_size: int = 2
    arms: tuple[str, ...] = ("assistant", "full", "user")
    solve_tasks: int = 12  # generated bug-fix tasks whose solving episodes join the recorded corpus
    agent_tasks: int = 4  # generated bug-fix tasks, all from repos unseen in training
    # Short episodes: the tiny models' replies rarely follow the format, and the context is theirs.
    harness: Episodes = field(
        default_factory=lambda: Episodes(max_turns=4, context_tokens=2048, max_tokens_per_turn=128)
    )
    probes: int = 20  # tier-2 probes (two per family), from repos unseen in training
    # Simulated outputs are capped at 128 tokens: these models loop long before that.
    sim: Decoding = field(default_factory=lambda: Decoding(max_new_tokens=128))
    loop_arm: str = "full"  # the simulator of the closed loop (tier 3), on the held-out tasks


@dataclass(frozen=True)
class DemoGraph:
    """The demo's artifacts by role; `report` depends on all the others."""

    corpus: Corpus
    subsets: Subsets
    heldout: HeldoutSet
    models: dict[str, Checkpoint]
    train_tasks: TaskSet
    agent_tasks: TaskSet
    report: Report
    eval_sets: Built  # the held-out set and every model's scores as HF datasets


def build(d: Demo = Demo()) -> DemoGraph:
    """The demo's step graph (constructing it runs nothing)."""
    v = d.version
    train_tasks = agent.task_suite(purpose="train", n=d.solve_tasks, seed=d.record_seed, version=v)
    recorded = corpus.recorded_corpus(
        trajectories=d.trajectories,
        seed=d.record_seed,
        max_output_chars=d.max_output_chars,
        tasks=train_tasks,
        version=v,
    )
    workers = local_workers(d.workers)
    subsets = corpus.subsets(
        corpus=recorded, sizes=[d.sft_size, d.pretrain_size], seed=d.seed, workers=workers, version=v
    )
    heldout = corpus.heldout(
        corpus=recorded,
        subsets=subsets,
        train_size=d.pretrain_size,
        n=d.heldout_n,
        context_turns=d.context_turns,
        seed=d.seed,
        workers=workers,
        version=v,
    )

    def recipe(epochs: float, lr: float, tiny: TinyQwen3 | None = None) -> SftRecipe:
        return SftRecipe(
            epochs=epochs,
            batch_size=d.batch_size,
            learning_rate=lr,
            warmup=0.1,
            min_lr_ratio=0.1,
            weight_decay=0.0,
            max_grad_norm=1.0,
            seed=42,
            seq_len=d.seq_len,
            max_seq_len=d.seq_len,
            tiny=tiny,
            mp=FLOAT32,  # the demo's recorded runs computed in float32; bf16 is for the real shapes
        )

    text = train.tokenized(
        subsets=subsets,
        size=d.pretrain_size,
        skip=d.sft_size,
        arm="pretrain",
        scale="demo",
        tokenizer=d.tokenizer,
        max_len=d.seq_len - 1,
        seq_len=d.seq_len,
        workers=workers,
        shard_rows=d.shard_rows,
        version=v,
    )
    base = train.checkpoint(
        tokenized=text, arm="base", scale="demo", recipe=recipe(d.pretrain_epochs, d.pretrain_lr, d.tiny), version=v
    )
    data = train.arm_sets(
        subsets=subsets,
        size=d.sft_size,
        arms=d.arms,
        scale="demo",
        tokenizer=d.tokenizer,
        seq_len=d.seq_len,
        workers=workers,
        shard_rows=d.shard_rows,
        version=v,
    )
    models = {"base": base}
    for arm in d.arms:
        run = train.nested_scales(
            tokenized=data[arm], arm=arm, scales=[("demo", recipe(d.sft_epochs, d.sft_lr))], init_from=base, version=v
        )
        models[arm] = run["demo"]
    # The probe scores within the trained window: a longer row is skipped with its reason.
    scores = [
        evaluation.scores(model=m, model_name=name, heldout=heldout, window=d.seq_len, version=v)
        for name, m in models.items()
    ]
    tasks = agent.task_suite(
        purpose="heldout", n=d.agent_tasks, seed=d.seed, unseen_in=subsets, size=d.pretrain_size, version=v
    )
    grades = [
        agent.local_grade(model=m, model_name=name, tasks=tasks, harness=d.harness, version=v)
        for name, m in models.items()
    ]
    probes = sim.probe_set(n=d.probes, seed=d.seed, unseen_in=subsets, size=d.pretrain_size, version=v)
    sims = [
        sim.sim_grade(model=m, model_name=name, decoding=d.sim, version=v, **source)
        for name, m in models.items()
        for source in ({"heldout": heldout}, {"probes": probes})
    ]
    sims.append(sim.sim_grade(model=models[d.loop_arm], model_name=d.loop_arm, tasks=tasks, decoding=d.sim, version=v))
    report = reports.report(
        scores=scores,
        base="base",
        reference="full" if "full" in d.arms else None,
        grades=grades,
        sims=sims,
        version=v,
    )
    eval_sets = evaluation.eval_sets(heldout=heldout, scores=scores, version=v)
    return DemoGraph(
        corpus=recorded,
        subsets=subsets,
        heldout=heldout,
        models=models,
        train_tasks=train_tasks,
        agent_tasks=tasks,
        report=report,
        eval_sets=eval_sets,
    )


if __name__ == "__main__":
    os.environ.setdefault("MARIN_PREFIX", os.path.abspath("local-prefix"))
    os.environ.setdefault("WANDB_MODE", "offline")
    from terminalworld.pipeline.entry import main

    sys.exit(main(lambda d: [(g := build(d)).report, g.eval_sets], __doc__.split("\n\n")[0], recipe=Demo))
