"""The report stage as Marin steps: the world-model probe's comparison of scored models, the
pilot's scale-axis report, ECHO's miniature report, and the docs site built from report artifacts.
Each step runs the stage's function on its config, built from the artifacts it reads."""

from __future__ import annotations

from terminalworld.pipeline import artifacts
from terminalworld.pipeline.step import AgentGrade, EchoArm, Report, Scores, SimGrade, Site, Tokenized, config_step
from terminalworld.report.echo import EchoReportConfig, write_echo_report
from terminalworld.report.grades import ReportConfig, write_report
from terminalworld.report.pilot import PilotReportConfig, write_pilot_report
from terminalworld.report.publish import SiteConfig, build_site


def _sims(ctx, sims: list[SimGrade]) -> dict[str, dict[int, str]]:
    """Each model's simulator grades, tier → rows file."""
    by_model: dict[str, dict[int, str]] = {}
    for g in sims:
        by_model.setdefault(g.model_name, {})[g.tier] = g.at(ctx, artifacts.SIM_ROWS)
    return by_model


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

    def config(ctx) -> ReportConfig:
        return ReportConfig(
            scores={s.model_name: s.at(ctx, s.file) for s in scores},
            out=ctx.output_path,
            base=base,
            reference=reference,
            grades={g.model_name: g.at(ctx, artifacts.AGENT_SUMMARY) for g in grades},
            sims=_sims(ctx, sims),
        )

    deps = [*scores, *grades, *sims]
    return Report(config_step(artifacts.REPORT, write_report, config, version=version, deps=deps))


def echo_report(*, arms: list[EchoArm], version: str) -> Report:
    """ECHO's miniature: the GRPO, ECHO and env-only arms side by side."""

    def config(ctx) -> EchoReportConfig:
        return EchoReportConfig(arms={a.arm: a.at(ctx, artifacts.ECHO_ARM) for a in arms}, out=ctx.output_path)

    return Report(config_step(artifacts.ECHO_REPORT, write_echo_report, config, version=version, deps=arms))


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

    def config(ctx) -> SiteConfig:
        return SiteConfig(
            reports=[r.at(ctx) for r in reports],
            out=ctx.output_path,
            repo_url=repo_url,
            release=release,
            publish={**publish, "version": version} if publish else None,
        )

    return Site(config_step(artifacts.DOCS_SITE, build_site, config, version=version, deps=reports))


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
    training: dict[str, Tokenized] | None = None,
    scale_sequences: dict[str, int] | None = None,
    seeds: list[str] | None = None,
    scale_names: list[str] | None = None,
    control: str | None = None,
    walltimes: bool = False,
    version: str,
) -> Report:
    """The pilot's report: every scored model against `base`, the scale axis of `arms` × `scales`
    (checkpoints named `{arm}-{scale}`), the agent grades with their steps of a fix (and on the
    other levels of the task ladder, `ladder`), the simulator grades, and the departures from the
    write-up in plain words; with `training` (arm → tokenized artifact) and `scale_sequences`
    (scale → packed sequences trained), what each scale trained on; with `seeds` (checkpoints
    `{arm}-{scale}-{seed}` for `scale_names`) and the base `control`, the report over seeds; with
    `walltimes`, the run's wall time per stage from its steps' timed attempts."""
    ladder, training = ladder or {}, training or {}

    def config(ctx) -> PilotReportConfig:
        return PilotReportConfig(
            scores={s.model_name: s.at(ctx, s.file) for s in scores},
            out=ctx.output_path,
            base=base,
            arms=list(arms),
            scales=list(scales),
            grades={g.model_name: g.at(ctx, artifacts.AGENT_SUMMARY) for g in grades},
            sims=_sims(ctx, sims),
            departures=list(departures),
            ladder={lv: {g.model_name: g.at(ctx, artifacts.AGENT_SUMMARY) for g in gs} for lv, gs in ladder.items()},
            training={arm: t.at(ctx) for arm, t in training.items()},
            scale_sequences=dict(scale_sequences or {}),
            seeds=list(seeds or []),
            scale_names=list(scale_names or []),
            control=control,
            walltimes=walltimes,
        )

    deps = [*scores, *grades, *sims, *(g for gs in ladder.values() for g in gs), *training.values()]
    return Report(config_step(artifacts.PILOT_REPORT, write_pilot_report, config, version=version, deps=deps))
