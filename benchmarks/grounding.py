"""The grounding measurements: SmolLM2-135M-Instruct zero-shot as a simulator (sim framing), each
grounding mode on the same rows, and the hybrid router's exactly served share.

Data, made with the project's own commands (sizes as measured; CPU-sized):

    terminalworld corpus record --out DATA/corpus --trajectories 40 --shard-size 40 --max-output-chars 1000
    terminalworld heldout --corpus 'DATA/corpus/*.jsonl.gz' --out DATA/heldout.jsonl \
        --n 24 --context-turns 3 --seed 42        # zero-shot (no --train); the demo's shape: 3 context turns
    terminalworld probes make --out DATA/probes.jsonl --n 20 --max-output-chars 1000
    terminalworld probes make --out DATA/probes10.jsonl --n 10 --max-output-chars 1000   # one per family
    terminalworld tasks make --out DATA/tasks --n 2 --seed 7

Scores and fidelity, per MODE in none, retrieved, replayed, hybrid (a 1,024-token block):

    terminalworld score --model-path smollm2 --heldout DATA/probes.jsonl --out RESULTS/score-probes-MODE.jsonl \
        --mode sim --grounding MODE --grounding-budget 1024 --grounding-output-chars 1000
    terminalworld score --model-path smollm2 --heldout DATA/heldout.jsonl --out RESULTS/score-heldout-MODE.jsonl \
        --mode sim --grounding MODE --grounding-budget 1024 --grounding-output-chars 1000
    terminalworld sim-eval --model smollm2 --probes DATA/probes10.jsonl --out RESULTS/sim-probes10-MODE.jsonl \
        --mode sim --max-new-tokens 48 --grounding MODE --grounding-budget 1024 --grounding-output-chars 1000

The closed loop (tier 3), per MODE in none and hybrid:

    terminalworld sim-eval --model smollm2 --tasks DATA/tasks --agent solver --out RESULTS/loop-MODE.jsonl \
        --mode sim --max-new-tokens 16 --grounding MODE --grounding-budget 1024 --grounding-output-chars 1000

Then this file writes the page (`docs/grounding.md`, its plot) and `RESULTS/grounding.json`:

    uv run python benchmarks/grounding.py --data DATA --results RESULTS
"""

import argparse
import json
import os
import sys
from pathlib import Path

from terminalworld.core.assets import load_tokenizer
from terminalworld.core.formats import load_trajectories
from terminalworld.core.heldout import heldout_trajectory, read_heldout
from terminalworld.core.records import write_json
from terminalworld.report import grounding as report

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the fixtures' one path: tests.paths
from tests.paths import FIXTURES  # noqa: E402

REAL = {
    "SWE-ZERO 12M (3 rows)": FIXTURES / "adp_swe-zero-12m" / "sample_raw.json",
    "mini-swe-agent (1 row)": FIXTURES / "mini-swe-agent_b6984ac5" / "github_issue.traj.json",
    "mini-coder (1 row)": FIXTURES / "adp-fork_mini-coder" / "sample_raw.json",
}


def _modes(results: Path, pattern: str) -> dict[str, list]:
    found = {m: results / pattern.format(mode=m) for m in report.MODES}
    return {m: report.read_rows(str(p)) for m, p in found.items() if p.exists()}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--results", required=True)
    p.add_argument("--docs", default=str(HERE.parent / "docs"))
    a = p.parse_args()
    data, results = Path(a.data), Path(a.results)
    tok = load_tokenizer("smollm2")
    count = lambda text: len(tok(text, add_special_tokens=False)["input_ids"])  # noqa: E731
    shares = {
        "held-out rows (24, every observation)": report.route_share(
            [heldout_trajectory(r) for r in read_heldout(str(data / "heldout.jsonl"))], count
        ),
        "probes (20, every observation)": report.route_share(
            [heldout_trajectory(r) for r in read_heldout(str(data / "probes.jsonl"))], count
        ),
    }
    shares |= {name: report.route_share(load_trajectories(str(path)), count) for name, path in REAL.items()}
    ppl = {
        name: report.ppl_by_bucket(rows)
        for name, rows in (
            ("probes", _modes(results, "score-probes-{mode}.jsonl")),
            ("held-out (8)", _modes(results, "score-heldout8-{mode}.jsonl")),
            ("held-out (24)", _modes(results, "score-heldout-{mode}.jsonl")),
        )
        if rows
    }
    fidelity = report.fidelity_by_family(_modes(results, "sim-probes10-{mode}.jsonl"))
    write_json(str(results / "grounding.json"), {"route_share": shares, "ppl": ppl, "fidelity": fidelity})
    os.makedirs(a.docs, exist_ok=True)
    plot = report.ppl_plot(ppl["probes"], a.docs, "grounding-ppl.png", "SmolLM2-135M zero-shot, 20 probes, sim framing")
    lines = [
        "# Grounding",
        "",
        "A simulator's context can hold the repository's state (`--grounding`, shared by `score`, `sim-eval`,",
        "`render` and `agent-eval --environment simulated`). `none` is the behaviour before grounding;",
        "`retrieved` puts the content the command is about, read from the repository as the episode began, in",
        "a grounding block before the command; `replayed` reads it after replaying the session's commands in",
        "the sandbox (the upper bound of state tracking); `hybrid` serves read, navigation and edit commands",
        "exactly from a shadow sandbox and generates the rest. The block is owned by nobody: never trained,",
        "never scored, so every mode scores the same target tokens.",
        "",
        "## Env PPL by target length",
        "",
        "SmolLM2-135M-Instruct zero-shot, sim framing, 1,024-token block. Cells: token-weighted PPL (rows",
        "scored). Hybrid rows the shadow served exactly are not scored: their output is the real one.",
        "",
    ]
    for name, table in ppl.items():
        lines += [f"### {name}", "", report.ppl_table(table), ""]
    lines += [f"![PPL by length bucket per mode]({Path(plot).name})", ""]
    if fidelity:
        lines += [
            "## Free-running fidelity per probe family (tier 2)",
            "",
            "One probe per family, greedy, 48 new tokens at most. Cells: similarity (exact-match rate).",
            "",
            report.fidelity_table(fidelity),
            "",
        ]
    loops = {m: report.read_summary(str(results / f"loop-{m}.jsonl")) for m in report.MODES}
    loops = {m: x for m, x in loops.items() if x}
    if loops:
        lines += [
            "## The closed loop (tier 3)",
            "",
            "The solver's script on generated tasks, SmolLM2 answering what the shadow does not, 16 new tokens.",
            "",
            "| grounding | episodes | turns | served exactly (tokens) | first divergence | outcome agreement | sim-to-real gap |",
            "|---|---|---|---|---|---|---|",
        ]
        for m, x in loops.items():
            share = x.get("exact_token_share")
            lines.append(
                f"| {m} | {x['episodes']} | {x['turns']} | {'–' if share is None else f'{share:.1%}'} | "
                f"{x['first_divergence']} | {x['outcome_agreement']:.0%} | {x['sim_to_real_gap']:+.2f} |"
            )
        lines.append("")
    lines += [
        "## What is left to learn",
        "",
        "The share of observation tokens whose command the hybrid router sends to the shadow",
        "(SmolLM2 tokens of every observation):",
        "",
        "| rows | observations | tokens | served exactly |",
        "|---|---|---|---|",
    ]
    for name, s in shares.items():
        lines.append(f"| {name} | {s['observations']} | {s['tokens']} | {s['exact_token_share']:.1%} |")
    lines.append("")
    Path(a.docs, "grounding.md").write_text("\n".join(lines))
    print(json.dumps({"route_share": {k: v["exact_token_share"] for k, v in shares.items()}, "ppl": ppl}, indent=1))


if __name__ == "__main__":
    main()
