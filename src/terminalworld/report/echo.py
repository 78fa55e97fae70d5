"""ECHO's miniature report: the three arms side by side, from their `arm.json` files.

Per arm: reward per step, the share of rollout groups with zero reward variance (no GRPO signal),
seconds per step split into generation, sandbox and forward/backward, and the env-token
cross-entropy of the fixed held-out trajectories before and after, as paired per-trajectory
differences with 95 % bootstrap intervals; each λ > 0 arm is also paired against GRPO's final
weights. Departures from the paper's recipe (`EchoRecipe`'s defaults) are listed; notes say in plain
words what the numbers cannot carry.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from terminalworld.core.records import atomic_output, read_json, write_json
from terminalworld.eval.metrics import bootstrap_ci
from terminalworld.report.figures import save_plot
from terminalworld.report.tables import Block, Heading, Table, to_markdown
from terminalworld.train.echo.miniature import ARMS, EchoRecipe

REPORT_FILE = "echo_report.json"
PLOTS = {
    "reward_per_step.png": "Mean reward per step",
    "zero_variance_groups.png": "Share of rollout groups with zero reward variance (no GRPO signal)",
    "env_ce.png": "Held-out env-token cross-entropy before and after, with 95% bootstrap intervals",
    "step_seconds.png": "Seconds per step: generation, sandbox and forward/backward",
}
_PHASES = ("generation", "sandbox", "forward_backward")


def _paired(diff: np.ndarray) -> dict[str, Any]:
    """Mean of paired differences with its 95 % bootstrap interval (NaN pairs left out)."""
    d = diff[~np.isnan(diff)]
    if not len(d):
        return {"mean": None, "ci95": None, "n": 0}
    return {"mean": float(d.mean()), "ci95": list(bootstrap_ci({"d": d}, lambda d: d.mean())), "n": len(d)}


def departures(recipe: dict[str, Any]) -> list[dict[str, Any]]:
    """The recipe fields that differ from the paper's (`EchoRecipe`'s defaults), arm and seed aside."""
    paper = asdict(EchoRecipe(arm="echo"))
    return [
        {"field": f.name, "paper": paper[f.name], "here": recipe[f.name]}
        for f in fields(EchoRecipe)
        if f.name not in ("arm", "seed") and recipe[f.name] != paper[f.name]
    ]


def echo_table(arms: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The report's numbers from each arm's `arm.json` (keyed by arm)."""
    missing = [a for a in ARMS if a not in arms]
    if missing:
        raise ValueError(f"the ECHO report needs every arm; missing {', '.join(missing)}")
    ids = arms["grpo"]["heldout"]["ids"]
    if any(arms[a]["heldout"]["ids"] != ids for a in ARMS):
        raise ValueError("the arms were measured on different held-out trajectories")
    ce = {
        a: {k: np.asarray(arms[a]["heldout"][k], dtype=float) for k in ("env_ce_before", "env_ce_after")} for a in ARMS
    }
    out: dict[str, Any] = {"arms": {}, "heldout_trajectories": len(ids)}
    for a in ARMS:
        steps = arms[a]["steps"]
        before, after = ce[a]["env_ce_before"], ce[a]["env_ce_after"]
        out["arms"][a] = {
            "lam": arms[a]["loss"]["lam"],
            "env_only": arms[a]["loss"]["env_only"],
            "reward_per_step": [s["reward_mean"] for s in steps],
            "zero_variance_groups_per_step": [s["zero_variance_groups"] for s in steps],
            "solved": sum(s["solved"] for s in steps),
            "rollouts": sum(s["rollouts"] for s in steps),
            "valid_action_rate": float(np.mean([s["valid_action_rate"] for s in steps])),
            "env_loss_per_step": [s["env_loss"] for s in steps],
            "seconds_per_step": {p: float(np.mean([s["seconds"][p] for s in steps])) for p in (*_PHASES, "step")},
            "env_ce_before": float(np.nanmean(before)),
            "env_ce_after": float(np.nanmean(after)),
            "env_ce_change": _paired(after - before),
        }
        if a != "grpo":
            out["arms"][a]["env_ce_vs_grpo"] = _paired(after - ce["grpo"]["env_ce_after"])
    out["departures_from_paper"] = departures(arms["grpo"]["recipe"])
    out["notes"] = notes(out)
    return out


def notes(table: dict[str, Any]) -> list[str]:
    """Plain words on what the numbers can and cannot say."""
    arms = table["arms"]
    said = []
    if all(a["solved"] == 0 for a in arms.values()):
        said.append(
            "No rollout of any arm solved a task: every group had zero reward variance, so GRPO had no "
            "signal and the policy term was zero throughout; the GRPO arm's weights did not move, and what "
            "the ECHO and env-only arms learned came from L_Env alone. This policy is too weak for the "
            "reward curves to compare the arms as agents."
        )
    for a in ("echo", "env-only"):
        vs = arms[a]["env_ce_vs_grpo"]
        if vs["ci95"] is None:
            continue
        lo, hi = vs["ci95"]
        if lo <= 0 <= hi:
            said.append(
                f"The {a} arm's held-out env CE is not distinguishable from the GRPO arm's at this size "
                f"(paired difference {vs['mean']:+.4f} nats, 95% CI [{lo:+.4f}, {hi:+.4f}], n={vs['n']})."
            )
        else:
            word = "lower" if hi < 0 else "higher"
            said.append(
                f"The {a} arm ends with {word} held-out env CE than the GRPO arm: paired difference "
                f"{vs['mean']:+.4f} nats, 95% CI [{lo:+.4f}, {hi:+.4f}] over {vs['n']} trajectories."
            )
    return said


def _ci(c: dict[str, Any]) -> str:
    if c["mean"] is None:
        return "—"
    return f"{c['mean']:+.4f} [{c['ci95'][0]:+.4f}, {c['ci95'][1]:+.4f}]"


def _in_order(arms: dict[str, Any]) -> list[tuple[str, Any]]:
    """The arms in `ARMS` order (a report read back from JSON has its keys sorted)."""
    return [(a, arms[a]) for a in ARMS if a in arms]


TITLE = "ECHO miniature: GRPO, ECHO and env-only"


def echo_blocks(table: dict[str, Any]) -> list[Block]:
    """The report's tables: the arms, the seconds per phase, the departures and the notes."""
    rows = []
    for name, a in _in_order(table["arms"]):
        zv = float(np.mean(a["zero_variance_groups_per_step"]))
        vs = _ci(a["env_ce_vs_grpo"]) if "env_ce_vs_grpo" in a else "—"
        lam = f"{a['lam']:g}" + (" (alone)" if a["env_only"] else "")
        rows.append(
            [
                *(name, lam, f"{a['solved']} / {a['rollouts']}", f"{zv:.0%}", f"{a['valid_action_rate']:.0%}"),
                *(f"{a['env_ce_before']:.4f}", f"{a['env_ce_after']:.4f}", _ci(a["env_ce_change"]), vs),
                f"{a['seconds_per_step']['step']:.1f}",
            ]
        )
    columns = ["arm", "λ", "solved / rollouts", "zero-variance groups", "valid actions", "env CE before", "after"]
    blocks: list[Block] = [
        f"Held-out env-token cross-entropy (nats per O′ token) on {table['heldout_trajectories']} fixed "
        "trajectories; changes are paired per trajectory, brackets hold 95% bootstrap intervals.",
        Table([*columns, "change", "vs GRPO", "s/step"], rows, "l" + "r" * 9),
        "Seconds per step by phase:",
        Table(
            ["arm", "generation", "sandbox", "forward/backward"],
            [[n, *(f"{a['seconds_per_step'][p]:.2f}" for p in _PHASES)] for n, a in _in_order(table["arms"])],
            "lrrr",
        ),
    ]
    if table["departures_from_paper"]:
        blocks.append("Departures from the paper's recipe, the same for every arm:")
        blocks.append(
            "\n".join(
                f"- `{d['field']}`: {d['paper']} in the paper, {d['here']} here" for d in table["departures_from_paper"]
            )
        )
    return blocks + [f"*{n}*" for n in table["notes"]]


def echo_plots(table: dict[str, Any], out: str) -> list[str]:
    """The report's four plots, written into `out`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    arms = dict(_in_order(table["arms"]))
    written = []
    for key, name, label in (
        ("reward_per_step", "reward_per_step.png", "mean reward"),
        ("zero_variance_groups_per_step", "zero_variance_groups.png", "share of groups"),
    ):
        fig, ax = plt.subplots(figsize=(5.5, 3.4))
        for i, (arm, a) in enumerate(arms.items()):
            ax.plot(range(len(a[key])), a[key], marker="o", label=arm, alpha=0.8, linestyle=("-", "--", ":")[i % 3])
        ax.set(xlabel="step", ylabel=label, ylim=(-0.05, 1.05), title=PLOTS[name])
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole
        ax.title.set_fontsize(9)
        ax.legend(fontsize=8)
        written.append(save_plot(fig, out, name))
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    x = np.arange(len(arms))
    for k, (when, offset) in enumerate((("before", -0.18), ("after", 0.18))):
        means = [a[f"env_ce_{when}"] for a in arms.values()]
        ax.bar(x + offset, means, width=0.36, label=when, color=("#9ab", "#357")[k])
    lows = [a["env_ce_after"] for a in arms.values()] + [a["env_ce_before"] for a in arms.values()]
    highs = list(lows)
    for i, a in enumerate(arms.values()):
        c = a["env_ce_change"]
        if c["ci95"]:
            lo, hi = (a["env_ce_before"] + v for v in c["ci95"])
            lows, highs = [*lows, lo], [*highs, hi]
            ax.errorbar(
                i + 0.18, a["env_ce_after"], yerr=[[a["env_ce_after"] - lo], [hi - a["env_ce_after"]]], color="k"
            )
    # The whole interval in view, and room above the bars for the legend.
    span = max(highs) - min(lows) or 1.0
    ax.set_ylim(min(lows) - 0.1 * span, max(highs) + 0.35 * span)
    ax.set_xticks(x, list(arms))
    ax.set(ylabel="nats per O′ token", title=PLOTS["env_ce.png"])
    ax.title.set_fontsize(9)
    ax.legend(fontsize=8)
    written.append(save_plot(fig, out, "env_ce.png"))
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    bottom = np.zeros(len(arms))
    for phase in _PHASES:
        v = np.array([a["seconds_per_step"][phase] for a in arms.values()])
        ax.bar(x, v, bottom=bottom, label=phase.replace("_", "/"))
        bottom += v
    ax.set_xticks(x, list(arms))
    ax.set(ylabel="seconds per step", title=PLOTS["step_seconds.png"], ylim=(0, max(bottom) * 1.4 or 1))
    ax.title.set_fontsize(9)
    ax.legend(fontsize=8, ncols=3, loc="upper center")  # above the bars, never over one
    written.append(save_plot(fig, out, "step_seconds.png"))
    return written


@dataclass(frozen=True)
class EchoReportConfig:
    """Each arm's `arm.json`, by arm, and the output folder."""

    arms: dict[str, str]
    out: str


def write_echo_report(cfg: EchoReportConfig) -> dict[str, Any]:
    """`echo_report.json`, `echo_report.md` and the plots in `cfg.out`, from each arm's `arm.json`."""
    arm_files, out = cfg.arms, cfg.out
    os.makedirs(out, exist_ok=True)
    table = echo_table({a: read_json(p) for a, p in arm_files.items()})
    table["plots"] = [os.path.basename(p) for p in echo_plots(table, out)]
    write_json(os.path.join(out, REPORT_FILE), table)
    with atomic_output(os.path.join(out, "echo_report.md"), "w") as f:
        f.write(to_markdown([Heading(TITLE), *echo_blocks(table)]))
    return table
