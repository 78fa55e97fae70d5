"""The evaluation stage as Marin steps: the world-model probe's scores of one model, and the held-out
set with every checkpoint's scores as Hugging Face datasets."""

from __future__ import annotations

import os

from terminalworld.pipeline import artifacts
from terminalworld.pipeline.step import (
    Built,
    HeldoutSet,
    Model,
    Scores,
    inside,
    joined,
    local_copy,
    model_input,
    step,
)


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
    all_depths: bool = False,
    window: int | None = None,
    precision: str = "float32",
) -> None:
    """Env-token PPL of `model` on the held-out rows into `{out}/{file}` (only rows within `window`)."""
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
                all_depths=all_depths,
                window=window,
                dtype=precision,
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
    # all_depths is an input only when set, so scores made before it existed keep their identity.
    more = {"all_depths": True} if all_depths else {}
    more |= {"window": window} if window is not None else {}  # likewise: scores made before it keep theirs
    # Likewise the precision (`core.precision`): float32, what every earlier score computed in, is left out.
    more |= {"precision": precision} if precision != "float32" else {}
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
            **more,
        ),
        file=file,
        model_name=model_name,
    )


def eval_sets_fn(
    *,
    heldout: str | list,
    scores: dict[str, list],
    out: str,
    hub_repos: dict[str, str] | None,
    push: bool,
    token_env: str,
) -> None:
    """The held-out set and each checkpoint's scores as datasets under `out` (pushed with `push`)."""
    from terminalworld.eval.hf_export import export_eval_sets

    with local_copy(out) as local:  # save_to_disk writes a local folder; the copy goes back to `out`
        export_eval_sets(
            heldout=joined(heldout),
            scores={name: joined(path) for name, path in scores.items()},
            out=local,
            hub_repos=hub_repos,
            push=push,
            token_env=token_env,
        )


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
    return Built(
        step(
            artifacts.EVAL_SETS,
            eval_sets_fn,
            version=version,
            heldout=heldout.rows,
            scores={s.model_name: inside(s, s.file) for s in scores},
            hub_repos=hub_repos,
            push=push,
            token_env=token_env,
        )
    )
