"""A multi-turn rollout as the policy saw it, token in, token out, with ECHO's masks.

Sampled action tokens are kept exactly as sampled (re-tokenizing their text can give other ids).
Everything else comes from the chat template as deltas, as the reference implementation builds
them: the prompt is the template's rendering of system and task with the generation prompt; an
action's turn end is what the template puts after assistant content, minus what the sampled tokens
already hold; an observation is what rendering one more message (with the next generation prompt)
adds to a fixed one-message conversation. Deltas do not depend on how a template re-renders history
(Qwen3's moves its think block), so the ids are always the ones the policy was given.

Per sequence: `action_mask` (the sampled tokens, GRPO's), `env_mask` (O′: observation content
tokens outside harness text, by `trajectories.harness_spans`) and `observation_count` (|O|: all
observation content tokens, harness text included; template and end-of-turn tokens excluded), the
conventions of `echo.loss`. A token belongs to a content span when its last character does, the
renderer's rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from terminalworld.core.render import Renderer, locate
from terminalworld.core.trajectories import harness_spans
from terminalworld.core.views import Message
from terminalworld.errors import RenderError

_BASE = [Message("system", "s", "system")]  # a fixed conversation that deltas are taken against


def _outside(span: tuple[int, int], holes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of `span` not covered by `holes` (sorted, relative to the span's start)."""
    s, e = span
    out, pos = [], s
    for a, b in holes:
        if s + a > pos:
            out.append((pos, s + a))
        pos = max(pos, s + b)
    return [*out, (pos, e)] if e > pos else out


@dataclass
class Rollout:
    """Token ids and masks of one episode, built turn by turn (`start`, `act`, `observe`)."""

    renderer: Renderer
    ids: list[int] = field(default_factory=list)
    action_mask: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    observation_count: int = 0

    def _render(self, messages: list[Message], prompt: bool) -> str:
        return self.renderer.tokenizer.apply_chat_template(
            [{"role": m.role, "content": m.content} for m in messages],
            tokenize=False,
            add_generation_prompt=prompt,
            chat_template=self.renderer.chat_template,
        )

    def _delta(self, message: Message, prompt: bool) -> tuple[str, tuple[int, int]]:
        """What rendering `message` after the fixed base adds, and its content's span in that."""
        before = self._render(_BASE, prompt=False)
        after = self._render([*_BASE, message], prompt=prompt)
        if not after.startswith(before):
            raise RenderError("the chat template renders a conversation differently when a message is added")
        _, spans = locate([*_BASE, message], lambda ms: self._render(ms, prompt=False), "rollout")
        s, e = spans[-1]
        return after[len(before) :], (s - len(before), e - len(before))

    def _append(self, text: str, *, env: list[tuple[int, int]] = (), content: tuple[int, int] | None = None) -> None:
        """Tokenize `text` on its own and append it with action mask 0; O′ is the tokens whose last
        character lies in `env`, and those in `content` add to |O| (character spans of `text`)."""
        enc = self.renderer.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        last = np.asarray(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2)[:, 1] - 1

        def within(spans: list[tuple[int, int]]) -> np.ndarray:
            return np.array([any(s <= x < e for s, e in spans) for x in last], dtype=bool)

        self.ids += list(enc["input_ids"])
        self.action_mask += [0] * len(last)
        self.env_mask += within(env).astype(int).tolist()
        if content is not None:
            self.observation_count += int(within([content]).sum())

    def start(self, system: str, task: str) -> None:
        """The prompt: system and task messages and the generation prompt."""
        messages = [Message("system", system, "system"), Message("user", task, "task")]
        self._append(self._render(messages, prompt=True))

    def act(self, sampled_ids: list[int]) -> str:
        """Append the sampled tokens as they are (action mask 1), then whatever of the template's turn
        end they lack (mask 0); returns the action's text."""
        tok = self.renderer.tokenizer
        self.ids += list(sampled_ids)
        self.action_mask += [1] * len(sampled_ids)
        self.env_mask += [0] * len(sampled_ids)
        delta, (_, end) = self._delta(Message("assistant", "x", "action"), prompt=False)
        turn_end = delta[end:]
        said = tok.decode(sampled_ids, skip_special_tokens=False)
        done = max(k for k in range(len(turn_end) + 1) if said.endswith(turn_end[:k]))
        self._append(turn_end[done:])
        return tok.decode(sampled_ids, skip_special_tokens=True)

    def observe(self, output: str) -> None:
        """Append the observation message and the next generation prompt; O′ and |O| from its content."""
        delta, content = self._delta(Message("user", output, "observation"), prompt=True)
        self._append(delta, env=_outside(content, harness_spans(output)), content=content)


def replayed(renderer: Renderer, messages: list[Message]) -> Rollout:
    """A finished conversation (system, task, then actions and observations) as a rollout, each
    action's tokens being its text's tokenization: the teacher-forced view of held-out trajectories."""
    if [m.kind for m in messages[:2]] != ["system", "task"]:
        raise RenderError("a replayed conversation starts with its system and task messages")
    rollout = Rollout(renderer)
    rollout.start(messages[0].content, messages[1].content)
    for m in messages[2:]:
        if m.kind == "action":
            rollout.act(renderer.tokenizer(m.content, add_special_tokens=False)["input_ids"])
        else:
            rollout.observe(m.content)
    return rollout
