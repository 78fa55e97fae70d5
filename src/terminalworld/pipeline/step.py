"""How a stage becomes a Marin step, and the typed artifacts the stages' builders return.

A builder (in each stage's `steps` module) returns Marin's `ArtifactStep` through `config_step`:
its run is the stage's own function and its config the stage's own config, built from the step's
context (`ctx.output_path`, and `Built.at(ctx, relpath)` for what it reads from an artifact it
depends on). Marin addresses the artifact as `{prefix}/{name}/{version}` and fingerprints the
config with each dependency as `name@version`; resources travel with the step as Marin's
`RemoteCallable` run, which Marin keeps out of the fingerprint. Locally (`resources=None`) a step
runs in the driver's process.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

# Written into a failing step's output folder: the full traceback of its failure.
FAILURE_LOG = "failure.log"


def config_step[C](
    name: str,
    run: Callable[[C], Any],
    config: Callable[[Any], C],
    *,
    version: str,
    deps: Sequence[Any],
    resources: Any = None,
    local: str | None = None,
):
    """Marin's `ArtifactStep` running the stage's own function on the stage's own config:
    `run(config(ctx))`, where `config` builds it from the context (`ctx.output_path`, and
    `Built.at(ctx, ...)` for the artifacts it reads, each of which is in `deps`, typed artifacts or
    steps). With `local`, the config field holding a path inside the output folder: the function
    writes in a local copy of the folder (`local_copy`), so a rows file resumes on gs:// too. A
    failure leaves its traceback in `{output}/failure.log`."""
    from marin.execution.artifact import Artifact
    from marin.execution.lazy import ArtifactStep

    steps = tuple(dict.fromkeys(getattr(d, "step", d) for d in deps if d is not None and not isinstance(d, str)))
    handle = ArtifactStep(
        name=name,
        version=version,
        artifact_type=Artifact,
        run=_Run(run, name, version, local),
        build_config=config,
        deps=steps,
    )
    if resources is None:
        return handle
    from marin.execution.remote import remote

    return replace(handle, run=remote(handle.run, resources=resources, name=name))


@dataclass(frozen=True)
class _Run:
    """A step's run: the stage's function on its config, in a local copy of the output folder when
    asked, its failure's traceback kept."""

    fn: Callable[[Any], Any]
    name: str
    version: str
    local: str | None

    def __call__(self, config: Any) -> None:
        from marin.execution.lazy import marin_prefix, prefix_join

        from terminalworld.pipeline.walltime import attempt

        out = prefix_join(marin_prefix(), f"{self.name}/{self.version}")
        try:
            with attempt(out):  # the step's wall time over all its attempts (`pipeline.walltime`)
                if self.local is None:
                    self.fn(config)
                    return
                with local_copy(out) as folder:
                    self.fn(replace(config, **{self.local: _moved(getattr(config, self.local), out, folder)}))
        except BaseException:
            _log_failure(out)
            raise


def _moved(path: str, out: str, folder: str) -> str:
    """`path`, inside the output folder `out`, as the same path inside `folder`."""
    rel = path[len(out) :].strip("/") if path.rstrip("/").startswith(out.rstrip("/")) else None
    if rel is None:
        raise ValueError(f"{path} is not inside the step's output folder {out}")
    return os.path.join(folder, rel) if rel else folder


def _log_failure(out: str) -> None:
    import fsspec

    with fsspec.open(os.path.join(out, FAILURE_LOG), "w") as f:
        f.write(traceback.format_exc())


@contextlib.contextmanager
def local_copy(out: str):
    """A local folder standing for the output folder `out`, so rows appended there survive a kill.

    On a local filesystem it is `out` itself: every row is on disk as it is written, and a run
    killed at any moment (SIGKILL included) leaves them where the rerun resumes them. Elsewhere
    (gs:// in production) it is a temporary copy: what a preempted run left in `out` is brought back
    first, and everything is put back at the end, failure or not, and at SIGTERM/SIGHUP (a preempted
    VM's warning); only a SIGKILL loses what the copy held."""
    from fsspec.core import url_to_fs

    from terminalworld.core import scratch
    from terminalworld.core.records import is_local

    fs, path = url_to_fs(out)
    if is_local(fs):
        os.makedirs(path, exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="tw-step-") as tmp:
        if fs.exists(path):
            fs.get(path.rstrip("/") + "/", tmp + "/", recursive=True)

        def put_back() -> None:
            fs.put(tmp + "/", path.rstrip("/") + "/", recursive=True)

        def at_signal() -> None:  # the signal ends the process before the `with` cleans up
            put_back()
            shutil.rmtree(tmp, ignore_errors=True)

        token = scratch.at_termination(at_signal)
        try:
            yield tmp
        finally:
            scratch.done(token)
            put_back()


def describe_resources(handle: Any) -> str:
    """Where a step runs, for the plan: adopted data, the driver's process, or its Fray resources."""
    from marin.execution.remote import RemoteCallable

    if handle.adopt_source is not None:
        return "adopted (no compute)"
    if not isinstance(handle.run, RemoteCallable):
        return "local process"
    device = getattr(handle.run.resources, "device", None)
    kind = type(device).__name__.replace("Config", "").lower()
    variant = getattr(device, "variant", None)
    text = f"{kind} {variant}" if variant and variant != kind else kind
    count = getattr(device, "count", 1) if kind == "gpu" else 1  # a TPU's variant names its size
    return f"{text} x{count}" if count > 1 else text


def is_cluster_sized(handle: Any) -> bool:
    """Whether a step asks for accelerators (TPU or GPU), so it only makes sense on a cluster."""
    return describe_resources(handle).split(" ")[0] in ("tpu", "gpu")


@dataclass(frozen=True)
class Built:
    """A typed artifact: the Marin step that builds it; `path()` is its folder."""

    step: Any

    def path(self) -> str:
        """The artifact's folder under the current prefix."""
        return self.step.path()

    def at(self, ctx: Any, relpath: str = "") -> str:
        """The artifact's folder (or `relpath` inside it) as a step's context resolves it; the
        step must list this artifact in its deps."""
        folder = ctx.artifact_path(self.step)
        return os.path.join(folder, relpath) if relpath else folder


@dataclass(frozen=True)
class Corpus(Built):
    """A folder of trajectory shards."""


@dataclass(frozen=True)
class Subsets(Built):
    """Nested training subsets."""


@dataclass(frozen=True)
class HeldoutSet(Built):
    """Held-out rows in one file."""

    file: str


@dataclass(frozen=True)
class Tokenized(Built):
    """Rendered and packed rows of one arm, with the tokenizers that made them."""


@dataclass(frozen=True)
class Checkpoint(Built):
    """Levanter checkpoints and the final HF export."""


@dataclass(frozen=True)
class Scores(Built):
    """The probe's scores of one model in one file."""

    file: str
    model_name: str


@dataclass(frozen=True)
class TaskSet(Built):
    """A folder of Harbor-format task folders and its manifest.json."""


@dataclass(frozen=True)
class AgentGrade(Built):
    """One model's agent grade on one benchmark: summary.json, trials.jsonl, harbor_result.json and
    Harbor's job folder."""

    model_name: str


@dataclass(frozen=True)
class ProbeSet(Built):
    """A probe set: its rows and manifest."""


@dataclass(frozen=True)
class SimGrade(Built):
    """One checkpoint's simulator grade at one tier: `sim_eval.jsonl`, its summary last."""

    model_name: str
    tier: int


@dataclass(frozen=True)
class EchoArm(Built):
    """One arm of ECHO's miniature: `arm.json` (its recipe, steps and held-out cross-entropies)."""

    arm: str


@dataclass(frozen=True)
class RlRun(Built):
    """An RL run through SkyRL: its resolved config, checkpoints and HF exports (`exports/`)."""


@dataclass(frozen=True)
class Report(Built):
    """The probe comparison: report.json, report.md, metrics.json and plots."""


@dataclass(frozen=True)
class Site(Built):
    """The built docs site: HTML under `site/`, and `published.json` when it was published."""


Model = str | Checkpoint  # an HF id or folder, or a checkpoint artifact


def model_path(ctx: Any, model: Model | None) -> str | None:
    """A model as a config names it: a checkpoint's HF export resolved in `ctx`, a name as is."""
    from terminalworld.pipeline.artifacts import HF_EXPORT

    return model.at(ctx, HF_EXPORT) if isinstance(model, Checkpoint) else model
