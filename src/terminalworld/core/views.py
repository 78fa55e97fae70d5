"""The two ways a trajectory becomes chat messages: the agent conversation and the
dedicated-simulator framing. The renderer gives tokens to these messages' contents."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from terminalworld.core.trajectories import Trajectory, extract_command

View = Literal["agent", "sim"]

SIM_SYSTEM_PROMPT = (
    "You are a Linux terminal simulator. Given the task context and a bash command run at the "
    "repository root, reply with exactly what the terminal prints, and nothing else."
)


@dataclass(frozen=True)
class Message:
    """One chat message as given to the template, and what it is in the trajectory."""

    role: str  # system | user | assistant, as given to the template
    content: str
    kind: str  # system | task | action | observation | command
    turn: int | None = None  # index into Trajectory.turns for action/observation/command messages


def agent_messages(traj: Trajectory) -> list[Message]:
    """The agent conversation: system, task, then each action and its observation."""
    out = [] if traj.system is None else [Message("system", traj.system, "system")]
    out.append(Message("user", traj.task, "task"))
    for i, t in enumerate(traj.turns):
        out.append(Message("assistant", t.action, "action", i))
        if t.observation is not None:
            out.append(Message("user", t.observation, "observation", i))
    return out


def sim_messages(traj: Trajectory, system_prompt: str = SIM_SYSTEM_PROMPT) -> list[Message]:
    """The write-up's dedicated-simulator framing: the command in the user turn (the first one also
    carries the task), the observation as the assistant reply. Unanswered actions are dropped."""
    out = [Message("system", system_prompt, "system")]
    for i, t in enumerate(traj.turns):
        if t.observation is None:
            continue
        cmd = extract_command(t.action) or t.action
        text = f"Task context:\n{traj.task}\n\nCommand:\n{cmd}" if len(out) == 1 else f"Command:\n{cmd}"
        out.append(Message("user", text, "command", i))
        out.append(Message("assistant", t.observation, "observation", i))
    return out


def view_messages(traj: Trajectory, view: View, sim_prompt: str = SIM_SYSTEM_PROMPT) -> list[Message]:
    """The messages of `traj` under `view`: the agent conversation or the simulator framing."""
    return agent_messages(traj) if view == "agent" else sim_messages(traj, sim_prompt)
