"""Three-arm loss masks with an exact token partition, for any chat template.

Every token of the one tokenization training sees has at most one owner, the message whose content
holds its last character (its end-of-turn token too), so the assistant and user arms partition the
full arm exactly, checked on every example. The rule and why: docs/loss-masks.md. The `render`
command (trajectory files to training rows, with its file I/O) is `train.render_rows`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from terminalworld.core.trajectories import Trajectory, harness_spans
from terminalworld.core.views import SIM_SYSTEM_PROMPT, UNOWNED_KINDS, Message, View, view_messages
from terminalworld.errors import InputError, RenderError

ARMS = ("assistant", "full", "user")
Arm = Literal["assistant", "full", "user"]
NOBODY = -1
_EXCLUDED = -2  # a character of harness text excluded from training (check_partition only)

_OPEN, _CLOSE = "\ue000", "\ue001"  # private-use characters no template emits


def locate(
    messages: list[Message], render: Callable[[list[Message]], str], name: str
) -> tuple[str, list[tuple[int, int]]]:
    """The rendered text and the character span of each message's content in it.

    The conversation is rendered a second time with every content wrapped in two private-use
    marker characters; removing the markers must give back the plain render exactly, and their
    positions are the spans. This is exact even for empty contents or contents that also occur
    in the scaffolding, and it detects any template that rewrites content.
    """
    text = render(messages)
    if any(_OPEN in m.content or _CLOSE in m.content for m in messages):
        raise RenderError(f"{name}: a message contains the private-use characters U+E000/U+E001 used for locating")
    marked = render([replace(m, content=_OPEN + m.content + _CLOSE) for m in messages])
    spans, pieces, pos, length = [], [], 0, 0
    while (a := marked.find(_OPEN, pos)) >= 0:
        b = marked.find(_CLOSE, a + 1)
        if b < 0:
            break
        pieces.append(marked[pos:a])
        length += a - pos
        spans.append((length, length + b - a - 1))
        pieces.append(marked[a + 1 : b])
        length += b - a - 1
        pos = b + 1
    pieces.append(marked[pos:])
    plain = "".join(pieces)
    if (
        len(spans) == len(messages)
        and plain == text
        and all(text[s:e] == m.content for m, (s, e) in zip(messages, spans, strict=False))
    ):
        return text, spans
    raise RenderError(f"{name}: {_diagnose(text, messages)}")


def _diagnose(text: str, messages: list[Message]) -> str:
    cursor = 0
    for i, m in enumerate(messages):
        at = text.find(m.content, cursor)
        if at < 0:
            hint = "the chat template transforms message content"
            if "</think>" in m.content:
                hint = "the template strips <think> reasoning from assistant content (as Qwen3's does)"
            elif m.content != m.content.strip() and text.find(m.content.strip(), cursor) >= 0:
                hint = "the template trims whitespace around content"
            return f"message {i} ({m.role}, {m.kind}) does not appear verbatim in the rendered text: {hint}"
        cursor = at + len(m.content)
    return "the chat template renders content differently when it changes (it inspects or rewrites content)"


def token_owners(
    starts: np.ndarray,
    ends: np.ndarray,
    spans: list[tuple[int, int]],
    excluded: list[tuple[int, int]] = (),
    unowned: frozenset[int] = frozenset(),
) -> np.ndarray:
    """Owner message index of each token (NOBODY for scaffolding), by the last-character rule plus
    one end-of-turn token per message. `excluded` character spans own nothing; the messages
    `unowned` names (grounding blocks) own neither their content nor their end of turn."""
    n = len(starts)
    owner = np.full(n, NOBODY, dtype=np.int32)
    if not spans or not n:
        return owner
    cs = np.array([s for s, _ in spans], dtype=np.int64)
    ce = np.array([e for _, e in spans], dtype=np.int64)
    last = ends.astype(np.int64) - 1
    idx = np.searchsorted(cs, last, side="right") - 1
    inside = (idx >= 0) & (ends > starts)
    inside &= last < ce[np.clip(idx, 0, None)]
    owner[inside] = idx[inside]
    for s, e in [*excluded, *(spans[m] for m in unowned)]:
        owner[(last >= s) & (last < e)] = NOBODY
    eot = np.searchsorted(starts, ce, side="left")
    for m, j in enumerate(eot):
        if m not in unowned and j < n and owner[j] == NOBODY and not _in_any(int(last[j]), excluded):
            owner[j] = m
    return owner


def unowned_messages(messages: list[Message]) -> frozenset[int]:
    """Indices of the messages that own no token (`views.UNOWNED_KINDS`)."""
    return frozenset(i for i, m in enumerate(messages) if m.kind in UNOWNED_KINDS)


def _in_any(x: int, spans) -> bool:
    return any(s <= x < e for s, e in spans)


@dataclass
class Rendered:
    """One example rendered once: its text, token ids and offsets, and the owner of every token,
    from which each arm's mask is derived."""

    instance_id: str
    text: str
    input_ids: np.ndarray  # int32
    # Message index per token, NOBODY for scaffolding. System tokens keep their owner (for coverage
    # reports) but no arm trains them.
    owner: np.ndarray
    messages: list[Message]
    spans: list[tuple[int, int]]
    offsets: np.ndarray  # (n, 2) character offsets
    truncated_tokens: int = 0
    excluded: list[tuple[int, int]] = field(default_factory=list)  # harness text that owns nothing (O')

    def role_of_tokens(self) -> np.ndarray:
        """The role (system, user, assistant, or "none" for scaffolding) owning each token."""
        roles = np.array([m.role for m in self.messages] + ["none"])
        return roles[self.owner]  # NOBODY (-1) indexes the trailing "none"

    def mask(self, arm: Arm) -> np.ndarray:
        """Boolean per token: trained under `arm` (system tokens never are)."""
        roles = self.role_of_tokens()
        if arm == "assistant":
            return roles == "assistant"
        if arm == "user":
            return roles == "user"
        if arm == "full":
            return (roles == "assistant") | (roles == "user")
        raise InputError(f"unknown arm {arm!r}; choose one of {ARMS}")

    def check_partition(self) -> None:
        """The ownership obeys the rule and the arms partition the tokens; raised, never skipped.

        Ownership is re-derived per character, not from `token_owners`' per-token search, and the
        arms are compared with masks built from message roles, not with each other (`a | c == b`
        alone holds for any owner array). Checked: a token whose last character lies in a message's
        content belongs to that message (system content may also belong to nobody; harness text
        excluded by the O' option to nobody); any other owned token is its owner's end-of-turn
        token, the first starting at or after the owner's content end; each end-of-turn token that
        no content claims has an owner; the arms are exactly the assistant-owned, user-owned and
        both, and no system content is trained.
        """
        n, k = len(self.owner), len(self.messages)
        owner = np.asarray(self.owner, dtype=np.int64)
        if len(self.input_ids) != n or len(self.offsets) != n or len(self.spans) != k:
            self._partition_error("tokens, offsets, owners, messages and spans differ in number")
        a, b, c = self.mask("assistant"), self.mask("full"), self.mask("user")
        if not n:
            return
        if owner.min() < NOBODY or owner.max() >= k:
            self._partition_error("an owner is not a message index")
        starts, ends = self.offsets[:, 0], self.offsets[:, 1]
        by_char = np.full(len(self.text), NOBODY, dtype=np.int64)
        for m, (s, e) in enumerate(self.spans):
            by_char[s:e] = m
        for s, e in self.excluded:
            by_char[s:e] = _EXCLUDED
        unowned = unowned_messages(self.messages)
        for m in unowned:
            s, e = self.spans[m]
            by_char[s:e] = NOBODY
        claim = np.where(ends > starts, by_char[ends - 1], NOBODY)  # ends - 1 = -1 only where unused
        system = np.array([m.role == "system" or m.kind == "system" for m in self.messages] + [False, False])
        wrong = (claim >= 0) & (owner != claim) & ~(system[claim] & (owner == NOBODY))
        if wrong.any():
            j = int(np.flatnonzero(wrong)[0])
            self._partition_error(f"token {j} lies in message {claim[j]} but is owned by {owner[j]}")
        ce = np.array([e for _, e in self.spans], dtype=np.int64)
        prev = np.concatenate(([-1], starts[:-1]))
        eot_of_owner = (starts >= ce[owner]) & (prev < ce[owner])  # meaningful where owner >= 0
        wrong = (claim < 0) & (owner >= 0) & ~((claim == NOBODY) & eot_of_owner)
        if wrong.any():
            j = int(np.flatnonzero(wrong)[0])
            self._partition_error(f"token {j} is owned by {owner[j]} but is neither its content nor its end of turn")
        eot = np.searchsorted(starts, ce, side="left")
        eot = np.array([j for m, j in enumerate(eot) if m not in unowned and j < n], dtype=np.int64)
        if ((claim[eot] == NOBODY) & (owner[eot] == NOBODY)).any():
            self._partition_error("an end-of-turn token has no owner")
        is_asst = np.array([m.role == "assistant" for m in self.messages] + [False])[owner]
        is_user = np.array([m.role == "user" for m in self.messages] + [False])[owner]
        if (
            not np.array_equal(a, is_asst)
            or not np.array_equal(c, is_user)
            or not np.array_equal(b, is_asst | is_user)
            or (a & c).any()
            or (b & system[claim]).any()
        ):
            self._partition_error("the arms are not the assistant-owned, user-owned and trained tokens")

    def _partition_error(self, why: str) -> None:
        raise RenderError(f"{self.instance_id}: loss-mask arms do not partition the tokens: {why}")


class Renderer:
    """Renders trajectories and gives each token its owner, once per example for all arms."""

    def __init__(
        self,
        tokenizer,
        chat_template: str | None = None,
        view: View = "agent",
        exclude_harness_text: bool = False,
        max_len: int | None = None,
        sim_prompt: str = SIM_SYSTEM_PROMPT,
    ):
        self.tokenizer = tokenizer
        self.chat_template = chat_template
        self.view = view
        self.exclude_harness_text = exclude_harness_text
        self.max_len = max_len
        self.sim_prompt = sim_prompt

    def template_text(self, messages: list[Message]) -> str:
        """The chat template's rendering of `messages` (no generation prompt); raises `RenderError`
        when the template fails on them."""
        from jinja2 import TemplateError

        try:
            return self.tokenizer.apply_chat_template(
                [{"role": m.role, "content": m.content} for m in messages],
                tokenize=False,
                chat_template=self.chat_template,
            )
        except TemplateError as e:
            raise RenderError(f"the chat template fails: {e}") from None

    def render_messages(self, messages: list[Message], name: str) -> Rendered:
        """Render, tokenize and own `messages` once (cut to `max_len`), with the partition checked;
        raises `RenderError` naming `name` when the template rewrites a content."""
        text, spans = locate(messages, self.template_text, name)
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids = np.asarray(enc["input_ids"], dtype=np.int32)
        offsets = np.asarray(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2)
        excluded = []
        if self.exclude_harness_text:
            for m, (s, _) in zip(messages, spans, strict=False):
                if m.kind == "observation":
                    excluded += [(s + a, s + b) for a, b in harness_spans(m.content)]
        owner = token_owners(offsets[:, 0], offsets[:, 1], spans, excluded, unowned_messages(messages))
        cut = 0
        if self.max_len is not None and len(ids) > self.max_len:
            cut = len(ids) - self.max_len
            ids, owner, offsets = ids[: self.max_len], owner[: self.max_len], offsets[: self.max_len]
        r = Rendered(name, text, ids, owner, messages, spans, offsets, cut, excluded)
        r.check_partition()
        return r

    def render(self, traj: Trajectory, grounding: Mapping[int, str] | None = None) -> Rendered:
        """`traj` rendered under this renderer's view, with the grounding blocks of the turns
        `grounding` names (owned by nobody)."""
        messages = view_messages(traj, self.view, self.sim_prompt, grounding)
        return self.render_messages(messages, traj.instance_id)


def build_renderer(
    *,
    tokenizer: str,
    chat_template: str | None = None,
    template_from: str | None = None,
    view: View = "agent",
    exclude_harness_text: bool = False,
    max_len: int | None = None,
    sim_prompt: str = SIM_SYSTEM_PROMPT,
) -> Renderer:
    """A renderer from paths: `tokenizer` (folder, GGUF file or asset name) with its own chat
    template, or the Jinja file `chat_template`, or the template of the model at `template_from`."""
    from terminalworld.core.assets import load_tokenizer, local_model_path, read_chat_template

    if chat_template and template_from:
        raise InputError("give a chat template file or a model to take the template from, not both")
    template = read_chat_template(chat_template) if chat_template else None
    if template_from:
        template = load_tokenizer(local_model_path(template_from)).chat_template
    return Renderer(load_tokenizer(tokenizer), template, view, exclude_harness_text, max_len, sim_prompt)


def training_row(r: Rendered, arm: Arm) -> dict[str, Any]:
    """`{instance_id, input_ids, loss_weights}`: loss_weights[i] = 1 when token i is trained."""
    return {
        "instance_id": r.instance_id,
        "input_ids": r.input_ids.tolist(),
        "loss_weights": r.mask(arm).astype(np.int8).tolist(),
    }
