"""Run one shard of a study and commit what it made (`pipeline.shards`): the shared inputs restored
from the study's folder (their fingerprint checked against the ledger's), the shard's steps built
(a rerun after a kill reuses the finished ones while the prefix holds them, else starts over), its
artifacts copied into the folder with logical paths only (the inputs whole, the others as their
rows and step records), its checkpoints dropped, and the ledger entry appended.

The folder lays the steps out as a prefix (`steps/{name}/{version}/...`, every file gzipped), so
restoring one makes a finished step that the runner skips."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from terminalworld.core.precision import BF16_FLAGS, native_bf16
from terminalworld.core.records import read_json
from terminalworld.errors import InputError, TerminalworldError
from terminalworld.pipeline import artifacts
from terminalworld.pipeline.cost import cost_table
from terminalworld.pipeline.machines import machines
from terminalworld.pipeline.shards import (
    Shard,
    append_entry,
    check_version,
    commit_of,
    done,
    entry,
    ledger_table,
    next_shard,
    read_ledger,
)
from terminalworld.report.pages import LOGICAL_PREFIX
from terminalworld.report.snapshot import ROW_SUFFIXES, logical
from terminalworld.report.verify import _gunzip

STEPS = "steps"
SHARD_BUDGET_S = 90 * 60  # on 2 quiet cores, by the plan
MAX_INPUT_BYTES = 64 << 20  # the shared inputs, compressed
# The step records a finished step needs beside its rows: its status, provenance and timed attempts.
RECORDS = (".executor_status", ".artifact.json", ".executor_info")
TEXT = (*ROW_SUFFIXES, ".md", ".yaml", ".jinja", ".executor_status", ".artifact.json", ".executor_info")


def recipe_column(p: Any):
    """The quiet column that computes as the recipe does."""
    m = machines()
    if getattr(p, "precision", "float32") == "bfloat16":
        return m.bf16
    return m.sft_bf16 if "bfloat16" in getattr(p, "sft_mp", "") else m.quiet


def plan_text(shards: dict[str, Shard], ledger: dict[str, Any] | None, column, device: str = "cpu") -> str:
    """Each step's estimate per machine, then the shards with their estimates and states; on a CPU
    without native bf16 where the column computes in bf16, a line saying its rates do not hold."""
    costs = {n: w for s in shards.values() for n, w in s.costs.items()}
    m = machines()
    lines = [cost_table(costs, m.all()), "", ledger_table(shards, ledger, column, SHARD_BUDGET_S)]
    if column is not m.quiet and device == "cpu" and not native_bf16("cpu"):
        lines.append(
            f"this CPU has no native bf16 ({', '.join(BF16_FLAGS)}): the bf16 columns' rates were measured on one "
            f"that has, and bf16 SFT ran {m.sft_bf16_without_units:.2f}x float32 on one without "
            "(benchmarks/results/precision_no_bf16_units.json); here the recipe takes longer than its column says"
        )
    return "\n".join(lines)


def _wanted(rel: str, whole: bool) -> bool:
    parts = rel.split("/")
    if whole:
        return not rel.endswith((".lock", ".tmp"))
    if parts[0] == ".wall" or rel in RECORDS:
        return True
    return not any(p.startswith(".") for p in parts) and rel.endswith(ROW_SUFFIXES)


def commit_step(out: str, folder: Path, prefix: str, whole: bool) -> int:
    """Copy the step whose output is `out` into `folder` (`steps/{name}/{version}`), each file
    gzipped (mtime 0) and the prefix named logically in its text, and in the host's JSON records
    every other machine path too (`snapshot.logical`); returns the bytes written."""
    rel_out = os.path.relpath(out, prefix)
    if rel_out.startswith(".."):
        raise InputError(f"{out}: not under the prefix {prefix}")
    here, written = folder / STEPS / rel_out, 0
    shutil.rmtree(here, ignore_errors=True)
    for root, dirs, files in os.walk(out, followlinks=False):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
        for f in files:
            src = os.path.join(root, f)
            rel = os.path.relpath(src, out)
            if os.path.islink(src) or not _wanted(rel, whole):
                continue
            data = Path(src).read_bytes()
            if rel.endswith(".json") or f in RECORDS:  # the host's records: every machine path named logically
                text = data.decode("utf-8", errors="surrogateescape")
                data = logical(text, [prefix]).encode("utf-8", errors="surrogateescape")
            elif rel.endswith(TEXT):  # rows of session text keep every other path as the session printed it
                data = data.replace(prefix.rstrip("/").encode() + b"/", LOGICAL_PREFIX.encode() + b"/")
            target = here / (rel + ".gz")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(gzip.compress(data, mtime=0))
            written += target.stat().st_size
    return written


def restore_steps(folder: Path, prefix: str, names: Sequence[str] | None = None) -> int:
    """Lay the committed steps (those under `names`, default all) out under `prefix`, each file
    decompressed and the logical prefix read as `prefix`; a file already there is kept."""
    n, root = 0, folder / STEPS
    for src in sorted(root.rglob("*.gz")):
        rel = src.relative_to(root).as_posix()
        if src.is_symlink() or (names is not None and not rel.startswith(tuple(f"{x}/" for x in names))):
            continue
        dst = Path(prefix, rel.removesuffix(".gz"))
        if dst.exists():
            continue
        data = _gunzip(src).replace(LOGICAL_PREFIX.encode() + b"/", prefix.rstrip("/").encode() + b"/")
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(data)
        n += 1
    return n


def fingerprint(folder: Path, names: Sequence[str]) -> str:
    """A hash of the committed steps under `names`: each file's logical path and decompressed bytes."""
    h = hashlib.sha256()
    for name in sorted(names):
        for src in sorted((folder / STEPS / name).rglob("*.gz")):
            if "/.wall/" in src.as_posix() or src.name.startswith(".executor_status"):
                continue  # when and how long it ran, not what it made
            h.update(src.relative_to(folder / STEPS).as_posix().encode() + b"\0")
            h.update(hashlib.sha256(_gunzip(src)).digest())
    return h.hexdigest()


def _step_dir(built: Any, prefix: str) -> str:
    return os.path.relpath(built.path(), prefix)


def solved(shard: Shard) -> dict[str, dict[str, int]]:
    """Each agent grade of the shard: model -> level -> solved trials."""
    out: dict[str, dict[str, int]] = {}
    for b in shard.built:
        step = b.step.name
        if step.startswith("agent-eval/"):
            summary = read_json(os.path.join(b.path(), artifacts.AGENT_SUMMARY))
            level = step.split("/")[1].removeprefix("heldout-").removesuffix("tasks").strip("-") or "function"
            out.setdefault(b.model_name, {})[level] = int(summary.get("solved_trials") or 0)
    return out


def closed_levels(ledger: dict[str, Any] | None, levels: Sequence[str]) -> frozenset[str]:
    """The gate, written before any shard ran: a level is closed when neither the base nor the
    largest checkpoint of the first finished chain with agent grades solved anything at it; until
    both are in, every level is graded in full."""
    entries = list(done(ledger).values())
    base = next((e for e in entries if e["shard"] == "base"), None)
    chain = next((e for e in entries if e["shard"] not in ("inputs", "base") and e.get("solved")), None)
    if base is None or chain is None:
        return frozenset()
    graded = [*base.get("solved", {}).values(), *chain["solved"].values()]
    return frozenset(lv for lv in levels if not any(by.get(lv, 0) for by in graded))


def run_shard(
    graph_of: Callable[[Any, frozenset[str]], Any], p: Any, name: str, folder: Path, prefix: str, checkout: Path
) -> dict[str, Any]:
    """Run shard `name` (or the next pending one) and commit it; returns its ledger entry."""
    from terminalworld.pipeline.entry import run

    ledger = read_ledger(folder)
    check_version(ledger, p.version, folder)
    graph = graph_of(p, closed_levels(ledger, p.agent_levels))
    shards = graph.shards
    name = (next_shard(shards, ledger) or "") if name == "next" else name
    if not name:
        raise InputError(f"{folder}: every shard is done")
    if name not in shards:
        raise InputError(f"no shard {name!r}; the shards: {', '.join(shards)}")
    finished, first = done(ledger), next(iter(shards))
    if name in finished:
        raise InputError(f"shard {name} is done ({finished[name].get('commit')}); its rows are in {folder}")
    if name != first and first not in finished:
        raise InputError(f"shard {name} needs the shared inputs: run --shard {first} first")
    if name not in (first, "base") and "base" not in finished:
        raise InputError(f"shard {name} is graded by the gate the base shard decides: run --shard base first")
    shard, where = shards[name], commit_of(checkout)
    if name != first:
        inputs = [_step_dir(b, prefix) for b in shards[first].built]
        restore_steps(folder, prefix, inputs)
        if fingerprint(folder, inputs) != finished[first].get("fingerprint"):
            raise InputError(f"{folder}: the committed inputs do not match the ledger's fingerprint")
    started, t0 = datetime.now(UTC), time.monotonic()
    run(shard.built)
    seconds = time.monotonic() - t0
    names = list(dict.fromkeys(_step_dir(b, prefix) for b in shard.built))
    written = sum(commit_step(b.path(), folder, prefix, shard.whole) for b in shard.built)
    if shard.whole and written > MAX_INPUT_BYTES:
        raise InputError(f"{folder}: the inputs take {written:,} bytes compressed, over {MAX_INPUT_BYTES:,}")
    extra = {
        **where,
        "estimate_s": round(shard.seconds(recipe_column(p))),
        "steps": names,
        "bytes": written,
        "solved": solved(shard),
        **({"fingerprint": fingerprint(folder, names)} if shard.whole else {}),
    }
    for ckpt in shard.checkpoints:  # graded and committed: the 1.6 GB copies go
        shutil.rmtree(ckpt.path(), ignore_errors=True)
    record = entry(name, p.version, seconds, started, extra)
    append_entry(folder, p.version, record)
    return record


def shard_command(argv: list[str], graph_of, recipe: type, presets: dict, ledger: str) -> int | None:
    """`--shards` (print the ledger) or `--shard NAME|next` (run one); None for any other command line."""
    if "--shards" not in argv and "--shard" not in argv:
        return None
    from terminalworld.pipeline.entry import parse_command_line

    rest, name = list(argv), None
    if "--shard" in rest:
        at = rest.index("--shard")
        if at + 1 >= len(rest):
            print("error: --shard needs a shard's name or next", file=sys.stderr)
            return 2
        name = rest[at + 1]
        del rest[at : at + 2]
    rest = [a for a in rest if a != "--shards"]
    _, p = parse_command_line(rest, "shards", recipe=recipe, presets=presets)
    folder, checkout = Path(ledger), Path.cwd()
    try:
        if name is None:
            found = read_ledger(folder)
            graph = graph_of(p, closed_levels(found, p.agent_levels))
            print(ledger_table(graph.shards, found, recipe_column(p), SHARD_BUDGET_S))
            return 0
        record = run_shard(graph_of, p, name, folder, os.environ["MARIN_PREFIX"], checkout)
    except TerminalworldError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(
        f"shard {record['shard']} done in {record['seconds']:.0f} s; commit {folder} (its rows and {folder}/ledger.json)"
    )
    return 0
