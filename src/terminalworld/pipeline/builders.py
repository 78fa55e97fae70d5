"""Marin step builders for Phase 0 and the world-model probe, and the plan printer.

A builder returns an `ArtifactStep` (Marin's lazy API: constructing it runs nothing). Resources are
attached by wrapping the step function with `marin.execution.remote.remote` on a cluster; locally
(`resources=None`) a step runs in the driver's process. The experiment files pin every version.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from terminalworld.errors import StepFailed
from terminalworld.pipeline import artifacts, steps
from terminalworld.train.sft import SftRecipe

# name -> resources, for the plan (a remote-wrapped function hides them inside a closure)
_RESOURCES: dict[str, str] = {}


def _fn(fn, resources):
    """`fn` as a Marin step function: shipped to Fray with `resources`, or run in-process."""
    if resources is None:
        return fn
    from marin.execution.remote import remote

    return remote(fn, resources=resources)


def _apply(name: str, fn, version: str, resources=None, **inputs):
    from marin.execution.lazy import apply

    _RESOURCES[name] = "local process" if resources is None else _describe(resources)
    return apply(name, _fn(fn, resources), version=version, **inputs)


def _describe(resources) -> str:
    device = getattr(resources, "device", None)
    kind = type(device).__name__.replace("Config", "").lower()
    variant = getattr(device, "variant", None)
    return f"{kind} {variant}" if variant and variant != kind else kind


def corpus(version: str, source: str):
    """The SWE-ZERO 12M copy, adopted where it already lies (nothing is recomputed)."""
    from marin.execution.lazy import ArtifactStep

    _RESOURCES[artifacts.CORPUS] = "adopted (no compute)"
    return ArtifactStep.adopt(artifacts.CORPUS, version, source)


def recorded_corpus(version: str, trajectories: int, seed: int, max_output_chars: int = 8000):
    from marin.execution.lazy import OUT

    return _apply(
        artifacts.RECORDED_CORPUS,
        steps.record_fn,
        version,
        out=OUT,
        trajectories=trajectories,
        seed=seed,
        max_output_chars=max_output_chars,
    )


def subsets(corpus_step, version: str, sizes: list[int], seed: int = 42, resources=None):
    from marin.execution.lazy import OUT

    return _apply(
        artifacts.SUBSETS,
        steps.subsets_fn,
        version,
        resources,
        corpus=corpus_step,
        out=OUT,
        sizes=",".join(str(s) for s in sizes),
        seed=seed,
    )


def heldout(
    corpus_step,
    subsets_step,
    train_size: int,
    version: str,
    n: int = 100,
    context_turns: int = 14,
    seed: int = 42,
    resources=None,
):
    from marin.execution.lazy import OUT

    return _apply(
        artifacts.heldout(n),
        steps.heldout_fn,
        version,
        resources,
        corpus=corpus_step,
        subsets=subsets_step,
        train_size=train_size,
        out=OUT,
        n=n,
        context_turns=context_turns,
        seed=seed,
    )


def tokenized(
    subsets_step,
    size: int,
    arm: str,
    version: str,
    tokenizer: str,
    max_len: int,
    seq_len: int,
    skip: int = 0,
    scale: str | None = None,
    resources=None,
):
    """Render + pack one arm of rows skip..size of a subset (`arm="pretrain"`: plain LM text)."""
    from marin.execution.lazy import OUT

    name = artifacts.tokenized(arm, scale or artifacts.scale_name(size))
    return _apply(
        name,
        steps.tokenize_subset_fn,
        version,
        resources,
        subsets=subsets_step,
        size=size,
        skip=skip,
        out=OUT,
        arm=arm,
        tokenizer=tokenizer,
        max_len=max_len,
        seq_len=seq_len,
    )


def checkpoint(tokenized_step, arm: str, scale: str, version: str, recipe: SftRecipe, init_from=None, resources=None):
    from marin.execution.lazy import OUT

    return _apply(
        artifacts.checkpoint(arm, scale),
        steps.sft_fn,
        version,
        resources,
        tokenized=tokenized_step,
        out=OUT,
        recipe=asdict(recipe),
        init_from=init_from,
    )


def scores(
    model,
    model_name: str,
    heldout_step,
    n: int,
    version: str,
    mode: str = "agent",
    chat_template_from=None,
    device: str = "cpu",
    resources=None,
):
    from marin.execution.lazy import OUT

    return _apply(
        artifacts.scores(model_name),
        steps.score_fn,
        version,
        resources,
        model=model,
        heldout=heldout_step,
        n=n,
        out=OUT,
        mode=mode,
        model_name=model_name,
        chat_template_from=chat_template_from,
        device=device,
    )


def report(score_steps: dict[str, Any], base: str, reference: str | None, version: str):
    from marin.execution.lazy import OUT

    return _apply(
        artifacts.REPORT, steps.report_fn, version, scores=score_steps, out=OUT, base=base, reference=reference
    )


def plan(handles: list, prefix: str | None = None) -> str:
    """Each step of the graph (dependencies first): name@version, output path, resources."""
    import json

    from marin.execution.lazy import materialized_config
    from marin.experiment.cli import graph_handles

    prefix = prefix or artifacts.prefix()
    lines = []
    for h in graph_handles(list(handles)):
        deps = ", ".join(f"{d.name}@{d.version}" for d in h.deps) or "-"
        lines.append(
            f"{h.name}@{h.version}\n    output:    {h.path(prefix)}\n    resources: {_RESOURCES.get(h.name, '?')}\n"
            f"    needs:     {deps}"
        )
        if h.adopt_source is None:
            lines.append(f"    config:    {json.dumps(materialized_config(h, prefix), default=str)}")
    return "\n".join(lines)


def run(handles: list) -> None:
    """Build the handles (and everything they need) through Marin's step runner; finished
    artifacts are reused. A failing step raises `StepFailed` naming the step, its output folder
    (where Marin keeps its status and log) and the cause; the full traceback is in the log above."""
    from marin.execution.lazy import run as marin_run

    try:
        marin_run(*handles, max_concurrent=1)
    except RuntimeError as e:
        failed = e.__cause__
        step = str(failed).removeprefix("Step failed: ") if failed is not None else "?"
        cause = failed.__cause__ if failed is not None and failed.__cause__ is not None else e
        raise StepFailed(f"step {step} failed ({artifacts.prefix()}/...): {type(cause).__name__}: {cause}") from None


def main(handles: list, description: str) -> None:
    """An experiment file's entry point: print the plan, or with --run build everything through
    Marin; failures end in one line naming the step."""
    import argparse
    import sys

    from terminalworld.cli import run_cli

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--run", action="store_true", help="build the artifacts (default: print the plan)")
    if parser.parse_args().run:
        code = run_cli(lambda: run(handles))
        if code == 0:
            print("\n".join(f"built: {h.path()}" for h in handles))
        sys.exit(code)
    print(plan(handles))
