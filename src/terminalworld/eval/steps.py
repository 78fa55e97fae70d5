"""The evaluation stage as Marin steps: the world-model probe's scores of one model, and the held-out
set with every checkpoint's scores as Hugging Face datasets. Each step runs the stage's function on
its config, built from the artifacts it reads."""

from __future__ import annotations

import os

from terminalworld.eval.hf_export import EvalSetsConfig, export_eval_sets
from terminalworld.eval.scoring import ScoreConfig, score
from terminalworld.pipeline import artifacts
from terminalworld.pipeline.step import Built, HeldoutSet, Model, Scores, config_step, model_path


def scores(
    *,
    model: Model,
    model_name: str,
    heldout: HeldoutSet,
    mode: str = "agent",
    chat_template_from: Model | None = None,
    device: str = "cpu",
    all_depths: bool = False,
    window: int | None = None,
    precision: str = "float32",
    resources=None,
    version: str,
) -> Scores:
    """The probe's scores of `model` (rendered with `chat_template_from`'s template if given); with
    `all_depths`, every earlier observation of each row too (the depth curve); with `window` (the
    trained sequence length), only rows within it, the others skipped with their reason; in
    `precision` (float32, bfloat16, or auto: `core.precision.resolve` on the machine that runs it)."""
    file = artifacts.scores_file(model_name)

    def config(ctx) -> ScoreConfig:
        return ScoreConfig(
            model_path=model_path(ctx, model),
            heldout=heldout.at(ctx, heldout.file),
            out=os.path.join(ctx.output_path, file),
            mode=mode,
            model_name=model_name,
            chat_template_from=model_path(ctx, chat_template_from),
            device=device,
            all_depths=all_depths,
            window=window,
            dtype=precision,
        )

    deps = [model, heldout, chat_template_from]
    # The scores file resumes from what a preempted run put back (`local`).
    step = config_step(
        artifacts.scores(model_name), score, config, version=version, deps=deps, resources=resources, local="out"
    )
    return Scores(step, file=file, model_name=model_name)


def eval_sets(
    *,
    heldout: HeldoutSet,
    scores: list[Scores],
    hub_repos: dict[str, str] | None = None,
    push: bool = False,
    token_env: str = "HF_TOKEN",
    version: str,
) -> Built:
    """Hugging Face datasets of the held-out rows and of every checkpoint's scores of them; with
    `push`, each goes to its Hub repo in `hub_repos` with the token in `$token_env`."""

    def config(ctx) -> EvalSetsConfig:
        return EvalSetsConfig(
            heldout=heldout.at(ctx, heldout.file),
            scores={s.model_name: s.at(ctx, s.file) for s in scores},
            out=ctx.output_path,
            hub_repos=hub_repos,
            push=push,
            token_env=token_env,
        )

    # save_to_disk writes a local folder, put back in the output folder at the end (`local`).
    step = config_step(
        artifacts.EVAL_SETS, export_eval_sets, config, version=version, deps=[heldout, *scores], local="out"
    )
    return Built(step)
