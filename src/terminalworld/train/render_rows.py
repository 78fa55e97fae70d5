"""The `render` command: trajectory files to one arm's training rows, written atomically.

Each trajectory is rendered by `core.render.Renderer` (the ownership rule) and becomes
`{instance_id, input_ids, loss_weights}`; an example that cannot be rendered is counted by reason
and named with file and line, and the pass goes on. The tokenize job (`train.tokenize_job`) renders
its shards through the same `rendered_rows`, so its rows are this command's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from terminalworld.core.paths import check_outputs, readable_file
from terminalworld.core.render import Arm, Renderer, build_renderer, training_row
from terminalworld.core.views import View
from terminalworld.errors import InputError, RenderError, TerminalworldError
from terminalworld.grounding.modes import GroundingOptions
from terminalworld.options import at_least, option


@dataclass(frozen=True, kw_only=True)
class RenderOptions:
    """Which trajectories, and how they are rendered: tokenizer, template, view, harness text, length."""

    tokenizer: str = option(help="tokenizer folder, GGUF file, or qwen3 / smollm2")
    inputs: list[str] = option(flag="--in", help="trajectory file or glob; repeat (or comma-separate) for several")
    chat_template: str | None = option(None, help="Jinja chat template file (default: the tokenizer's)")
    max_len: int | None = option(None, help="cut rows after this many tokens")
    exclude_harness_text: bool = option(False, help="harness text owns nothing (ECHO's O')")
    view: View = option("agent", help="sim: the dedicated-simulator framing")

    def renderer(self) -> Renderer:
        """The renderer these options describe."""
        return build_renderer(
            tokenizer=self.tokenizer,
            chat_template=self.chat_template,
            view=self.view,
            exclude_harness_text=self.exclude_harness_text,
            max_len=self.max_len,
        )

    def __post_init__(self) -> None:
        at_least(self, max_len=1)

    def check_files(self) -> None:
        """Refuse, before any work, a tokenizer that does not load or a template that does not
        compile (the tokenizer is cached, so the command does not load it twice)."""
        from terminalworld.core.assets import load_tokenizer, read_chat_template

        try:
            load_tokenizer(self.tokenizer)
        except (ValueError, TerminalworldError) as e:
            raise InputError(f"--tokenizer {self.tokenizer}: {e}") from None
        if self.chat_template is not None:
            readable_file("--chat-template", self.chat_template)
            try:
                read_chat_template(self.chat_template)
            except (ValueError, TerminalworldError) as e:
                raise InputError(f"--chat-template {self.chat_template}: {e}") from None


@dataclass(frozen=True, kw_only=True)
class RenderConfig(RenderOptions, GroundingOptions):
    """One arm of training rows from trajectory files; with `--grounding`, every turn of the view
    has its grounding block (owned by nobody), so a grounded simulator can be trained on them."""

    out: str = option(help=".jsonl, .jsonl.gz or .parquet")
    arm: Arm = option(help="assistant (a), full (b) or user (c)")

    def __post_init__(self) -> None:
        RenderOptions.__post_init__(self)
        GroundingOptions.__post_init__(self)

    def check_paths(self) -> None:
        """Refuse, before any work, outputs that cannot be written or that touch an input."""
        self.check_files()
        check_outputs(
            [("--out", self.out, "file", ())],
            [
                ("--tokenizer", self.tokenizer),
                *[("--in", p) for p in self.inputs],
                ("--chat-template", self.chat_template),
                *self.grounding_inputs(),
            ],
        )


MAX_NAMED_FAILURES = 100


@dataclass
class RenderStats:
    """Counts of one rendering pass: examples written, their tokens, trained tokens and truncation,
    and the examples that failed, by reason, with the first MAX_NAMED_FAILURES named."""

    examples: int = 0
    tokens: int = 0
    trained_tokens: int = 0
    truncated_examples: int = 0
    truncated_tokens: int = 0
    split_examples: int = 0  # rows longer than the window, split into pieces (`split_row`)
    split_pieces: int = 0  # the pieces they became
    failed: dict[str, int] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)

    def fail(self, file: str, line: int, instance_id: str | None, reason: str, detail: str) -> None:
        """Count a failed example under `reason`, naming it while there is room."""
        self.failed[reason] = self.failed.get(reason, 0) + 1
        if len(self.failures) < MAX_NAMED_FAILURES:
            self.failures.append(
                {"file": file, "line": line, "instance_id": instance_id, "reason": reason, "detail": detail}
            )

    def add(self, other: RenderStats) -> None:
        """Fold in the stats of a later part of the same pass (failures stay in input order)."""
        names = ("examples", "tokens", "trained_tokens", "truncated_examples", "truncated_tokens")
        for name in (*names, "split_examples", "split_pieces"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for reason, n in other.failed.items():
            self.failed[reason] = self.failed.get(reason, 0) + n
        self.failures = (self.failures + other.failures)[:MAX_NAMED_FAILURES]


def rendered_rows(items, renderer: Renderer, arm: Arm, stats: RenderStats, grounder=None) -> Iterator[dict[str, Any]]:
    """The training row of each trajectory of `items` (`iter_trajectories` output), in order; with
    a grounder (`grounding.modes.Grounder`), every turn has its grounding block.

    An example that cannot be rendered (a malformed record, a template that rewrites a message, a
    repository no grounding source holds) is counted in `stats` by reason and named with file and
    line, and the pass goes on: one bad example among millions must not stop a training set, nor
    vanish from its stats."""
    from terminalworld.core.records import BadLine

    for item in items:
        if isinstance(item, BadLine):
            stats.fail(item.file, item.line, None, "malformed record", item.reason)
            continue
        rec, traj = item
        try:
            grounding = grounder.blocks(traj) if grounder is not None else None
        except InputError as e:
            stats.fail(rec.file, rec.line, traj.instance_id, "no grounding source", str(e))
            continue
        try:
            r = renderer.render(traj, grounding)
        except RenderError as e:
            stats.fail(rec.file, rec.line, traj.instance_id, "template rewrites a message", str(e))
            continue
        row = training_row(r, arm)
        stats.examples += 1
        stats.tokens += len(row["input_ids"])
        stats.trained_tokens += sum(row["loss_weights"])
        stats.truncated_examples += r.truncated_tokens > 0
        stats.truncated_tokens += r.truncated_tokens
        yield row


def split_row(row: dict[str, Any], max_len: int, stats: RenderStats | None = None) -> list[dict[str, Any]]:
    """A training row as consecutive pieces of at most `max_len` tokens, in order, each with its own
    tokens' loss weights (the rule for a trajectory longer than the trained window: split, never cut,
    so every token is trained on in some piece; a later piece starts mid-conversation). A row that
    fits is returned whole; `stats` counts the rows split and the pieces they became."""
    ids, w = row["input_ids"], row["loss_weights"]
    if len(ids) <= max_len:
        return [row]
    pieces = [
        {
            **row,
            "instance_id": f"{row['instance_id']}#{k}",
            "input_ids": ids[i : i + max_len],
            "loss_weights": w[i : i + max_len],
        }
        for k, i in enumerate(range(0, len(ids), max_len))
    ]
    if stats is not None:
        stats.split_examples += 1
        stats.split_pieces += len(pieces)
    return pieces


def render_file(cfg: RenderConfig) -> dict[str, Any]:
    """One training row per renderable input trajectory, in input order, written atomically; the
    stats count and name every example that failed (see `rendered_rows`)."""
    from dataclasses import asdict

    from tqdm import tqdm

    from terminalworld.core.formats import iter_trajectories

    stats = RenderStats()
    items = tqdm(iter_trajectories(cfg.inputs), desc=f"render {cfg.arm}", unit="traj")
    renderer = cfg.renderer()
    grounder = None
    if cfg.grounding != "none":
        from terminalworld.grounding.modes import Grounder

        grounder = Grounder(cfg, renderer.tokenizer)
    with row_writer(cfg.out) as write:
        for row in rendered_rows(items, renderer, cfg.arm, stats, grounder):
            write(row)
        if not stats.examples and stats.failures:  # nothing rendered: no empty output passed off as a result
            first = stats.failures[0]
            raise InputError(
                f"{first['file']}:{first['line']}: no trajectory rendered, {sum(stats.failed.values())} failed "
                f"(first: {first['reason']}: {first['detail']})"
            )
    return {"out": cfg.out, "arm": cfg.arm, "grounding": cfg.grounding, **asdict(stats)}


@contextlib.contextmanager
def row_writer(path: str):
    """A `write(row)` callable streaming rows to JSON Lines (optionally .gz) or parquet, atomically."""
    from terminalworld.core.records import atomic_jsonl, atomic_output, dumps_row

    if not path.endswith(".parquet"):
        with atomic_jsonl(path) as f:
            yield lambda row: f.write(dumps_row(row))
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [("instance_id", pa.string()), ("input_ids", pa.list_(pa.int32())), ("loss_weights", pa.list_(pa.int8()))]
    )
    batch: list[dict[str, Any]] = []
    with atomic_output(path) as f, pq.ParquetWriter(f, schema) as writer:

        def write(row: dict[str, Any]) -> None:
            batch.append(row)
            if len(batch) == 256:
                writer.write_table(pa.Table.from_pylist(batch, schema))
                batch.clear()

        yield write
        if batch:
            writer.write_table(pa.Table.from_pylist(batch, schema))
