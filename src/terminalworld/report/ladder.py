"""The agent grade on the task ladder: per level, each checkpoint's pass@1..k with intervals over
tasks and its steps of a fix, and the paired per-task tests between the assistant-only and
full-transcript arms at each scale (`agent.compare`), from the agent summaries of each level.
"""

from __future__ import annotations

from typing import Any

from terminalworld.agent.compare import paired, pass_at_k_ci
from terminalworld.agent.process import LOCALISATION
from terminalworld.report.tables import Block, Heading, Table, fixed

PAIRED_ARMS = ("assistant", "full")  # the write-up's comparison: (a) against (b)


def _counts(summary: dict[str, Any]) -> dict[str, tuple[int, int]]:
    return {t: (int(n), int(c)) for t, (n, c) in (summary.get("per_task") or {}).items()}


def ladder_table(levels: dict[str, dict[str, dict[str, Any]]], scales: list[str]) -> dict[str, Any]:
    """{level: {"models": [...], "paired": [...]}} from {level: {model name: agent summary}}: per
    model, pass@k with its interval, solved / scored, the valid-reply share and the localisation
    steps' rates; per scale where both arms were graded, the paired tests of (a) against (b)."""
    out = {}
    for level, summaries in levels.items():
        models = []
        for name, s in summaries.items():
            steps = s.get("process") or {}
            models.append(
                {
                    "name": name,
                    "pass_at_k": pass_at_k_ci(_counts(s)),
                    "solved": s["solved_trials"],
                    "scored": s["scored_trials"],
                    "valid_reply_share": s.get("valid_action_rate"),
                    **{k: (steps.get(k) or {}).get("rate") for k in LOCALISATION},
                }
            )
        tests = []
        for scale in scales:
            a, b = (summaries.get(f"{arm}-{scale}") for arm in PAIRED_ARMS)
            if a is not None and b is not None and a.get("per_task") and b.get("per_task"):
                tests.append({"scale": scale, **paired(_counts(a), _counts(b))})
        out[level] = {"models": models, "paired": tests}
    return out


def ladder_blocks(table: dict[str, Any]) -> list[Block]:
    """The ladder's tables: per level, pass@1 with its interval and the steps, then the paired tests."""
    if not table:
        return []
    blocks: list[Block] = [
        Heading("Agent grade on the task ladder"),
        "Per level: pass@1 [95 % bootstrap interval over tasks], solved / scored, and the share of trials\n"
        "reaching each localisation step (— where the level's instruction gives it away).",
    ]
    for level, t in table.items():
        rows = []
        for m in t["models"]:
            p1 = m["pass_at_k"].get("1")
            shown = "—" if p1 is None else f"{p1['value']:.3f} [{p1['ci95'][0]:.3f}, {p1['ci95'][1]:.3f}]"
            steps = [fixed(m[k], 3) for k in LOCALISATION]
            rows.append([m["name"], shown, f"{m['solved']} / {m['scored']}", fixed(m["valid_reply_share"], 3), *steps])
        columns = ["checkpoint", "pass@1", "solved / scored", "valid replies", "file found", "function shown"]
        blocks += [Heading(f"Level: {level}", 1), Table([*columns, "line shown"], rows, "lrrrrrr")]
        if t["paired"]:
            rows = [
                [
                    *(p["scale"], p["tasks"], fixed(p["mean_difference"], 3), p["a_higher"], p["b_higher"]),
                    *(f"{p['sign_p']:.3g}", f"{p['permutation_p']:.3g}"),
                ]
                for p in t["paired"]
            ]
            columns = ["scale", "tasks", "mean difference", "a higher", "b higher", "sign p", "permutation p"]
            blocks += [
                "Paired per task, assistant-only (a) against full-transcript (b):",
                Table(columns, rows, "lrrrrrr"),
            ]
    return blocks
