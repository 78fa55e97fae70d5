"""The two ways a trajectory becomes chat messages: the agent conversation and the
dedicated-simulator framing. The renderer gives tokens to these messages' contents."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from terminalworld.core.trajectories import Trajectory, extract_command

View = Literal["agent", "sim"]
UNOWNED_KINDS = frozenset({"grounding"})  # messages whose tokens belong to nobody (never trained or scored)

SIM_SYSTEM_PROMPT = (
    "You are a Linux terminal simulator. Given the task context and a bash command run at the "
    "repository root, reply with exactly what the terminal prints, and nothing else."
)


@dataclass(frozen=True)
class Message:
    """One chat message as given to the template, and what it is in the trajectory."""

    role: str  # system | user | assistant, as given to the template
    content: str
    kind: str  # system | task | action | observation | command | grounding
    turn: int | None = None  # index into Trajectory.turns for action/observation/command messages


def _grounding(grounding: Mapping[int, str] | None, turn: int) -> list[Message]:
    """The grounding block of `turn`, a user message owned by nobody (`UNOWNED_KINDS`)."""
    block = (grounding or {}).get(turn)
    return [] if block is None else [Message("user", block, "grounding", turn)]


def agent_messages(traj: Trajectory, grounding: Mapping[int, str] | None = None) -> list[Message]:
    """The agent conversation: system, task, then each action and its observation (a turn's
    grounding block, when given, between them)."""
    out = [] if traj.system is None else [Message("system", traj.system, "system")]
    out.append(Message("user", traj.task, "task"))
    for i, t in enumerate(traj.turns):
        out.append(Message("assistant", t.action, "action", i))
        out += _grounding(grounding, i)
        if t.observation is not None:
            out.append(Message("user", t.observation, "observation", i))
    return out


def sim_messages(
    traj: Trajectory, system_prompt: str = SIM_SYSTEM_PROMPT, grounding: Mapping[int, str] | None = None
) -> list[Message]:
    """The write-up's dedicated-simulator framing: the command in the user turn (the first one also
    carries the task), the observation as the assistant reply; a turn's grounding block, when given,
    is a user message just before its command. Unanswered actions are dropped."""
    out = [Message("system", system_prompt, "system")]
    for i, t in enumerate(traj.turns):
        if t.observation is None:
            continue
        cmd = extract_command(t.action) or t.action
        first = not any(m.kind == "command" for m in out)
        text = f"Task context:\n{traj.task}\n\nCommand:\n{cmd}" if first else f"Command:\n{cmd}"
        out += _grounding(grounding, i)
        out.append(Message("user", text, "command", i))
        out.append(Message("assistant", t.observation, "observation", i))
    return out


def view_messages(
    traj: Trajectory, view: View, sim_prompt: str = SIM_SYSTEM_PROMPT, grounding: Mapping[int, str] | None = None
) -> list[Message]:
    """The messages of `traj` under `view` (the agent conversation or the simulator framing), with
    the grounding blocks of the turns `grounding` names."""
    if view == "agent":
        return agent_messages(traj, grounding)
    return sim_messages(traj, sim_prompt, grounding)
