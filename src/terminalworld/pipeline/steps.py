"""Step functions and Marin step builders: the pipeline as artifacts.

Each `*_fn` is a plain top-level function (so Fray can ship it to a worker) that reads its inputs
from artifact folders and writes its output folder. Each builder wraps one in a Marin
`ArtifactStep` with `apply`, so the artifact lives at `{prefix}/{name}/{version}`
(`terminalworld.artifacts`). Data flows one way:

    corpus -> subsets -> held-out
                      -> tokenized (per arm x scale) -> SFT checkpoint -> scores -> report
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict
from typing import Any

import fsspec
from fsspec.core import url_to_fs

from terminalworld.pipeline import artifacts

# -- step functions ---------------------------------------------------------------------------


def record_fn(out: str, trajectories: int, seed: int, max_output_chars: int) -> None:
    from terminalworld.corpus.recorder import RecordConfig, record_corpus

    record_corpus(RecordConfig(out=out, trajectories=trajectories, seed=seed, max_output_chars=max_output_chars))


def _corpus_glob(corpus: str) -> str:
    return corpus if any(c in corpus for c in "*?[") else os.path.join(corpus, "*.jsonl*")


def subsets_fn(corpus: str, out: str, sizes: str, seed: int) -> None:
    from terminalworld.corpus.sampling import SubsetsConfig, make_subsets

    make_subsets(SubsetsConfig(corpus=_corpus_glob(corpus), out=out, sizes=sizes, seed=seed))


def heldout_fn(corpus: str, subsets: str, train_size: int, out: str, n: int, context_turns: int, seed: int) -> None:
    from terminalworld.corpus.sampling import HeldoutConfig, sample_heldout, subset_path

    sample_heldout(
        HeldoutConfig(
            corpus=[_corpus_glob(corpus)],
            train=[subset_path(subsets, train_size)],
            out=os.path.join(out, artifacts.heldout_file(n)),
            n=n,
            context_turns=context_turns,
            seed=seed,
        )
    )


def tokenize_fn(
    inputs: str,
    out: str,
    arm: str,
    tokenizer: str,
    max_len: int,
    seq_len: int,
    separator: str = "<|endoftext|>",
    exclude_harness_text: bool = False,
) -> None:
    """Render one arm (`arm="pretrain"`: every token weighted, plain LM text), pack it for
    Levanter, and store the training tokenizer beside it."""
    from terminalworld.core.assets import load_tokenizer
    from terminalworld.core.records import atomic_jsonl, dumps_row, iter_records
    from terminalworld.core.render import RenderConfig, render_file
    from terminalworld.train.packing import PackStats, pack_rows, training_tokenizer

    rows_path = os.path.join(out, "rows.jsonl.gz")
    stats = render_file(
        RenderConfig(
            tokenizer=tokenizer,
            inputs=inputs,
            out=rows_path,
            arm="full" if arm == "pretrain" else arm,
            max_len=max_len,
            exclude_harness_text=exclude_harness_text,
        )
    )
    rows = (r.value for r in iter_records(rows_path))
    if arm == "pretrain":
        rows = ({**r, "loss_weights": [1] * len(r["input_ids"])} for r in rows)
    sep = load_tokenizer(tokenizer).convert_tokens_to_ids(separator)
    pack = PackStats()
    with atomic_jsonl(os.path.join(out, "packed", "packed-00000.jsonl.gz")) as f:
        for p in pack_rows(rows, seq_len, sep, pack):
            f.write(dumps_row({"input_ids": p["input_ids"], "loss_weights": p["loss_weights"]}))
    training_tokenizer(tokenizer, os.path.join(out, "training-tokenizer"), separator)
    _write_json(
        os.path.join(out, "stats.json"),
        {**stats, "arm": arm, "seq_len": seq_len, "pack": asdict(pack), "render_tokenizer": tokenizer},
    )


def tokenize_subset_fn(
    subsets: str, size: int, skip: int, out: str, arm: str, tokenizer: str, max_len: int, seq_len: int
) -> None:
    """`tokenize_fn` on rows skip..size of a subset; with nested subsets, skipping the smaller
    subset's rows gives data held apart from it. The chosen rows are kept as `inputs.jsonl.gz`."""
    from terminalworld.core.records import atomic_jsonl, iter_records
    from terminalworld.corpus.sampling import subset_path

    chosen = os.path.join(out, "inputs.jsonl.gz")
    with atomic_jsonl(chosen) as f:
        for i, rec in enumerate(iter_records(subset_path(subsets, size))):
            if i >= skip:
                f.write(rec.line_bytes().decode())
    tokenize_fn(chosen, out, arm, tokenizer, max_len, seq_len)


def sft_fn(tokenized: str, out: str, recipe: dict[str, Any], init_from: str | None = None) -> None:
    """Levanter training on a tokenized artifact; the final HF export gets the rendering tokenizer
    and its chat template, so the scorer renders exactly as training did."""
    from terminalworld.train.sft import SftConfig, SftRecipe, run_sft

    r = SftRecipe(**recipe)
    stats = _read_json(os.path.join(tokenized, "stats.json"))
    steps = max(1, math.ceil(stats["pack"]["sequences"] * r.epochs / r.batch_size))
    fs, root = url_to_fs(tokenized)
    hf = run_sft(
        SftConfig(
            rows=[fs.unstrip_protocol(p) for p in sorted(fs.glob(f"{root}/packed/*.jsonl.gz"))],
            tokenizer=os.path.join(tokenized, "training-tokenizer"),
            cache_dir=os.path.join(out, "cache"),
            output_dir=out,
            num_train_steps=steps,
            recipe=r,
            initialize_from_hf=hf_export(init_from) if init_from else None,
        )
    )
    from terminalworld.core.assets import load_tokenizer

    load_tokenizer(stats["render_tokenizer"]).save_pretrained(hf)
    _write_json(os.path.join(out, "export.json"), {"hf": os.path.relpath(hf, out), "steps": steps})


def hf_export(checkpoint: str) -> str:
    """The final HF export of a checkpoint artifact (or the path itself for a plain HF folder)."""
    meta = os.path.join(checkpoint, "export.json")
    fs, path = url_to_fs(meta)
    return os.path.join(checkpoint, _read_json(meta)["hf"]) if fs.exists(path) else checkpoint


def score_fn(
    model: str,
    heldout: str,
    n: int,
    out: str,
    mode: str,
    model_name: str,
    chat_template_from: str | None = None,
    device: str = "cpu",
) -> None:
    from terminalworld.eval.scoring import ScoreConfig, score

    score(
        ScoreConfig(
            model_path=hf_export(model),
            heldout=os.path.join(heldout, artifacts.heldout_file(n)),
            out_path=os.path.join(out, artifacts.scores_file(model_name)),
            mode=mode,
            model_name=model_name,
            chat_template_from=hf_export(chat_template_from) if chat_template_from else None,
            device=device,
        )
    )


def report_fn(scores: dict[str, str], out: str, base: str, reference: str | None) -> None:
    """The probe comparison (report.md, metrics.json, plots) and the demo's `report.json`."""
    from terminalworld.report.probe.probe import markdown, write_comparison

    paths = [os.path.join(d, artifacts.scores_file(name)) for name, d in scores.items()]
    table = write_comparison(paths, base, reference, out)
    arms = [
        {
            "arm": c["name"],
            "median_ppl": c["median_ppl"],
            "token_weighted_ppl": c["token_weighted_ppl"],
            "mean_ppl": c["mean_ppl"],
            "n_ppl_gt_10": c["n_ppl_gt_10"],
            "beats_base": c.get("beats_base"),
            "median_ppl_ci95": c["median_ppl_ci95"],
            "tokens": c["tokens"],
        }
        for c in table["checkpoints"]
    ]
    _write_json(os.path.join(out, "report.json"), {"arms": arms, "n_trajectories": table["n_common"], "base": base})
    print(markdown(table))


def _read_json(path: str) -> Any:
    with fsspec.open(path, "r") as f:
        return json.load(f)


def _write_json(path: str, value: Any) -> None:
    from terminalworld.core.records import write_json

    write_json(path, value)
