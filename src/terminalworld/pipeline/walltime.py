"""Every attempt at a step, timed in its output folder, so a run stopped and resumed many times still
has a true wall time per step and per stage (the pilot's page and the README quote them).

`attempt(out)` keeps `{out}/.wall/<start>-<pid>.json` (when it started, its seconds so far, and
`running`, `done` or `failed`), rewritten when it starts, every `BEAT` seconds and when it ends: an
attempt killed without warning keeps its last beat, so at most `BEAT` seconds of it go uncounted.
A beat that comes more than `STOP_AFTER` seconds (and two beats) after the last means the process
was stopped (SIGSTOP, a suspended machine) rather than working: all but one beat of that gap is
left out of its seconds and kept apart as `stopped`, so pausing a run does not lengthen its steps.
Each record also keeps the mean 1-minute load average over its beats (`load`, beside `cpus`), so a
step slowed by a shared machine says so.
`run_walltimes` gathers one run's attempts (a prefix and a version) into a row per step;
`terminalworld walltime --prefix P --version V` prints them while the run goes on.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from terminalworld.errors import InputError
from terminalworld.options import option

WALL_DIR = ".wall"
BEAT = 60.0
STOP_AFTER = 30.0  # seconds between beats past which it was a stop (a busy machine delays a wakeup by seconds)
STATES = ("running", "done", "failed")

# A step's stage, by the first part of its name (the plan's stage words); the rest make the data.
STAGE_OF = {"checkpoints": "sft", "probe-eval": "score", "agent-eval": "agent", "sim-eval": "sim"}
REPORT_STEPS = ("terminalworld/reports/", "terminalworld/hf-eval-sets")
STAGES = ("record", "sft", "score", "agent", "sim", "report")
MAX_STEP_DEPTH = 4  # parts of a step's name at most (`checkpoints/terminalworld/rl/{arm}`)


def stage_of(step: str) -> str:
    """The stage a step's name belongs to: sft, score, agent, sim, report, or record (the data)."""
    if step.startswith(REPORT_STEPS):
        return "report"
    return STAGE_OF.get(step.split("/", 1)[0], "record")


@contextlib.contextmanager
def attempt(out: str, beat: float = BEAT, stop_after: float = STOP_AFTER) -> Iterator[None]:
    """Time one attempt at the step whose output folder is `out` (see the module's docstring)."""
    from terminalworld.core.records import write_json

    started = datetime.now(UTC)
    t0 = time.monotonic()
    path = posixpath.join(out.rstrip("/"), WALL_DIR, f"{started:%Y%m%dT%H%M%S%f}-{os.getpid()}.json")
    clock = {"last": t0, "stopped": 0.0}
    loads: list[float] = []  # the 1-minute load average at each beat: was the machine shared?
    lock = threading.Lock()

    def write(state: str) -> None:
        with lock:
            now = time.monotonic()
            if (gap := now - clock["last"]) > max(2 * beat, stop_after):  # stopped: count one beat of it
                clock["stopped"] += gap - beat
            clock["last"] = now
            record = {
                "started": started.isoformat(timespec="seconds"),
                "seconds": round(now - t0 - clock["stopped"], 1),
                "state": state,
            }
            if clock["stopped"]:
                record["stopped"] = round(clock["stopped"], 1)
            with contextlib.suppress(OSError):
                loads.append(os.getloadavg()[0])
                record |= {"load": round(sum(loads) / len(loads), 2), "cpus": os.cpu_count()}
        write_json(path, record)

    stop = threading.Event()

    def beats() -> None:
        while not stop.wait(beat):
            with contextlib.suppress(OSError):  # a missed beat costs at most one beat of the count
                write("running")

    write("running")
    thread = threading.Thread(target=beats, name="walltime", daemon=True)
    thread.start()
    state = "failed"
    try:
        yield
        state = "done"
    finally:
        stop.set()
        thread.join()
        write(state)


def read_attempt(path: str, text: str) -> dict[str, Any]:
    """One attempt's record, checked: a file that is not one is an error naming it."""
    try:
        record = json.loads(text)
        ok = (
            isinstance(record, dict)
            and isinstance(record.get("started"), str)
            and isinstance(record.get("seconds"), int | float)
            and record["seconds"] >= 0
            and record.get("state") in STATES
        )
    except json.JSONDecodeError:
        ok = False
    if not ok:
        raise InputError(f"{path}: not a step attempt's record (started, seconds >= 0, state in {STATES})")
    return record


def run_walltimes(prefix: str, version: str) -> list[dict[str, Any]]:
    """One row per step of the run `version` under `prefix` that has timed attempts: its name,
    stage, number of attempts, seconds summed over them, and whether its last attempt finished."""
    from fsspec.core import url_to_fs

    fs, root = url_to_fs(prefix)
    root = root.rstrip("/")
    attempts: dict[str, list[dict[str, Any]]] = {}
    # One glob per name depth, not `**`: on gs:// a recursive glob would list every checkpoint shard.
    patterns = [f"{root}/{'*/' * depth}{version}/{WALL_DIR}/*.json" for depth in range(1, MAX_STEP_DEPTH + 1)]
    for path in sorted(p for pattern in patterns for p in fs.glob(pattern)):
        step = posixpath.relpath(path, root).rsplit(f"/{version}/{WALL_DIR}/", 1)[0]
        attempts.setdefault(step, []).append(read_attempt(path, fs.cat_file(path).decode()))
    rows = []
    for step, records in sorted(attempts.items()):
        records.sort(key=lambda r: r["started"])
        row = {
            "step": step,
            "stage": stage_of(step),
            "attempts": len(records),
            "seconds": round(sum(r["seconds"] for r in records), 1),
            "finished": records[-1]["state"] == "done",
        }
        if load := mean_load(records):
            row["load"] = load
        rows.append(row)
    return rows


def mean_load(records: list[dict[str, Any]]) -> float | None:
    """The load average over the records that kept one, weighted by their seconds (None if none did)."""
    kept = [(r["seconds"], r["load"]) for r in records if isinstance(r.get("load"), int | float) and r["seconds"] > 0]
    total = sum(s for s, _ in kept)
    return round(sum(s * x for s, x in kept) / total, 2) if total else None


def stage_walltimes(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Seconds per stage over `run_walltimes` rows, as rows in the pipeline's order (`STAGES`; a
    list, so the order survives JSON written with sorted keys)."""
    out = []
    for stage in STAGES:
        mine = [r for r in rows if r["stage"] == stage]
        if mine:
            row = {"stage": stage, "seconds": total_seconds(mine)}
            if load := mean_load(mine):
                row["load"] = load
            out.append(row)
    return out


def total_seconds(rows: list[dict[str, Any]]) -> float:
    """The seconds of `rows` (steps or stages) together: a run's wall time."""
    return round(sum(r["seconds"] for r in rows), 1)


def run_of(out: str, step: str) -> tuple[str, str]:
    """(prefix, version) of the output folder `out` of the step named `step` (`{prefix}/{step}/{version}`)."""
    parent, _, version = out.rstrip("/").rpartition("/")
    if not parent.endswith("/" + step):
        raise ValueError(f"{out} is not an output folder of {step}")
    return parent[: -len(step) - 1], version


@dataclass(frozen=True)
class WalltimeConfig:
    """A run's wall time so far: each step's attempts and seconds, and the sum per stage."""

    prefix: str = option(help="the run's MARIN_PREFIX (a folder or gs:// URL)")
    version: str = option(help="the run's version, e.g. 2026.12.06.2")


def print_walltimes(cfg: WalltimeConfig) -> int:
    """Print one line per timed step of the run, then each stage's total; 2 when nothing was timed."""
    from terminalworld.pipeline.cost import hours

    rows = run_walltimes(cfg.prefix, cfg.version)
    if not rows:
        raise InputError(f"{cfg.prefix}: no timed step of version {cfg.version} (no {WALL_DIR}/ records)")
    width = max(len(r["step"]) for r in rows) + 2
    for r in rows:
        state = "done" if r["finished"] else "not finished"
        load = f"load {r['load']:.1f}" if "load" in r else ""
        print(
            f"{r['step']:<{width}}{r['stage']:<8}{r['attempts']:>3} attempts {hours(r['seconds']):>9}  {load:<9} {state}"
        )
    stages = stage_walltimes(rows)
    total = hours(total_seconds(stages))
    print("\n" + "  ".join(f"{s['stage']} {hours(s['seconds'])}" for s in stages) + f"  total {total}")
    return 0
