"""The report stage as Marin steps: the world-model probe's comparison of scored models, the
pilot's scale-axis report, ECHO's miniature report, and the docs site built from report artifacts."""

from __future__ import annotations

from terminalworld.core.terminal import for_terminal
from terminalworld.pipeline import artifacts
from terminalworld.pipeline.step import (
    AgentGrade,
    EchoArm,
    Report,
    Scores,
    SimGrade,
    Site,
    Tokenized,
    inside,
    joined,
    step,
)


def report_fn(
    *,
    scores: dict[str, str | list],
    out: str,
    base: str,
    reference: str | None,
    grades: dict[str, str | list],
    sims: dict[str, dict[str, str | list]] | None = None,
) -> None:
    """The probe comparison and `report.json` (`report.grades.write_report`)."""
    from terminalworld.report.grades import write_report

    table = write_report(
        scores={name: joined(path) for name, path in scores.items()},
        out=out,
        base=base,
        reference=reference,
        grades={name: joined(path) for name, path in grades.items()},
        sims={name: {int(t): joined(p) for t, p in tiers.items()} for name, tiers in (sims or {}).items()},
    )
    print(for_terminal(table["markdown"]))


def report(
    *,
    scores: list[Scores],
    base: str,
    reference: str | None,
    grades: list[AgentGrade] = (),
    sims: list[SimGrade] = (),
    version: str,
) -> Report:
    """Compare every scored model against `base` (and count degradations against `reference`), with
    the agent grades of `grades` and the simulator grades of `sims` beside the world-model scores."""
    by_model: dict[str, dict[str, list]] = {}
    for g in sims:
        by_model.setdefault(g.model_name, {})[str(g.tier)] = g.file
    more = {"sims": by_model} if by_model else {}  # reports made before simulator grades keep their identity
    return Report(
        step(
            artifacts.REPORT,
            report_fn,
            version=version,
            scores={s.model_name: inside(s, s.file) for s in scores},
            base=base,
            reference=reference,
            grades={g.model_name: g.summary for g in grades},
            **more,
        )
    )


def echo_report_fn(*, arms: dict[str, list], out: str) -> None:
    """`echo_report.json`, `echo_report.md` and the plots from the arms' `arm.json` files."""
    from terminalworld.report.echo import write_echo_report

    table = write_echo_report({arm: joined(path) for arm, path in arms.items()}, out)
    print(for_terminal("\n".join(table["notes"])))


def echo_report(*, arms: list[EchoArm], version: str) -> Report:
    """ECHO's miniature: the GRPO, ECHO and env-only arms side by side."""
    return Report(step(artifacts.ECHO_REPORT, echo_report_fn, version=version, arms={a.arm: a.file for a in arms}))


def site_fn(
    *, reports: list[str], out: str, repo_url: str | None, release: bool, publish: dict[str, str] | None
) -> None:
    """The docs site of `reports` built into `{out}/site`, and published with `publish`
    (`report.publish.build_site`)."""
    from terminalworld.report.publish import build_site

    build_site(reports=reports, out=out, repo_url=repo_url, release=release, publish=publish)


def docs_site(
    *,
    reports: list[Report],
    repo_url: str | None = None,
    release: bool = False,
    publish: dict[str, str] | None = None,
    version: str,
) -> Site:
    """The docs site built from `reports`; `publish` ({user, slug, title}) also uploads it to Marin's
    public site hosting at this `version` (a calendar version, as `publish_site` requires)."""
    return Site(
        step(
            artifacts.DOCS_SITE,
            site_fn,
            version=version,
            reports=[r.step for r in reports],
            repo_url=repo_url,
            release=release,
            publish={**publish, "version": version} if publish else None,
        )
    )


def pilot_report_fn(
    *,
    scores: dict[str, str | list],
    out: str,
    base: str,
    arms: list[str],
    scales: list[str],
    grades: dict[str, str | list],
    sims: dict[str, dict[str, str | list]],
    departures: list[str],
    ladder: dict[str, dict[str, str | list]] | None = None,
    training: dict[str, str | list] | None = None,
    scale_sequences: dict[str, int] | None = None,
) -> None:
    """The pilot's report and `pilot.json` (`report.pilot.write_pilot_report`), with each arm's
    training coverage (`train.coverage`) when its tokenized artifact is given."""
    from terminalworld.report.pilot import write_pilot_report
    from terminalworld.train.coverage import arm_coverage

    coverage = {arm: arm_coverage(joined(path), scale_sequences or {}) for arm, path in (training or {}).items()}

    text = write_pilot_report(
        scores={name: joined(path) for name, path in scores.items()},
        out=out,
        base=base,
        arms=arms,
        scales=scales,
        grades={name: joined(path) for name, path in grades.items()},
        sims={name: {int(t): joined(p) for t, p in tiers.items()} for name, tiers in sims.items()},
        departures=departures,
        ladder={level: {n: joined(p) for n, p in by_model.items()} for level, by_model in (ladder or {}).items()},
        training=coverage,
    )
    print(for_terminal(text))


def pilot_report(
    *,
    scores: list[Scores],
    base: str,
    arms: list[str],
    scales: list[str],
    grades: list[AgentGrade],
    sims: list[SimGrade],
    departures: list[str],
    ladder: dict[str, list[AgentGrade]] | None = None,
    version: str,
    training: dict[str, Tokenized] | None = None,
    scale_sequences: dict[str, int] | None = None,
) -> Report:
    """The pilot's report: every scored model against `base`, the scale axis of `arms` × `scales`
    (checkpoints named `{arm}-{scale}`), the agent grades with their steps of a fix (and on the
    other levels of the task ladder, `ladder`), the simulator grades, and the departures from the
    write-up in plain words; with `training` (arm → tokenized artifact) and `scale_sequences`
    (scale → packed sequences trained), what each scale trained on."""
    # The ladder is an input only when given, so reports made before it keep their identity.
    more = {"ladder": {lv: {g.model_name: g.summary for g in gs} for lv, gs in ladder.items()}} if ladder else {}
    by_model: dict[str, dict[str, list]] = {}
    for g in sims:
        by_model.setdefault(g.model_name, {})[str(g.tier)] = g.file
    return Report(
        step(
            artifacts.PILOT_REPORT,
            pilot_report_fn,
            version=version,
            scores={s.model_name: inside(s, s.file) for s in scores},
            base=base,
            arms=list(arms),
            scales=list(scales),
            grades={g.model_name: g.summary for g in grades},
            sims=by_model,
            departures=list(departures),
            **more,
            # Inputs only when given, so reports made before them keep their identity.
            **({"training": {a: t.step for a, t in training.items()}} if training else {}),
            **({"scale_sequences": dict(scale_sequences)} if scale_sequences else {}),
        )
    )
