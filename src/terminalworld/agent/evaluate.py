"""`terminalworld agent-eval`: grade an agent on Harbor-format tasks with real Harbor.

The agent is Harbor's `oracle` (runs each task's solution) or `nop` (does nothing), or the
project's SWE-ZERO agent (`agent.harbor.agent`) driven by a model: in process (`--model`, served on
loopback by `serve`), behind an OpenAI-compatible endpoint (`--endpoint`, e.g. vLLM), or by a
script of replies (`--replies`); or Harbor's Terminus-2 against an endpoint (Terminal-Bench's
harness). Harbor runs in its own environment (`runtime`); commands run in the project's sandbox
(`harbor.environment`) or, in production, in Daytona. Tasks are a local folder or a Harbor registry
dataset (`registry:NAME@VERSION`).

Output folder: `jobs/` (Harbor's job: one folder per trial, resumable: a rerun keeps every trial
that has a result), `trials.jsonl` (one row per trial, with the steps of a fix it reached:
`agent.process`), `summary.json` (pass@1 ± stderr, pass@k, the rate of each step of a fix,
counts, errors) and `harbor_result.json` (Marin's field names); in the simulated environment also
`closed_loop.jsonl`, written by the function the caller passes (`sim.harbor_loop.write_closed_loop`:
the simulator's stage sits above this one, so the command line, which owns both, hands it in). The
command line and the steps both call `agent_eval`. A trial that crashes is that trial's error; the
others keep their results.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from terminalworld.agent import results
from terminalworld.agent.harbor import runtime
from terminalworld.agent.harness import HarnessConfig
from terminalworld.core.paths import check_outputs
from terminalworld.core.precision import Precision
from terminalworld.core.records import atomic_jsonl, dumps_row, write_json
from terminalworld.env.sandbox import bwrap_path, check_available
from terminalworld.errors import InputError, StepFailed
from terminalworld.grounding.modes import GroundingMode
from terminalworld.options import above, at_least, option

JOB_NAME = "agent-eval"
SANDBOX_ENVIRONMENT = "terminalworld.agent.harbor.environment:SandboxEnvironment"
SIMULATED_ENVIRONMENT = "terminalworld.sim.harbor_environment:SimulatedEnvironment"
SWE_ZERO_AGENT = "terminalworld.agent.harbor.agent:SweZeroAgent"

# Summarises a finished simulated job: (Harbor's job folder, the output folder, the grounding mode)
# -> the summary's `closed_loop`, having written `closed_loop.jsonl`.
ClosedLoop = Callable[[Path, Path, str], dict[str, Any]]


@dataclass(frozen=True)
class AgentEvalConfig:
    """An agent evaluation: the tasks, the agent, its limits, attempts and concurrency."""

    tasks: str = option(help="folder of Harbor-format task folders")
    out: str = option(help="output folder (resumable)")
    agent: Literal["oracle", "nop", "model", "scripted", "terminus-2"] = option("model")
    model: str | None = option(None, help="checkpoint folder, GGUF file or asset name (--agent model)")
    endpoint: str | None = option(None, help="OpenAI-compatible base URL serving the model, instead of --model")
    served_model: str = option("model", help="the model's name at --endpoint")
    environment: Literal["sandbox", "daytona", "simulated"] = option(
        "sandbox",
        help="where commands run (daytona: DAYTONA_API_KEY; simulated: a simulator answers, the sandbox shadows)",
    )
    simulator: str | None = option(None, help="checkpoint answering the agent's commands (--environment simulated)")
    simulator_endpoint: str | None = option(None, help="OpenAI-compatible URL serving the simulator, instead")
    simulator_tokens: int = option(1024, help="the simulator's cap per output")
    grounding: GroundingMode = option("none", help="simulated: none, retrieved, replayed or hybrid (grounding.modes)")
    grounding_budget: int = option(2048, help="simulated: tokens of the grounding block")
    replies: str | None = option(None, help="JSON {task or '*': [reply, ...]} (--agent scripted)")
    n_attempts: int = option(1)
    n_concurrent: int = option(2, help="trials in parallel")
    max_turns: int = option(30)
    context_tokens: int = option(32768)
    max_tokens_per_turn: int = option(2048)
    temperature: float = option(0.0)
    seed: int = option(0)
    command_timeout_s: float = option(60.0, flag="--command-timeout", help="per agent command, seconds")
    dtype: Precision = option("auto", help="the served model's precision; auto: bfloat16 where native and agreeing")

    def __post_init__(self) -> None:
        at_least(self, simulator_tokens=1, grounding_budget=1, n_attempts=1, n_concurrent=1, max_turns=1)
        at_least(self, context_tokens=1, max_tokens_per_turn=1, temperature=0, seed=0)
        above(self, command_timeout_s=0)

    def check_paths(self) -> None:
        """Refuse, before any work, outputs that cannot be written or that touch an input."""
        check_outputs([("--out", self.out, "dir", ())], [("--tasks", self.tasks)])


def _task_names(tasks: Path) -> list[str]:
    names = sorted(p.name for p in tasks.iterdir() if (p / "task.toml").is_file() and (p / "environment").is_dir())
    if not names:
        raise InputError(f"--tasks {tasks}: no Harbor task folder (task.toml and environment/) inside")
    return names


def _harness(cfg: AgentEvalConfig) -> dict[str, Any]:
    fields = HarnessConfig.__dataclass_fields__
    return {k: v for k, v in asdict(cfg).items() if k in fields}


def job_spec(cfg: AgentEvalConfig, *, out: Path, endpoint: dict[str, Any], bwrap: str | None) -> dict[str, Any]:
    """The Harbor job `harbor.job` runs: Harbor's environment, agent and dataset config sections."""
    if cfg.environment == "sandbox":
        environment = {"import_path": SANDBOX_ENVIRONMENT, "kwargs": {"bwrap": bwrap}}
    elif cfg.environment == "simulated":
        kwargs = {"bwrap": bwrap, **endpoint.pop("simulator"), "max_tokens": cfg.simulator_tokens}
        kwargs |= {"grounding": cfg.grounding, "grounding_budget": cfg.grounding_budget}
        environment = {"import_path": SIMULATED_ENVIRONMENT, "kwargs": kwargs}
    else:  # Harbor's Daytona backend builds each task's Dockerfile remotely
        environment = {"type": "daytona", "force_build": True, "kwargs": {"auto_snapshot": True}}
    if cfg.agent in ("oracle", "nop"):
        agent: dict[str, Any] = {"name": cfg.agent}
    elif cfg.agent == "terminus-2":
        kwargs = {"api_base": endpoint["api_base"], "temperature": cfg.temperature, "max_turns": cfg.max_turns}
        kwargs |= {"record_terminal_session": False, "model_info": {"max_input_tokens": cfg.context_tokens}}
        agent = {"name": "terminus-2", "model_name": f"hosted_vllm/{endpoint['served_model']}", "kwargs": kwargs}
    else:
        kwargs = {**_harness(cfg), "command_timeout_s": cfg.command_timeout_s, **endpoint}
        agent = {"import_path": SWE_ZERO_AGENT, "kwargs": kwargs}
    if cfg.tasks.startswith("registry:"):
        name, _, version = cfg.tasks.removeprefix("registry:").partition("@")
        dataset = {"name": name, "version": version or None}
    else:
        dataset = {"path": str(Path(cfg.tasks).resolve())}
    return {
        "job_name": JOB_NAME,
        "jobs_dir": str(out / "jobs"),
        "environment": environment,
        "agent": agent,
        "dataset": dataset,
        "n_attempts": cfg.n_attempts,
        "n_concurrent": cfg.n_concurrent,
    }


@contextlib.contextmanager
def _endpoint(cfg: AgentEvalConfig):
    """The agent kwargs that reach the model: a given endpoint, a loopback server over `--model`,
    a script, or none."""
    if cfg.agent in ("model", "terminus-2") and cfg.endpoint:
        yield {"api_base": cfg.endpoint, "served_model": cfg.served_model}
    elif cfg.agent == "model":
        if not cfg.model:
            raise InputError("--agent model needs --model or --endpoint")
        from terminalworld.agent.serve import GATHER_WINDOW_S, MAX_BATCH, ChatModel, serving

        # A batch waits for the job's concurrent trials, which reach the server a command apart (one
        # trial at a time gathers 1, which never waits).
        chat = ChatModel(
            cfg.model,
            context_tokens=cfg.context_tokens,
            dtype=cfg.dtype,
            gather=min(cfg.n_concurrent, MAX_BATCH),
            window_s=GATHER_WINDOW_S,
        )
        with serving(chat) as url:
            yield {"api_base": url, "served_model": Path(cfg.model).name}
        # What this attempt of the step cost the server: its batches and the prompt tokens it reused.
        write_json(str(Path(cfg.out).resolve() / "serving.json"), chat.stats())
    elif cfg.agent == "terminus-2":
        raise InputError("--agent terminus-2 needs --endpoint (an OpenAI-compatible server)")
    elif cfg.agent == "scripted":
        if not cfg.replies or not Path(cfg.replies).is_file():
            raise InputError("--agent scripted needs --replies FILE")
        yield {"replies": str(Path(cfg.replies).resolve())}
    else:
        yield {}


@contextlib.contextmanager
def _simulator(cfg: AgentEvalConfig):
    """The simulated environment's endpoint: a given one, or a loopback server over `--simulator`."""
    if cfg.environment != "simulated":
        yield {}
    elif cfg.simulator_endpoint:
        yield {"simulator": {"simulator_api": cfg.simulator_endpoint, "simulator_model": "simulator"}}
    elif cfg.simulator:
        from terminalworld.agent.serve import ChatModel, serving

        chat = ChatModel(cfg.simulator, context_tokens=cfg.context_tokens, dtype=cfg.dtype)
        # The environment counts grounding and observation tokens with the simulator's own tokenizer.
        tokenizer = Path(cfg.out).resolve() / "simulator-tokenizer.json"
        tokenizer.parent.mkdir(parents=True, exist_ok=True)
        chat.tokenizer.backend_tokenizer.save(f"{tokenizer}.tmp")
        os.replace(f"{tokenizer}.tmp", tokenizer)
        with serving(chat) as url:
            served = {"simulator_api": url, "simulator_model": Path(cfg.simulator).name}
            yield {"simulator": {**served, "simulator_tokenizer": str(tokenizer)}}
    else:
        raise InputError("--environment simulated needs --simulator or --simulator-endpoint")


def agent_eval(cfg: AgentEvalConfig, closed_loop: ClosedLoop | None = None) -> dict[str, Any]:
    """Run (or resume) the Harbor job and write trial rows and the summaries; returns the summary.
    A simulated job needs `closed_loop` (`sim.harbor_loop.write_closed_loop`) to summarise it."""
    if cfg.environment != "simulated" and cfg.grounding != "none":
        # Only a simulator reads a grounding block: elsewhere the flag would be silently ignored.
        raise InputError(f"--grounding {cfg.grounding} needs --environment simulated (got {cfg.environment})")
    if cfg.environment == "simulated" and closed_loop is None:
        raise TypeError("agent_eval: a simulated job needs closed_loop (sim.harbor_loop.write_closed_loop)")
    local = not cfg.tasks.startswith("registry:")
    if local and not Path(cfg.tasks).is_dir():
        raise InputError(f"--tasks {cfg.tasks}: not a folder")
    n_tasks = len(_task_names(Path(cfg.tasks))) if local else None
    bwrap = None
    if cfg.environment in ("sandbox", "simulated"):
        check_available()
        bwrap = bwrap_path()
    out = Path(cfg.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    python = runtime.harbor_python()
    served = (cfg.agent == "model" and not cfg.endpoint) + (
        cfg.environment == "simulated" and cfg.simulator is not None and not cfg.simulator_endpoint
    )
    if served:  # each model served here batches on its own thread: they split the cores
        from terminalworld.core.threads import set_threads

        set_threads(sharing=served)
    with _endpoint(cfg) as endpoint, _simulator(cfg) as simulator:
        spec = job_spec(cfg, out=out, endpoint={**endpoint, **simulator}, bwrap=bwrap)
        # The loopback port changes between runs; Harbor resumes only an identical config.
        _forget_endpoint(out / "jobs" / JOB_NAME, endpoint)
        write_json(str(out / "job_spec.json"), spec)
        log = out / "harbor.log"
        with open(log, "w") as f:
            proc = subprocess.run(
                [python, "-m", "terminalworld.agent.harbor.job", str(out / "job_spec.json")],
                env=runtime.harbor_env(),
                stdout=f,
                stderr=subprocess.STDOUT,
            )
    if proc.returncode != 0:
        tail = log.read_text()[-1500:]
        raise StepFailed(f"Harbor's job failed (exit {proc.returncode}); see {log}:\n{tail}")
    job = out / "jobs" / JOB_NAME
    rows = results.read_trials(job, agent=cfg.agent, tasks=Path(cfg.tasks) if local else None)
    if n_tasks is None:  # a registry dataset: Harbor's job result counts its trials
        n_tasks = json.loads((job / "result.json").read_text())["n_total_trials"] // cfg.n_attempts
    summary = results.summarize(rows, n_attempts=cfg.n_attempts, n_tasks=n_tasks, dataset=cfg.tasks)
    summary["agent"] = {"model": f"model:{cfg.model or cfg.endpoint}"}.get(cfg.agent, cfg.agent)
    # Only a simulated environment reads a grounding block: its rows and summary say which.
    simulated = {"grounding": cfg.grounding} if cfg.environment == "simulated" else {}
    summary |= simulated
    with atomic_jsonl(str(out / "trials.jsonl")) as f:
        for row in rows:
            f.write(dumps_row({**row, **simulated}))
    if closed_loop is not None and simulated:  # `closed_loop.jsonl`, summarised under `closed_loop`
        summary["closed_loop"] = closed_loop(job, out, cfg.grounding)
    write_json(str(out / "summary.json"), summary)
    write_json(str(out / "harbor_result.json"), results.harbor_result(summary))
    return summary


def _forget_endpoint(job_dir: Path, endpoint: dict[str, Any]) -> None:
    """Let Harbor resume a job whose only change is the loopback endpoint's port: rewrite the
    recorded config's `api_base` to this run's before Harbor compares them."""
    path = job_dir / "config.json"
    if "api_base" not in endpoint or not path.is_file():
        return
    text = json.loads(path.read_text())
    for agent in text.get("agents", []):
        if "api_base" in (agent.get("kwargs") or {}):
            agent["kwargs"]["api_base"] = endpoint["api_base"]
    path.write_text(json.dumps(text, indent=4))
