"""The agent grade on the task ladder: per level, each checkpoint's pass@1..k with intervals over
tasks and its steps of a fix, and the paired per-task tests between the assistant-only and
full-transcript arms at each scale (`agent.compare`), from the agent summaries of each level.
"""

from __future__ import annotations

from typing import Any

from terminalworld.agent.compare import paired, pass_at_k_ci
from terminalworld.agent.process import LOCALISATION

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


def _f(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def ladder_markdown(table: dict[str, Any]) -> str:
    """The ladder's tables: per level, pass@1 with its interval and the steps, then the paired tests."""
    if not table:
        return ""
    lines = ["## Agent grade on the task ladder", ""]
    lines += ["Per level: pass@1 [95 % bootstrap interval over tasks], solved / scored, and the share of trials"]
    lines += ["reaching each localisation step (— where the level's instruction gives it away).", ""]
    for level, t in table.items():
        lines += [f"### Level: {level}", ""]
        lines += [
            "| checkpoint | pass@1 | solved / scored | valid replies | file found | function shown | line shown |"
        ]
        lines += ["|---|---:|---:|---:|---:|---:|---:|"]
        for m in t["models"]:
            p1 = m["pass_at_k"].get("1")
            cell = "—" if p1 is None else f"{p1['value']:.3f} [{p1['ci95'][0]:.3f}, {p1['ci95'][1]:.3f}]"
            steps = " | ".join(_f(m[k]) for k in LOCALISATION)
            lines.append(
                f"| {m['name']} | {cell} | {m['solved']} / {m['scored']} | {_f(m['valid_reply_share'])} | {steps} |"
            )
        if t["paired"]:
            lines += ["", "Paired per task, assistant-only (a) against full-transcript (b):", ""]
            lines += ["| scale | tasks | mean difference | a higher | b higher | sign p | permutation p |"]
            lines += ["|---|---:|---:|---:|---:|---:|---:|"]
            for p in t["paired"]:
                lines.append(
                    f"| {p['scale']} | {p['tasks']} | {_f(p['mean_difference'])} | {p['a_higher']} | {p['b_higher']} | "
                    f"{p['sign_p']:.3g} | {p['permutation_p']:.3g} |"
                )
        lines.append("")
    return "\n".join(lines)
