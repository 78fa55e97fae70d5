"""A study that accumulates in the repository, one shard at a time: a shard is a part of a plan that
runs within a budget on the machine at hand, starts from what the repository holds and ends by
committing its rows and an entry in the ledger (`ledger.json` in the study's snapshot folder).

The ledger holds the recipe's version, which every shard of it was made under, and one entry per
finished shard: the commit it ran from, its measured wall time, and the machine's CPU and flags
(timings are compared only within one machine kind). `--shards` prints it beside each shard's
estimate; a shard of another version than the ledger's does not join it.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from terminalworld.core.precision import BF16_FLAGS, cpu_flags
from terminalworld.errors import InputError
from terminalworld.pipeline.cost import Throughput, Work, hours

LEDGER = "ledger.json"
MAX_LEDGER_BYTES = 1 << 20
# The flags that decide how fast these models compute on a CPU, recorded beside every wall time.
SPEED_FLAGS = ("avx2", "avx512f", *BF16_FLAGS)


@dataclass
class Shard:
    """One shard: the artifacts it builds and commits, the checkpoints it drops when they are
    graded, whether its artifacts are committed whole (shared inputs) or as rows, and each step's work."""

    name: str
    built: list[Any] = field(default_factory=list)
    checkpoints: list[Any] = field(default_factory=list)
    whole: bool = False
    costs: dict[str, Work] = field(default_factory=dict)

    def add(self, built: Any, cost: str | None = None, work: Work | None = None) -> Any:
        """`built` joins the shard, with its work under the step name `cost`; returns it."""
        self.built.append(built)
        if cost is not None and work is not None:
            self.costs[cost] = work
        return built

    def extend(self, *built: Any) -> None:
        """Artifacts that join the shard, their work counted elsewhere."""
        self.built.extend(built)

    def train(self, checkpoint: Any, cost: str, work: Work) -> Any:
        """A checkpoint the shard trains, grades and then drops; returns it."""
        self.checkpoints.append(checkpoint)
        return self.add(checkpoint, cost, work)

    def seconds(self, column: Throughput) -> float:
        """The shard's estimate on `column`: its steps' work summed."""
        return sum(w.seconds(column) for w in self.costs.values())


def read_ledger(folder: str | Path) -> dict[str, Any] | None:
    """The ledger in `folder` (none yet: None). Raises `InputError` for one that is not a ledger."""
    path = Path(folder, LEDGER)
    if not path.is_file():
        return None
    if path.stat().st_size > MAX_LEDGER_BYTES:
        raise InputError(f"{path}: over {MAX_LEDGER_BYTES:,} bytes, not a ledger")
    try:
        doc = json.loads(path.read_text())
    except ValueError as e:
        raise InputError(f"{path}: not JSON ({e})") from None
    if not (isinstance(doc, dict) and isinstance(doc.get("version"), str) and isinstance(doc.get("shards"), list)):
        raise InputError(f"{path}: not a ledger (a version and a list of shards)")
    return doc


def check_version(ledger: dict[str, Any] | None, version: str, folder: str | Path) -> None:
    """Refuse a shard whose recipe version is not the ledger's."""
    if ledger is not None and ledger["version"] != version:
        raise InputError(
            f"{Path(folder, LEDGER)} holds version {ledger['version']}, this recipe is {version}: a shard of "
            "another version cannot join it"
        )


def done(ledger: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The finished shards of a ledger, by name."""
    return {e["shard"]: e for e in (ledger or {}).get("shards", []) if isinstance(e, dict) and "shard" in e}


def next_shard(shards: dict[str, Shard], ledger: dict[str, Any] | None) -> str | None:
    """The first shard, in plan order, not in the ledger (none left: None)."""
    finished = done(ledger)
    return next((n for n in shards if n not in finished), None)


def append_entry(folder: str | Path, version: str, entry: dict[str, Any]) -> dict[str, Any]:
    """Add a finished shard's entry to the ledger in `folder` (written whole, replacing the file)."""
    ledger = read_ledger(folder) or {"version": version, "shards": []}
    check_version(ledger, version, folder)
    ledger["shards"] = [e for e in ledger["shards"] if e.get("shard") != entry["shard"]] + [entry]
    Path(folder).mkdir(parents=True, exist_ok=True)
    tmp = Path(folder, LEDGER + ".tmp")
    tmp.write_text(json.dumps(ledger, indent=2) + "\n")
    os.replace(tmp, Path(folder, LEDGER))
    return ledger


def machine() -> dict[str, Any]:
    """This machine as a ledger entry records it: CPU model, cores and the flags that set its speed."""
    flags = cpu_flags()
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f.read(1 << 20).splitlines() if "model name" in ln), "")
    except OSError:
        model = platform.processor()
    return {"cpu": model, "cpus": os.cpu_count(), "flags": [f for f in SPEED_FLAGS if f in flags]}


def commit_of(checkout: str | Path) -> dict[str, Any]:
    """The commit a shard runs from, and whether the checkout had changes beside it."""

    def git(*args: str) -> str:
        out = subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True, timeout=30)
        return out.stdout.strip() if out.returncode == 0 else ""

    return {
        "commit": git("rev-parse", "HEAD") or None,
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
    }


def entry(name: str, version: str, seconds: float, started: datetime, extra: dict[str, Any]) -> dict[str, Any]:
    """A finished shard's ledger entry."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {
        "shard": name,
        "version": version,
        "started": started.isoformat(timespec="seconds"),
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": round(seconds, 1),
        "load_at_end": None if load is None else round(load, 2),
        **machine(),
        **extra,
    }


def ledger_table(shards: dict[str, Shard], ledger: dict[str, Any] | None, column: Throughput, budget_s: float) -> str:
    """Every shard in plan order: its estimate on `column`, within `budget_s` or not, and its state."""
    finished = done(ledger)
    width = max(len(n) for n in shards) + 2
    lines = [f"{'shard'.ljust(width)}{'estimate':>10}  state", "-" * (width + 40)]
    for name, shard in shards.items():
        est = shard.seconds(column)
        over = "" if est <= budget_s else f" (over the {hours(budget_s)} budget)"
        e = finished.get(name)
        state = (
            "pending"
            if e is None
            else f"done: {str(e.get('commit') or '?')[:10]}{'+' if e.get('dirty') else ''}, {e['version']}, "
            f"{hours(e['seconds'])}, {e.get('cpus')} cores, flags {' '.join(e.get('flags') or []) or 'none'}"
        )
        lines.append(f"{name.ljust(width)}{hours(est):>10}  {state}{over}")
    total = sum(s.seconds(column) for s in shards.values())
    version = ledger["version"] if ledger else "none yet"
    lines += [
        "-" * (width + 40),
        f"{len(shards)} shards, {len(finished)} done; estimate {hours(total)} on '{column.name}'; ledger version {version}",
    ]
    return "\n".join(lines)
