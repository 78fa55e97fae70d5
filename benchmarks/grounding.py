"""The grounding measurements: SmolLM2-135M-Instruct zero-shot as a simulator (sim framing), each
grounding mode on the same rows, and the hybrid router's exactly served share.

Data: the local demo's own held-out rows and probes, as `experiments/local_demo.py --run` writes
them (24 rows of 3 context turns and 20 probes, two per family, 1,000-character outputs, from repos
unseen in its training), and two generated tasks for the closed loop:

    V=2026.12.03   # the demo's version; grounding.json records both files' SHA-256
    cp $MARIN_PREFIX/heldout/sim_ppl_heldout_24/$V/sim_ppl_heldout_24.jsonl DATA/heldout.jsonl
    cp $MARIN_PREFIX/terminalworld/probes/$V/probes.jsonl DATA/probes.jsonl
    terminalworld tasks make --out DATA/tasks --n 2 --seed 7

Scores and fidelity, per MODE in none, retrieved, replayed, hybrid (a 1,024-token block):

    terminalworld score --model-path smollm2 --heldout DATA/probes.jsonl --out RESULTS/score-probes-MODE.jsonl \
        --mode sim --grounding MODE --grounding-budget 1024 --grounding-output-chars 1000
    terminalworld score --model-path smollm2 --heldout DATA/heldout.jsonl --out RESULTS/score-heldout-MODE.jsonl \
        --mode sim --grounding MODE --grounding-budget 1024 --grounding-output-chars 1000

Tiers 1 and 2 on the held-out rows and the probes, per MODE (one torch thread, the fastest on 2
shared cores):

    OMP_NUM_THREADS=1 terminalworld sim-eval --model smollm2 --probes DATA/probes.jsonl \
        --out RESULTS/sim-probes-MODE.jsonl --mode sim --max-new-tokens 48 --grounding MODE \
        --grounding-budget 1024 --grounding-output-chars 1000
    OMP_NUM_THREADS=1 terminalworld sim-eval --model smollm2 --heldout DATA/heldout.jsonl \
        --out RESULTS/sim-heldout-MODE.jsonl --mode sim --max-new-tokens 48 --grounding MODE \
        --grounding-budget 1024 --grounding-output-chars 1000

The closed loop (tier 3), per MODE in none and hybrid:

    terminalworld sim-eval --model smollm2 --tasks DATA/tasks --agent solver --out RESULTS/loop-MODE.jsonl \
        --mode sim --max-new-tokens 16 --grounding MODE --grounding-budget 1024 --grounding-output-chars 1000

The pilot's base and its largest checkpoints of arms (a) and (b) on the same held-out rows, in the
agent framing they were trained in, per MODE in none and retrieved (C: the pilot's checkpoints,
`$MARIN_PREFIX/checkpoints/terminalworld`, version 2026.12.04.1; the base takes their chat template):

    terminalworld score --model-path smollm2 --model-name base --chat-template-from C/full-x1/VERSION/hf \
        --heldout DATA/heldout.jsonl --out RESULTS/score-heldout-base-agent-MODE.jsonl --mode agent \
        --grounding MODE --grounding-budget 1024 --grounding-output-chars 1000
    terminalworld score --model-path C/CKPT/VERSION/hf --model-name CKPT --heldout DATA/heldout.jsonl \
        --out RESULTS/score-heldout-CKPT-agent-MODE.jsonl --mode agent --grounding MODE \
        --grounding-budget 1024 --grounding-output-chars 1000     # CKPT in assistant-x9, full-x9

Then this file writes the page (`docs/grounding.md`, its plot) and `RESULTS/grounding.json`:

    uv run python benchmarks/grounding.py --data DATA --results RESULTS

With `--data` it also finds the rows whose sessions edit the repository before the target (the
routing table's edit family) and compares the modes on those alone. `--trained MODEL=FILE[#SKIP]`
(repeatable; a model's every training subset, its init's included, records SKIP.. of FILE) names
what a model trained on, and the page says which held-out rows come from its repos (unseen is per
model); the pilot's SFT subset of scale xN is `$MARIN_PREFIX/terminalworld/subsets/swe-zero/V/subset-N.jsonl.gz`.

Without `--data` it rebuilds both from the committed rows alone (no model runs), keeping the route
shares `RESULTS/grounding.json` already holds:

    uv run python benchmarks/grounding.py --results benchmarks/results/grounding
"""

import argparse
import hashlib
import json
import os
import statistics
import sys
from pathlib import Path

from terminalworld.core.assets import load_tokenizer
from terminalworld.core.formats import load_trajectories
from terminalworld.core.heldout import heldout_trajectory, read_heldout
from terminalworld.core.records import write_json
from terminalworld.report import grounding as report
from terminalworld.sim.fidelity import similarity

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the fixtures' one path: tests.paths
from tests.paths import FIXTURES  # noqa: E402

REAL = {
    "SWE-ZERO 12M (3 rows)": FIXTURES / "adp_swe-zero-12m" / "sample_raw.json",
    "mini-swe-agent (1 row)": FIXTURES / "mini-swe-agent_b6984ac5" / "github_issue.traj.json",
    "mini-coder (1 row)": FIXTURES / "adp-fork_mini-coder" / "sample_raw.json",
}


def data_sha256(data: Path | None, results: Path) -> dict[str, str]:
    """The rows' files by SHA-256: from the data when given, else as last written."""
    if data is None:
        return json.loads((results / "grounding.json").read_text())["data_sha256"]
    return {name: hashlib.sha256((data / name).read_bytes()).hexdigest() for name in ("heldout.jsonl", "probes.jsonl")}


def _modes(results: Path, pattern: str) -> dict[str, list]:
    found = {m: results / pattern.format(mode=m) for m in report.MODES}
    return {m: report.read_rows(str(p)) for m, p in found.items() if p.exists()}


def _summaries(results: Path, pattern: str) -> dict[str, dict | None]:
    return {m: report.read_summary(str(results / pattern.format(mode=m))) for m in report.MODES}


ROW_SETS = (  # (page name, scores file pattern)
    ("probes", "score-probes-{mode}.jsonl"),
    ("held-out (24)", "score-heldout-{mode}.jsonl"),
)


HELDOUT_SHARE, PROBES_SHARE = "held-out rows (24, every observation)", "probes (20, every observation)"


DATA_FILES = {"probes": "probes.jsonl", "held-out (24)": "heldout.jsonl"}  # each row set's rows in DATA


def _recorded(results: Path, key: str) -> dict:
    path = results / "grounding.json"
    return json.loads(path.read_text()).get(key, {}) if path.exists() else {}


def edited(data: Path | None, results: Path) -> dict[str, dict]:
    """Per row set, its rows' count and the rows whose sessions edit before the target (with the
    context turns that edit): from the data when given, else as last written."""
    if data is None:
        return _recorded(results, "edited")
    out = {}
    for name, file in DATA_FILES.items():
        rows = read_heldout(str(data / file))
        out[name] = {"rows": len(rows), "edited": report.edited_rows(rows)}
    return out


BLOCK_MODES = ("retrieved", "replayed")  # the modes whose scored rows have a block


def row_facts(data: Path | None, results: Path) -> dict[str, dict]:
    """Per row set and row: its target class (`core.targets`) and, per block mode, whether its target
    stands in its block (the block rebuilt as the scorer builds it: the SmolLM2 tokenizer, the
    page's budget and output cap), for scores rows made before they carried both: from the data
    when given, else as last written."""
    if data is None:
        return _recorded(results, "row_facts")
    from terminalworld.core.targets import classify, terminal_text
    from terminalworld.grounding.modes import Grounder, GroundingOptions

    tok = load_tokenizer("smollm2")
    grounders = {
        m: Grounder(GroundingOptions(grounding=m, grounding_budget=1024, grounding_output_chars=1000), tok)
        for m in BLOCK_MODES
    }
    out: dict[str, dict] = {}
    for name, file in DATA_FILES.items():
        out[name] = {}
        for row in read_heldout(str(data / file)):
            traj, target = heldout_trajectory(row), len(row["prefix"])
            text = terminal_text(row["target_env"])
            out[name][row["instance_id"]] = {
                "target_class": classify(row),
                "in_block": {m: g.trajectory(traj, [target])[target].holds(text) for m, g in grounders.items()},
            }
    return out


def with_facts(rows_by_mode: dict[str, list], facts: dict[str, dict]) -> dict[str, list]:
    """The scores rows with the class and the in-block fact of `facts` where a row lacks them."""
    out = {}
    for mode, rows in rows_by_mode.items():
        out[mode] = []
        for r in rows:
            f = facts.get(r["instance_id"])
            if f is not None:
                r = {"target_class": f["target_class"], **r}
                if mode in f["in_block"]:
                    r = {"target_in_block": f["in_block"][mode], **r}
            out[mode].append(r)
    return out


def seen_by_model(data: Path | None, results: Path, trained: list[str]) -> dict[str, list[str]]:
    """Per model named by `--trained`, the scored held-out rows from repos it trained on: from the
    data and the training subsets when given, else as last written."""
    if data is None or not trained:
        return _recorded(results, "seen_by_model")
    repos: dict[str, set[str]] = {}
    for spec in trained:
        model, _, where = spec.partition("=")
        file, _, skip = where.partition("#")
        if not model or not file:
            raise SystemExit(f"--trained {spec!r}: give MODEL=FILE[#SKIP]")
        repos.setdefault(model, set()).update(report.training_repos(file, int(skip or 0)))
    scored = [r["instance_id"] for r in report.read_rows(str(results / "score-heldout-none.jsonl")) if "ppl" in r]
    return report.seen_rows(read_heldout(str(data / "heldout.jsonl")), repos, ids=scored)


def route_shares(data: Path | None, results: Path) -> dict[str, dict]:
    """The hybrid router's share per row set: from the data when given, else as last written."""
    if data is None:
        kept = json.loads((results / "grounding.json").read_text())["route_share"]
        order = [HELDOUT_SHARE, PROBES_SHARE, *REAL]  # the page's order (the JSON file sorts its keys)
        return dict(sorted(kept.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)))
    tok = load_tokenizer("smollm2")
    count = lambda text: len(tok(text, add_special_tokens=False)["input_ids"])  # noqa: E731
    shares = {
        HELDOUT_SHARE: report.route_share(
            [heldout_trajectory(r) for r in read_heldout(str(data / "heldout.jsonl"))], count
        ),
        PROBES_SHARE: report.route_share(
            [heldout_trajectory(r) for r in read_heldout(str(data / "probes.jsonl"))], count
        ),
    }
    return shares | {name: report.route_share(load_trajectories(str(path)), count) for name, path in REAL.items()}


INTRO = [
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
    "Rows: the local demo's own 20 probes (two per family) and 24 held-out rows (3 context turns,",
    "1,000-character outputs), from repos unseen in its training; `benchmarks/grounding.py` lists the",
    "commands, and `grounding.json` records the two files' SHA-256.",
    "",
    "What the gain is: for a read command the retrieved block holds exactly what the command prints",
    "(`cat` the file; `sed -n`, `head` and `tail` the range; `grep` the lines), and 10 of the 22 scored",
    "held-out targets stand verbatim in their block, so most of `retrieved`'s gain below is the block's",
    "copy of the output (the hybrid idea done softly), not evidence that the model predicts. The",
    "probe's target classes (`core/targets.py`) keep such read targets apart, as served by emulation",
    "(`report.grounding.class_table`). The recorder's sessions do change the repository (`sed -i`,",
    "heredocs): `retrieved` equals `replayed` on these rows only because 3-turn rows end before any",
    "edit. Unseen is per model: 8 of the 22 scored rows come from repos in the SFT subset of",
    "`experiments/pilot.py`'s committed run, so for its checkpoints below they are not unseen.",
    "",
    "## Hostile patterns",
    "",
    "A command's grep patterns and find globs are model text, matched on the host. They are compiled",
    "with RE2 (`grounding.patterns`), linear in the text searched and capped in memory, never with",
    "Python's backtracking `re`: `grep -r '\\(.*\\)*QQQ' .` over a real tree or 500 nested groups are",
    "ordinary searches, and a 5,000-digit line number is past the end of the file, not an error. grep's",
    "BRE is translated (`\\( \\) \\{ \\} \\| \\+ \\?` are operators, their bare forms literal), ERE is",
    "RE2's syntax, `\\<` and `\\>` become `\\b`, `-i`, `-w` and `-F` keep their meaning. What RE2 cannot",
    "express (backreferences such as `\\(ab\\)\\1`), a pattern it refuses (over its memory cap) and any",
    "pattern over 4,096 characters is searched as the literal text typed: bounded, and usually no match",
    "where grep would have matched, so the block is missing, never wrong. `tests/sim/test_grounding_patterns.py`",
    "runs these over a real tree, and `tests/sim/test_grounding_harbor.py` runs the catastrophic and the",
    "nested pattern through a real Harbor job with a grounded simulated environment, whose trial ends",
    "before the agent timeout and is scored.",
    "",
]


def cap_ceiling(rows: list[dict], cap: int) -> float:
    """Mean similarity of each target's first `cap` SmolLM2 tokens to the whole target: what a
    perfect simulator stopped at the cap would score."""
    tok = load_tokenizer("smollm2")
    prefix = [tok.decode(tok(r["target"], add_special_tokens=False)["input_ids"][:cap]) for r in rows]
    return statistics.fmean(similarity(p, r["target"]) for p, r in zip(prefix, rows, strict=True))


def _tier1(results: Path) -> list[str]:
    summaries = {m: s for m, s in _summaries(results, "sim-heldout-{mode}.jsonl").items() if s}
    if not summaries:
        return []
    mode, first = next(iter(summaries.items()))
    cap = first["decoding"]["max_new_tokens"]
    ceiling = cap_ceiling(report.read_rows(str(results / f"sim-heldout-{mode}.jsonl")), cap)
    lines = [
        "## Free-running fidelity on the held-out rows (tier 1)",
        "",
        f"Each held-out row's target observation generated from its real prefix, greedy, {cap} new tokens at",
        f"most. Most targets are longer than that, so a perfect simulator stopped at {cap} tokens would score",
        f"a similarity of {ceiling:.2f}: read the generated modes against that ceiling.",
        "",
        "| grounding | rows | similarity | median | line F1 | exact match | capped | served exactly |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m, x in summaries.items():
        lines.append(
            f"| {m} | {x['n']} | {x['similarity']:.2f} | {x['median_similarity']:.2f} | {x['line_f1']:.2f} | "
            f"{x['exact_match']:.0%} | {x['capped_rate']:.0%} | {x.get('served_rows', '–')} |"
        )
    fidelity = report.fidelity_by_family(_modes(results, "sim-heldout-{mode}.jsonl"))
    lines += ["", "Per command family: similarity (exact-match rate).", "", report.fidelity_table(fidelity), ""]
    return lines


PILOT = ("base", "assistant-x9", "full-x9")  # the pilot's base, its largest (a) and (b) checkpoints


def pilot_ppl(results: Path) -> dict[str, dict]:
    """PPL by bucket of the pilot's models, each without and with the retrieved block (agent framing)."""
    found = {
        f"{model}, {mode}": results / f"score-heldout-{model}-agent-{mode}.jsonl"
        for model in PILOT
        for mode in ("none", "retrieved")
    }
    rows = {k: report.read_rows(str(p)) for k, p in found.items() if p.exists()}
    return report.ppl_by_bucket(rows) if rows else {}


def _pilot(table: dict[str, dict]) -> list[str]:
    if not table:
        return []
    return [
        "## The pilot's checkpoints",
        "",
        "The same held-out rows scored by the [pilot](pilot.md)'s base (SmolLM2-135M-Instruct with the",
        "checkpoints' chat template) and its largest checkpoints of arms (a) `assistant` and (b) `full` (27",
        "steps of 4,096 tokens each, trained without grounding), in the agent framing they were trained in:",
        "the tables above use the sim framing, so compare within this table. Cells: token-weighted PPL (rows",
        "scored).",
        "",
        report.ppl_table(table, label="model, grounding"),
        "",
    ]


def _edited(results: Path, found: dict[str, dict]) -> list[str]:
    if not found:
        return []
    lines = [
        "## Replayed against retrieved where the session edits first",
        "",
        "`replayed` can differ from `retrieved` only on a row whose session changes the repository before",
        "its target: a command of the routing table's edit family (`sed -i`, a heredoc or other",
        "redirection into a file, `git apply`, `mkdir`, `rm`, ...) in its context (`report.grounding.edited_rows`;",
        "a write inside an interpreter is not seen). The modes are compared on those rows alone, paired",
        "(rows every mode scored); hybrid serves read and edit targets exactly, so it is left out.",
        "",
    ]
    for name, e in found.items():
        result = report.modes_on(_modes(results, dict(ROW_SETS)[name]), e["edited"])
        lines += [f"### {name}", "", report.edited_sentence(result, e["rows"]), ""]
        if result["scored"]:
            lines += [report.edited_table(result), ""]
    return lines


def _unseen(seen: dict[str, list[str]], results: Path) -> list[str]:
    if not seen:
        return []
    scored = [r for r in report.read_rows(str(results / "score-heldout-none.jsonl")) if "ppl" in r]
    return [
        "## Unseen, per model",
        "",
        "A held-out row is unseen by a model only if the model never trained on its repo: the scored",
        "held-out rows from repos in each model's training subsets (its init's included).",
        "",
        report.unseen_table(seen, len(scored)),
        "",
    ]


def _loops(results: Path) -> list[str]:
    loops = {m: x for m, x in _summaries(results, "loop-{mode}.jsonl").items() if x}
    if not loops:
        return []
    lines = [
        "## The closed loop (tier 3)",
        "",
        "The solver's script on generated tasks, SmolLM2 answering what the shadow does not, 16 new tokens.",
        "Served exactly: the share of the real observations' tokens whose command the shadow answered.",
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
    return [*lines, ""]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", help="the data folder (default: the route shares already in RESULTS/grounding.json)")
    p.add_argument("--results", required=True)
    p.add_argument("--docs", default=str(HERE.parent / "docs"))
    p.add_argument("--trained", action="append", default=[], metavar="MODEL=FILE[#SKIP]")
    a = p.parse_args()
    results = Path(a.results)
    data_dir = Path(a.data) if a.data else None
    edits = edited(data_dir, results)
    facts = row_facts(data_dir, results)
    seen = seen_by_model(data_dir, results, a.trained)
    shares = route_shares(Path(a.data) if a.data else None, results)
    ppl = {name: report.ppl_by_bucket(rows) for name, pattern in ROW_SETS if (rows := _modes(results, pattern))}
    families = {name: report.ppl_by_family(_summaries(results, pattern)) for name, pattern in ROW_SETS}
    fidelity = report.fidelity_by_family(_modes(results, "sim-probes-{mode}.jsonl"))
    tier1 = report.fidelity_by_family(_modes(results, "sim-heldout-{mode}.jsonl"))
    data = {"data_sha256": data_sha256(Path(a.data) if a.data else None, results)}
    pilot = pilot_ppl(results)
    # Rows scored with target classes (`core/targets.py`) give the table by class; older rows carry none.
    classes = {
        name: t
        for name, pattern in ROW_SETS
        if (t := report.ppl_by_class(with_facts(_modes(results, pattern), facts.get(name, {}))))
    }
    classes = {name: t for name, t in classes.items() if any(c["headline"]["n"] for c in t.values())}
    out = data | {
        **({"ppl_by_class": classes} if classes else {}),
        "route_share": shares,
        "ppl": ppl,
        "ppl_pilot": pilot,
        "ppl_by_family": {k: v for k, v in families.items() if v},
        **({"edited": edits} if edits else {}),
        **({"row_facts": facts} if facts else {}),
        **({"seen_by_model": seen} if seen else {}),
    }
    write_json(str(results / "grounding.json"), out | {"fidelity": fidelity, "fidelity_heldout": tier1})
    os.makedirs(a.docs, exist_ok=True)
    panels = {k: ppl[k] for k in ("probes", "held-out (24)") if k in ppl}
    plot = report.ppl_plot(panels, a.docs, "grounding-ppl.png", "SmolLM2-135M-Instruct zero-shot, sim framing")
    lines = [
        *INTRO,
        "## Env PPL by target length",
        "",
        "SmolLM2-135M-Instruct zero-shot, sim framing, 1,024-token block. Cells: token-weighted PPL (rows",
        "scored). Hybrid rows the shadow served exactly are not scored: their output is the real one.",
        "",
    ]
    for name, table in ppl.items():
        lines += [f"### {name}", "", report.ppl_table(table), ""]
    lines += [f"![PPL by length bucket per mode]({Path(plot).name})", ""]
    if classes:
        lines += [
            "## Env PPL by target class",
            "",
            "The headline is read + predict; read is served by emulation. Where the rows record it, a cell",
            "counts the scored targets that stand verbatim in their block (the copy rule against the block).",
            "",
        ]
        for name, table in classes.items():
            lines += [f"### {name}", "", report.class_table(table), ""]
    lines += ["## Env PPL by command family", "", "The same rows by their target's command family.", ""]
    for name, table in families.items():
        if table:
            lines += [f"### {name}", "", report.family_table(table), ""]
    lines += _edited(results, edits)
    lines += _pilot(pilot)
    lines += _unseen(seen, results)
    lines += _tier1(results)
    if fidelity:
        lines += [
            "## Free-running fidelity per probe family (tier 2)",
            "",
            "Two probes per family, greedy, 48 new tokens at most. Cells: similarity (exact-match rate).",
            "",
            report.fidelity_table(fidelity),
            "",
        ]
    lines += _loops(results)
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
