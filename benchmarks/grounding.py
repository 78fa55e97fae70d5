"""The grounding measurements: SmolLM2-135M-Instruct zero-shot as a simulator (sim framing), each
grounding mode on the same rows, and the hybrid router's exactly served share; grounding measured
for what it is (per target class, replayed against retrieved on the rows that edit first, unseen
per model).

Data: the local demo's own held-out rows and probes, as its snapshot commits them (24 rows of 3
context turns and 20 probes, two per family, 1,000-character outputs, from repos unseen in its
training; `grounding.json` records both files' SHA-256):

    V=2026.12.03   # the demo's version
    S=docs/snapshots/local-demo
    zcat $S/heldout/sim_ppl_heldout_24/$V/sim_ppl_heldout_24.jsonl.gz > DATA/heldout.jsonl
    zcat $S/terminalworld/probes/$V/probes.jsonl.gz > DATA/probes.jsonl

Scores, per MODE in none, retrieved, replayed, hybrid (a 1,024-token block; one torch thread, the
fastest on 2 shared cores):

    OMP_NUM_THREADS=1 terminalworld score --model-path smollm2 --heldout DATA/probes.jsonl \
        --out RAW/score-probes-MODE.jsonl --mode sim --grounding MODE --grounding-budget 1024 \
        --grounding-output-chars 1000
    OMP_NUM_THREADS=1 terminalworld score --model-path smollm2 --heldout DATA/heldout.jsonl \
        --out RAW/score-heldout-MODE.jsonl --mode sim --grounding MODE --grounding-budget 1024 \
        --grounding-output-chars 1000

Tiers 1 and 2 (`sim-eval --heldout` and `--probes`, 48 new tokens) and the closed loop (tier 3) on
two generated tasks (`terminalworld tasks make --out TASKS --n 2 --seed 7`), per MODE:

    OMP_NUM_THREADS=1 terminalworld sim-eval --model smollm2 --heldout DATA/heldout.jsonl \
        --out RAW/sim-heldout-MODE.jsonl --mode sim --max-new-tokens 48 --grounding MODE \
        --grounding-budget 1024 --grounding-output-chars 1000          # --probes DATA/probes.jsonl: sim-probes
    terminalworld sim-eval --model smollm2 --tasks TASKS --agent solver --out RAW/loop-MODE.jsonl \
        --mode sim --max-new-tokens 16 --grounding MODE --grounding-budget 1024 --grounding-output-chars 1000

Tiers 1 and 2 are not on the page yet: on 2 shared cores a generated probe took about 35 s (12
minutes a mode on the probes), longer than the page's measurement was given.

Then this file packs the rows into the committed folder (each `RAW/*.jsonl` gzip-compressed, every
path named logically, `report.snapshot.logical`) and writes the page (`docs/grounding.md`, its plot)
and `grounding.json`. `--trained MODEL=FILE[#SKIP]` (repeatable; a model's every training subset,
its init's included, records SKIP.. of FILE) names what a model trained on; the repos are recorded
in `grounding.json`, and the page says which held-out rows come from them (unseen is per model).
The demo's base pretrains on records 40.. of its subset of 100, its arms on the subset of 40 (P:
`$MARIN_PREFIX/terminalworld/subsets/swe-zero/$V`):

    uv run python benchmarks/grounding.py --pack RAW --trained base-demo=P/subset-100.jsonl.gz#40 \
        --trained assistant-demo=P/subset-40.jsonl.gz --trained assistant-demo=P/subset-100.jsonl.gz#40 ...

Without `--pack` it rebuilds the page from the committed rows alone (no model runs): the score,
loop and sim rows under `benchmarks/results/grounding`, the snapshot's held-out rows and probes (or
`--data DATA`), the fixtures, and the training repos `grounding.json` records:

    uv run python benchmarks/grounding.py

The pilot's checkpoints (`experiments/pilot.py`) are measured here again from its re-run: its SFT
subset of scale xN is `$MARIN_PREFIX/terminalworld/subsets/swe-zero/V/subset-N.jsonl.gz`.
The demo's own checkpoints are not scored with a block: within their 2,048-token window a
1,024-token retrieved block leaves 9 of the 24 held-out rows scorable (Qwen3 tokens), too few to compare.
"""

import argparse
import gzip
import hashlib
import json
import os
import statistics
import sys
from pathlib import Path

from terminalworld.core.assets import load_tokenizer
from terminalworld.core.formats import load_trajectories
from terminalworld.core.heldout import heldout_trajectory, read_heldout
from terminalworld.core.records import atomic_jsonl, dumps_row, write_json
from terminalworld.report import grounding as report
from terminalworld.report.snapshot import logical
from terminalworld.sim.fidelity import similarity

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the fixtures' one path: tests.paths
from tests.paths import FIXTURES  # noqa: E402

RESULTS = HERE / "results" / "grounding"  # the committed rows and grounding.json
DOCS = HERE.parent / "docs"
SNAPSHOT = DOCS / "snapshots" / "local-demo"
VERSION = "2026.12.03"  # the demo's version
# The rows' files by their name in DATA, and where the demo's snapshot commits them.
COMMITTED_DATA = {
    "heldout.jsonl": SNAPSHOT / "heldout" / "sim_ppl_heldout_24" / VERSION / "sim_ppl_heldout_24.jsonl.gz",
    "probes.jsonl": SNAPSHOT / "terminalworld" / "probes" / VERSION / "probes.jsonl.gz",
}

REAL = {
    "SWE-ZERO 12M (3 rows)": FIXTURES / "adp_swe-zero-12m" / "sample_raw.json",
    "mini-swe-agent (1 row)": FIXTURES / "mini-swe-agent_b6984ac5" / "github_issue.traj.json",
    "mini-coder (1 row)": FIXTURES / "adp-fork_mini-coder" / "sample_raw.json",
}

ROW_SETS = (  # (page name, scores file pattern, its rows in DATA)
    ("probes", "score-probes-{mode}.jsonl.gz", "probes.jsonl"),
    ("held-out (24)", "score-heldout-{mode}.jsonl.gz", "heldout.jsonl"),
)
HELDOUT_SHARE, PROBES_SHARE = "held-out rows (24, every observation)", "probes (20, every observation)"


def data_files(data: Path | None) -> dict[str, Path]:
    """The rows' files: DATA's (plain or gzipped) when given, else the demo snapshot's committed ones."""
    if data is None:
        return dict(COMMITTED_DATA)
    found = {}
    for name in COMMITTED_DATA:
        path = next((p for p in (data / name, data / f"{name}.gz") if p.exists()), None)
        if path is None:
            raise SystemExit(f"--data {data}: no {name} (or {name}.gz)")
        found[name] = path
    return found


def data_sha256(files: dict[str, Path]) -> dict[str, str]:
    """Each rows file's SHA-256, of its uncompressed text (as `score` reads it)."""
    read = lambda p: gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()  # noqa: E731
    return {name: hashlib.sha256(read(path)).hexdigest() for name, path in files.items()}


def pack(raw: Path, results: Path) -> list[str]:
    """Every `raw/*.jsonl` written to `results` gzip-compressed (fixed mtime: the same rows give the
    same bytes), each row's paths named logically (the prefix `{MARIN_PREFIX}`, any other machine
    path `{LOCAL}/<name>`): what is committed names no folder of the machine that measured it."""
    roots = [os.environ.get("MARIN_PREFIX", "")]
    written = []
    for path in sorted(raw.glob("*.jsonl")):
        with open(path, encoding="utf-8") as f, atomic_jsonl(str(results / f"{path.name}.gz")) as out:
            for line in f:
                if line.strip():
                    out.write(dumps_row(logical(json.loads(line), roots)))
        written.append(f"{path.name}.gz")
    return written


def _modes(results: Path, pattern: str) -> dict[str, list]:
    found = {m: results / pattern.format(mode=m) for m in report.MODES}
    return {m: report.read_rows(str(p)) for m, p in found.items() if p.exists()}


def _summaries(results: Path, pattern: str) -> dict[str, dict | None]:
    return {m: report.read_summary(str(results / pattern.format(mode=m))) for m in report.MODES}


def edited(files: dict[str, Path]) -> dict[str, dict]:
    """Per row set, its rows' count and the rows whose sessions edit before the target (with the
    context turns that edit), from the rows themselves."""
    out = {}
    for name, _, file in ROW_SETS:
        rows = read_heldout(str(files[file]))
        out[name] = {"rows": len(rows), "edited": report.edited_rows(rows)}
    return out


def training_repos(results: Path, trained: list[str]) -> dict[str, list[str]]:
    """Per model named by `--trained`, the repos of its training subsets; without it, as recorded
    in `grounding.json` (the subsets themselves are not committed, their repos are)."""
    if not trained:
        path = results / "grounding.json"
        return json.loads(path.read_text()).get("training_repos", {}) if path.exists() else {}
    repos: dict[str, set[str]] = {}
    for spec in trained:
        model, _, where = spec.partition("=")
        file, _, skip = where.partition("#")
        if not model or not file:
            raise SystemExit(f"--trained {spec!r}: give MODEL=FILE[#SKIP]")
        repos.setdefault(model, set()).update(report.training_repos(file, int(skip or 0)))
    return {model: sorted(r) for model, r in repos.items()}


def scored_ids(sets: dict[str, dict[str, list]]) -> list[str]:
    """The held-out rows SmolLM2 scored without grounding: the rows the page's unseen counts are of."""
    return [r["instance_id"] for r in sets["held-out (24)"]["none"] if "ppl" in r]


def route_shares(files: dict[str, Path]) -> dict[str, dict]:
    """The hybrid router's share per row set (SmolLM2 tokens of every observation)."""
    tok = load_tokenizer("smollm2")
    count = lambda text: len(tok(text, add_special_tokens=False)["input_ids"])  # noqa: E731
    trajectories = lambda file: [heldout_trajectory(r) for r in read_heldout(str(files[file]))]  # noqa: E731
    shares = {
        HELDOUT_SHARE: report.route_share(trajectories("heldout.jsonl"), count),
        PROBES_SHARE: report.route_share(trajectories("probes.jsonl"), count),
    }
    return shares | {name: report.route_share(load_trajectories(str(path)), count) for name, path in REAL.items()}


def in_block(rows: list[dict]) -> tuple[int, int]:
    """(targets that stand verbatim in their block, targets scored) of a block mode's scores rows."""
    scored = [r for r in rows if "ppl" in r]
    return sum(bool(r.get("target_in_block")) for r in scored), len(scored)


def differ_outside(by_mode: dict[str, list], edited_ids: dict[str, list]) -> tuple[int, int]:
    """(rows whose retrieved and replayed scores differ, of them the rows that edit first)."""
    a = {r["instance_id"]: r.get("sum_nll") for r in by_mode.get("retrieved", []) if "ppl" in r}
    b = {r["instance_id"]: r.get("sum_nll") for r in by_mode.get("replayed", []) if "ppl" in r}
    differ = [i for i in a.keys() & b.keys() if a[i] != b[i]]
    return len(differ), sum(i in edited_ids for i in differ)


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
    "1,000-character outputs), from repos unseen in its training, as its snapshot commits them",
    "(`docs/snapshots/local-demo`); `benchmarks/grounding.py` lists the commands, and `grounding.json`",
    "records the two files' SHA-256. Every figure below is recomputed from the rows committed under",
    "`benchmarks/results/grounding` (`uv run python benchmarks/grounding.py`).",
    "",
]


def what_the_gain_is(sets: dict[str, dict[str, list]], edits: dict[str, dict]) -> list[str]:
    """The intro's measured paragraph: how much of the block is the target, and where the two block
    modes can differ, in figures from the rows."""
    inside = {name: in_block(m.get("retrieved", [])) for name, m in sets.items()}
    differ = {name: differ_outside(m, edits[name]["edited"]) for name, m in sets.items()}
    (hk, hn), (pk, pn) = inside["held-out (24)"], inside["probes"]
    (hd, hde), (pd, pde) = differ["held-out (24)"], differ["probes"]
    (he, hr), (pe, pr) = ((len(edits[n]["edited"]), edits[n]["rows"]) for n in ("held-out (24)", "probes"))
    return [
        "What the gain is: for a read command the retrieved block holds exactly what the command prints",
        "(`cat` the file; `sed -n`, `head` and `tail` the range; `grep` the lines): with the retrieved",
        f"block, {hk} of the {hn} scored held-out targets and {pk} of the {pn} probes stand verbatim in their",
        "block. The target classes (`core/targets.py`) keep such read targets apart, as served by",
        "emulation, and the class table shows `retrieved`'s gain is on them: the block holds their output",
        "(the hybrid idea done softly), which is not evidence that the model predicts. The recorder's",
        "sessions do change the repository (`sed -i`, heredocs): `retrieved` equals `replayed` only on a",
        "row with no edit before its target, where both blocks read the same state. Of the held-out rows",
        f"{he} of {hr} edit first, of the probes {pe} of {pr}; the two modes' scores differ on {hd} held-out rows",
        f"({hde} of them edit first) and {pd} probes ({pde} of them edit first), and the section on edits",
        "compares them where they can differ.",
        "",
    ]


HOSTILE = [
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
    "What a command leaves in the copy is hostile in size too, so one command's blocks cost the host",
    "bounded work whatever the copy holds (`grounding.retrieval`'s caps): at most 64 MiB read (1 MiB a",
    "file), 256 KiB of characters a block and 1 MiB in all, 1,000 lines a side diffed per file and",
    "8,000 in all (difflib is quadratic), a folder's first 10,000 entries and a walk's 5,000 files or",
    "50,000 entries; the start state is kept as sizes and digests, with 32 MiB of its text for diffs.",
    "Searches scan each file from hit to hit in RE2, not line by line in Python. Past a cap the block",
    "says so in a line of its own. `tests/sim/test_grounding_bounds.py` fills a copy to 64 MiB of",
    "short-line files, which cost 2.6 GiB for `git diff` before, and measures the host's peak memory on",
    "`git diff`, `git status`, searches, a listing, a walk and a `cat`: 27 MiB above where it started.",
    "",
]


def cap_ceiling(rows: list[dict], cap: int) -> float:
    """Mean similarity of each target's first `cap` SmolLM2 tokens to the whole target: what a
    perfect simulator stopped at the cap would score."""
    tok = load_tokenizer("smollm2")
    prefix = [tok.decode(tok(r["target"], add_special_tokens=False)["input_ids"][:cap]) for r in rows]
    return statistics.fmean(similarity(p, r["target"]) for p, r in zip(prefix, rows, strict=True))


def _tier1(results: Path) -> list[str]:
    summaries = {m: s for m, s in _summaries(results, "sim-heldout-{mode}.jsonl.gz").items() if s}
    if not summaries:
        return []
    mode, first = next(iter(summaries.items()))
    cap = first["decoding"]["max_new_tokens"]
    ceiling = cap_ceiling(report.read_rows(str(results / f"sim-heldout-{mode}.jsonl.gz")), cap)
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
    fidelity = report.fidelity_by_family(_modes(results, "sim-heldout-{mode}.jsonl.gz"))
    lines += ["", "Per command family: similarity (exact-match rate).", "", report.fidelity_table(fidelity), ""]
    return lines


def _tier2(fidelity: dict) -> list[str]:
    if not fidelity:
        return []
    return [
        "## Free-running fidelity per probe family (tier 2)",
        "",
        "Two probes per family, greedy, 48 new tokens at most. Cells: similarity (exact-match rate).",
        "",
        report.fidelity_table(fidelity),
        "",
    ]


def _not_measured(tiers: list[str]) -> list[str]:
    """What the page says of a free-running tier whose rows are not committed."""
    if not tiers:
        return []
    which = " and ".join(tiers)
    return [
        f"## Free-running fidelity (tier{'s' if len(tiers) > 1 else ''} {which})",
        "",
        "Not measured on these rows: generating every row in four modes was left out to keep this CPU",
        "measurement short, and the earlier figures were made on an earlier draw of the held-out rows and",
        "probes, whose files were not committed, so they are not shown. The commands in",
        "`benchmarks/grounding.py` measure each tier; its rows, committed here, put it on this page.",
        "",
    ]


def _edited(sets: dict[str, dict[str, list]], found: dict[str, dict]) -> list[str]:
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
    for name, rows_by_mode in sets.items():
        e = found[name]
        result = report.modes_on(rows_by_mode, e["edited"])
        lines += [f"### {name}", "", report.edited_sentence(result, e["rows"]), ""]
        if result["scored"]:
            lines += [report.edited_table(result), ""]
    return lines


def _unseen(seen: dict[str, list[str]], total: int) -> list[str]:
    if not seen:
        return []
    return [
        "## Unseen, per model",
        "",
        "A held-out row is unseen by a model only if the model never trained on its repo: the scored",
        "held-out rows (SmolLM2's, without grounding) from repos in each model's training subsets (its",
        "init's included; `grounding.json` records their repos). SmolLM2 itself is the stock model, its",
        "training data unknown. The pilot's checkpoints are measured here again from its re-run.",
        "",
        report.unseen_table(seen, total),
        "",
    ]


def _loops(results: Path) -> list[str]:
    loops = {m: x for m, x in _summaries(results, "loop-{mode}.jsonl.gz").items() if x}
    if not loops:
        return []
    lines = [
        "## The closed loop (tier 3)",
        "",
        "The solver's script on two generated tasks (`tasks make --n 2 --seed 7`, not the rows above),",
        "SmolLM2 answering what the shadow does not, 16 new tokens. Served exactly: the share of the real",
        "observations' tokens whose command the shadow answered.",
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


def build(results: Path, files: dict[str, Path], repos: dict[str, list[str]]) -> tuple[str, dict, dict]:
    """The page's Markdown, `grounding.json`'s content and the plot's panels, from the committed rows
    in `results`, the rows' files and the training repos: no model runs."""
    edits = edited(files)
    shares = route_shares(files)
    # Each row set's scores rows, read once: every table and count below is of these.
    sets = {name: _modes(results, pattern) for name, pattern, _ in ROW_SETS}
    ids = scored_ids(sets)
    seen = report.seen_rows(read_heldout(str(files["heldout.jsonl"])), {m: set(r) for m, r in repos.items()}, ids=ids)
    ppl = {name: report.ppl_by_bucket(rows) for name, rows in sets.items() if rows}
    families = {name: report.ppl_by_family(_summaries(results, pattern)) for name, pattern, _ in ROW_SETS}
    classes = {
        name: t
        for name, rows in sets.items()
        if (t := report.ppl_by_class(rows)) and any(c["headline"]["n"] for c in t.values())
    }
    fidelity = report.fidelity_by_family(_modes(results, "sim-probes-{mode}.jsonl.gz"))
    tier1 = report.fidelity_by_family(_modes(results, "sim-heldout-{mode}.jsonl.gz"))
    out = {
        "data_sha256": data_sha256(files),
        "ppl_by_class": classes,
        "route_share": shares,
        "ppl": ppl,
        "ppl_by_family": {k: v for k, v in families.items() if v},
        "edited": edits,
        "training_repos": repos,
        "seen_by_model": seen,
        "fidelity": fidelity,
        "fidelity_heldout": tier1,
    }
    lines = [
        *INTRO,
        *what_the_gain_is(sets, edits),
        *HOSTILE,
        "## Env PPL by target length",
        "",
        "SmolLM2-135M-Instruct zero-shot, sim framing, 1,024-token block. Cells: token-weighted PPL (rows",
        "scored). Hybrid rows the shadow served exactly are not scored: their output is the real one.",
        "",
    ]
    for name, table in ppl.items():
        lines += [f"### {name}", "", report.ppl_table(table), ""]
    lines += ["![PPL by length bucket per mode](grounding-ppl.png)", ""]
    if classes:
        lines += [
            "## Env PPL by target class",
            "",
            "The headline is read + predict; read is served by emulation. A cell counts the scored targets",
            "that stand verbatim in their block (the copy rule against the block): for read targets that is",
            "the block's copy of the output, not a prediction.",
            "",
        ]
        for name, table in classes.items():
            lines += [f"### {name}", "", report.class_table(table), ""]
    lines += ["## Env PPL by command family", "", "The same rows by their target's command family.", ""]
    for name, table in families.items():
        if table:
            lines += [f"### {name}", "", report.family_table(table), ""]
    lines += _edited(sets, edits)
    lines += _unseen(seen, len(ids))
    tier1_lines, tier2_lines = _tier1(results), _tier2(fidelity)
    lines += tier1_lines + tier2_lines
    lines += _not_measured([t for t, shown in (("1", tier1_lines), ("2", tier2_lines)) if not shown])
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
    panels = {k: ppl[k] for k in ("probes", "held-out (24)") if k in ppl}
    return "\n".join(lines), out, panels


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--results", default=str(RESULTS), help="the committed rows and grounding.json")
    p.add_argument("--data", help="heldout.jsonl and probes.jsonl (default: the demo snapshot's committed rows)")
    p.add_argument("--pack", metavar="RAW", help="first pack RAW/*.jsonl into RESULTS, gzipped, paths logical")
    p.add_argument("--docs", default=str(DOCS))
    p.add_argument("--trained", action="append", default=[], metavar="MODEL=FILE[#SKIP]")
    a = p.parse_args()
    results = Path(a.results)
    if a.pack:
        print("packed", pack(Path(a.pack), results))
    page, out, panels = build(results, data_files(Path(a.data) if a.data else None), training_repos(results, a.trained))
    write_json(str(results / "grounding.json"), out)
    os.makedirs(a.docs, exist_ok=True)
    report.ppl_plot(panels, a.docs, "grounding-ppl.png", "SmolLM2-135M-Instruct zero-shot, sim framing")
    Path(a.docs, "grounding.md").write_text(page)
    print(json.dumps({"route_share": {k: v["exact_token_share"] for k, v in out["route_share"].items()}}, indent=1))


if __name__ == "__main__":
    main()
