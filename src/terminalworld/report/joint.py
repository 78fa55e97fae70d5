"""The two grades side by side: each checkpoint as an agent (pass@1) and as a world model (env-token
PPL), and the research's "opposite directions" table: at each scale, is the better agent of the
assistant-only and full-transcript arms also the worse world model?"""

from __future__ import annotations

import math
from typing import Any

from terminalworld.agent.compare import paired, pass_at_k_ci
from terminalworld.report.figures import log_axis, model_colors, save_plot
from terminalworld.report.tables import Block, Heading, Table, fixed, pct

NO_SOLVES = (
    "No checkpoint solved any task, so pass@1 cannot rank these models as agents: at this size they do "
    "not produce working fixes (the valid-action column shows how often a reply even held exactly one "
    "bash block). The grade itself is sound: the oracle scores 1.0 and a do-nothing agent 0.0 on the "
    "same tasks (tests/agent)."
)


def joint_table(checkpoints: list[dict[str, Any]], grades: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Rows (checkpoint, pass@1 ± stderr, solved/scored, median and token-weighted env PPL) for
    every checkpoint of `checkpoints` (a `metrics.compare` table's) that has an agent grade, and the
    opposite-directions rows for every scale where both arms have both grades."""
    rows = []
    for c in checkpoints:
        g = grades.get(c["name"])
        if g is None:
            continue
        rows.append(
            {
                "name": c["name"],
                "pass_at_1": g["pass_at_1"],
                "pass_at_1_stderr": g["pass_at_1_stderr"],
                "solved": g["solved_trials"],
                "scored": g["scored_trials"],
                "valid_action_rate": g.get("valid_action_rate"),
                "pass_at_k_ci95": pass_at_k_ci(_counts(g)) if g.get("per_task") else None,
                "per_task": _counts(g),
                "median_ppl": c["median_ppl"],
                "token_weighted_ppl": c["token_weighted_ppl"],
            }
        )
    by_name = {r["name"]: r for r in rows}
    opposite = []
    for name, a in by_name.items():
        if not name.startswith("assistant"):
            continue
        scale = name.removeprefix("assistant").lstrip("-")
        b = by_name.get(f"full-{scale}" if scale else "full")
        if b is None or a["pass_at_1"] is None or b["pass_at_1"] is None:
            continue
        better_agent = (
            "assistant" if a["pass_at_1"] > b["pass_at_1"] else "full" if b["pass_at_1"] > a["pass_at_1"] else None
        )
        better_world_model = "assistant" if a["median_ppl"] < b["median_ppl"] else "full"
        # Per task, the same tasks and attempts: is the better agent better beyond chance?
        test = paired(a["per_task"], b["per_task"]) if a["per_task"] and b["per_task"] else None
        opposite.append(
            {
                "scale": scale or "—",
                "pass_at_1_assistant": a["pass_at_1"],
                "pass_at_1_full": b["pass_at_1"],
                "median_ppl_assistant": a["median_ppl"],
                "median_ppl_full": b["median_ppl"],
                "better_agent": better_agent,
                "better_world_model": better_world_model,
                "opposite": better_agent is not None and better_agent != better_world_model,
                "paired": test,
            }
        )
    solved_any = any((r["solved"] or 0) > 0 for r in rows)
    for r in rows:
        r.pop("per_task")
    return {"rows": rows, "opposite_directions": opposite, "note": None if solved_any or not rows else NO_SOLVES}


def _counts(grade: dict[str, Any]) -> dict[str, tuple[int, int]]:
    return {t: (int(n), int(c)) for t, (n, c) in (grade.get("per_task") or {}).items()}


def _pm(x: float | None, e: float | None) -> str:
    return "—" if x is None else f"{x:.3f}" + (f" ± {e:.3f}" if e is not None else "")


def joint_blocks(joint: dict[str, Any]) -> list[Block]:
    """The joint table and the opposite-directions table, with the note if any."""
    rows = [
        [
            r["name"],
            _pm(r["pass_at_1"], r["pass_at_1_stderr"]),
            f"{r['solved']} / {r['scored']}",
            pct(r["valid_action_rate"]),
            fixed(r["median_ppl"]),
            fixed(r["token_weighted_ppl"]),
        ]
        for r in joint["rows"]
    ]
    columns = ["checkpoint", "pass@1 ± stderr", "solved / scored", "valid actions", "median env PPL"]
    blocks: list[Block] = [
        Heading("Agent and world model"),
        Table([*columns, "token-weighted env PPL"], rows, "lrrrrr"),
    ]
    if joint["opposite_directions"]:
        rows = []
        for o in joint["opposite_directions"]:
            t = o.get("paired")
            p = "—" if t is None else f"{t['sign_p']:.3g}, {t['permutation_p']:.3g} ({t['tasks']} tasks)"
            rows.append(
                [
                    o["scale"],
                    fixed(o["pass_at_1_assistant"], 3),
                    fixed(o["pass_at_1_full"], 3),
                    fixed(o["median_ppl_assistant"]),
                    fixed(o["median_ppl_full"]),
                    o["better_agent"] or "tie",
                    p,
                    o["better_world_model"],
                    "yes" if o["opposite"] else "no",
                ]
            )
        columns = ["scale", "pass@1 assistant", "pass@1 full", "median PPL assistant", "median PPL full"]
        columns += ["better agent", "paired p (sign, permutation; per task)", "better world model", "opposite"]
        blocks.append("Opposite directions: the better agent (pass@1) against the better world model (median env PPL).")
        blocks.append(Table(columns, rows, "lrrrrlrll"))
    if joint["note"]:
        blocks.append(f"*{joint['note']}*")
    return blocks


def joint_figure(joint: dict[str, Any]):
    """Scatter of pass@1 (with its stderr) against median env PPL, one point per checkpoint, named in
    a legend in the models' colours; None when no checkpoint has both grades."""
    rows = [
        r for r in joint["rows"] if r["pass_at_1"] is not None and r["median_ppl"] and math.isfinite(r["median_ppl"])
    ]
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = model_colors([r["name"] for r in joint["rows"]])
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for r in rows:
        x, y, err = r["median_ppl"], r["pass_at_1"], r["pass_at_1_stderr"] or 0
        ax.errorbar(x, y, yerr=err, fmt="o", capsize=3, color=colors[r["name"]], label=r["name"])
    # A legend, not a label beside each point: checkpoints often share a pass@1 (all 0 when none
    # solves a task) and lie close in PPL, and labels beside such points run together ("userfull").
    # Outside the axes it never hides a point either.
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0, fontsize=8, title="model")
    log_axis(ax.xaxis)
    ax.set_xlabel("median env-token PPL (lower: better world model)")
    ax.set_ylabel("pass@1 (higher: better agent)")
    ax.set_title("Agent against world model")
    return fig


def joint_plot(joint: dict[str, Any], out: str) -> str | None:
    """`joint_figure` written as `out/agent_vs_world_model.png`; returns its path, or None when there
    is nothing to plot."""
    fig = joint_figure(joint)
    return None if fig is None else save_plot(fig, out, "agent_vs_world_model.png")
