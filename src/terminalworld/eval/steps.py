"""The evaluation stage as Marin steps: the world-model probe's scores of one model."""

from __future__ import annotations

import os

from terminalworld.pipeline import artifacts
from terminalworld.pipeline.step import HeldoutSet, Model, Scores, joined, local_copy, model_input, step


def score_fn(
    *,
    model: str | list,
    heldout: str | list,
    out: str,
    file: str,
    mode: str,
    model_name: str,
    chat_template_from: str | list | None = None,
    device: str = "cpu",
) -> None:
    """Env-token PPL of `model` on the held-out rows into `{out}/{file}`."""
    from terminalworld.eval.scoring import ScoreConfig, score

    with local_copy(out) as local:  # the scores file resumes from what a preempted run put back
        score(
            ScoreConfig(
                model_path=joined(model),
                heldout=joined(heldout),
                out=os.path.join(local, file),
                mode=mode,
                model_name=model_name,
                chat_template_from=joined(chat_template_from) if chat_template_from else None,
                device=device,
            )
        )


def scores(
    *,
    model: Model,
    model_name: str,
    heldout: HeldoutSet,
    mode: str = "agent",
    chat_template_from: Model | None = None,
    device: str = "cpu",
    resources=None,
    version: str,
) -> Scores:
    """The probe's scores of `model` (rendered with `chat_template_from`'s template if given)."""
    file = artifacts.scores_file(model_name)
    return Scores(
        step(
            artifacts.scores(model_name),
            score_fn,
            version=version,
            resources=resources,
            model=model_input(model),
            heldout=heldout.rows,
            file=file,
            mode=mode,
            model_name=model_name,
            chat_template_from=model_input(chat_template_from),
            device=device,
        ),
        file=file,
        model_name=model_name,
    )
