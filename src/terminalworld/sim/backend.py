"""A checkpoint as a terminal simulator: given a session so far and a command, it generates the
observation with the checkpoint's own chat template.

Framings (the renderer's views): in the agent framing the observation is the next user turn, in the
sim framing it is the assistant reply to the command. The prompt is the rendered conversation cut
where the observation's output begins: after its turn header and after the harness's own
`Observation: ` prefix, which the harness writes, not the terminal. The cut is at a token boundary
of the full rendering (the last token ending at or before the output's first character), so the
prompt holds exactly the tokens a teacher-forced scorer conditions on; the characters between that
boundary and the output (usually the space after `Observation:`) are generated first and removed.
Generation stops at the template's end of turn or at `max_new_tokens`, in which case the text ends
with a visible note (`CAP_NOTE`).

Backends behind one interface (`generate(prompts, ...)` → token ids per prompt): `HFGenerator`
(in process, CPU or GPU, batched with left padding), `EngineGenerator` (in process, transformers'
continuous batching) and `VLLMGenerator` (GPU). Sampling is pure
temperature sampling (no top-k or top-p), greedy at temperature 0, seeded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from terminalworld.core.batching import until_stop as _until_stop
from terminalworld.core.decoding import hf_sample
from terminalworld.core.render import Renderer
from terminalworld.core.trajectories import OBSERVATION_PREFIX, Trajectory

CAP_NOTE = "\n[simulated output cut at {n} tokens]"


class Generator(Protocol):
    """Token ids generated after each prompt, stop token excluded."""

    def generate(
        self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float, seed: int
    ) -> list[list[int]]:
        """Token ids generated after each prompt (at most `max_new_tokens`, through the first stop token)."""


def stop_ids(tokenizer) -> list[int]:
    """The tokens that end a turn: the tokenizer's end of sequence and, where it has one, `<|im_end|>`."""
    ids = {tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_end|>")}
    return sorted(i for i in ids if i is not None and i != tokenizer.unk_token_id)


class HFGenerator:
    """An HF causal LM in this process; prompts go `batch_size` at a time, left-padded.

    With `reuse_cache`, prompts go one at a time and the KV cache of the previous call is kept: a
    prompt that extends the previous prompt and its output (the next turn of a session) is cut to
    the longest common prefix with what the cache holds, and only the rest is prefilled, so a
    simulated turn costs its new tokens (its command, its grounding delta), not its whole session.
    """

    def __init__(
        self,
        model,
        *,
        stop: list[int],
        pad: int,
        batch_size: int = 1,
        device: str = "cpu",
        reuse_cache: bool = False,
    ):
        from terminalworld.core.threads import ensure_threads

        ensure_threads()  # this process's share of the cores, unless its entry point chose one
        self.model = model.to(device).eval()
        self.stop, self.pad, self.batch_size, self.device = stop, pad, batch_size, device
        self.reuse_cache = reuse_cache
        self._cached: tuple[list[int], object] | None = None  # the ids the cache holds, and the cache
        self.prefilled: list[int] = []  # tokens prefilled per prompt (the cost reuse saves)

    def _session_cache(self, prompt: list[int]):
        """A cache holding the longest prefix of `prompt` the previous call computed (at least one
        token of the prompt is left to prefill), or a new one."""
        from transformers import DynamicCache

        if self._cached is not None:
            ids, cache = self._cached
            keep = 0
            for a, b in zip(ids, prompt[:-1], strict=False):
                if a != b:
                    break
                keep += 1
            if keep:
                cache.crop(keep)
                return cache, keep
        return DynamicCache(config=self.model.config), 0

    def _generate_reusing(self, prompt: list[int], *, max_new_tokens: int, temperature: float, seed: int) -> list[int]:
        import torch

        cache, kept = self._session_cache(prompt)
        ids = torch.tensor([prompt], device=self.device)
        new = hf_sample(
            self.model,
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            seed=seed,
            pad=self.pad,
            stop=self.stop,
            past_key_values=cache,
        )[0].tolist()
        self.prefilled.append(len(prompt) - kept)
        self._cached = ((prompt + new)[: cache.get_seq_length()], cache)
        return _until_stop(new, self.stop)

    def generate(
        self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float, seed: int
    ) -> list[list[int]]:
        """Token ids generated after each prompt (at most `max_new_tokens`, through the first stop token)."""
        import torch

        out: list[list[int]] = []
        if self.reuse_cache:
            for k, prompt in enumerate(prompts):
                out.append(
                    self._generate_reusing(
                        prompt, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed + k
                    )
                )
            return out
        for k in range(0, len(prompts), self.batch_size):
            batch = prompts[k : k + self.batch_size]
            width = max(len(p) for p in batch)
            ids = torch.tensor([[self.pad] * (width - len(p)) + p for p in batch], device=self.device)
            mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch], device=self.device)
            new = hf_sample(
                self.model,
                ids,
                attention_mask=mask,
                max_new_tokens=max_new_tokens,
                temperature=temperature,
                seed=seed + k,
                pad=self.pad,
                stop=self.stop,
            )
            out += [_until_stop(row.tolist(), self.stop) for row in new]
        return out


class EngineGenerator:
    """An HF causal LM on the continuous engine (`core.engine`): every prompt of a call is in flight
    at once and joins the running batch, each drawing with its own seed (`seed` + its index), so a
    prompt's tokens do not depend on the prompts beside it."""

    def __init__(self, model, *, stop: list[int], max_batch: int = 32):
        from terminalworld.core.engine import ContinuousEngine
        from terminalworld.core.threads import ensure_threads

        ensure_threads()
        self.engine = ContinuousEngine(model.eval(), stop=stop, max_batch=max_batch)
        self.stop = stop

    def generate(
        self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float, seed: int
    ) -> list[list[int]]:
        """Token ids generated after each prompt (at most `max_new_tokens`, through the first stop token)."""
        from concurrent.futures import ThreadPoolExecutor

        def one(k: int) -> list[int]:
            new = self.engine.generate(
                prompts[k], max_new_tokens=max_new_tokens, temperature=temperature, seed=seed + k
            )
            return _until_stop(new, self.stop)

        with ThreadPoolExecutor(max_workers=max(1, len(prompts))) as pool:
            return list(pool.map(one, range(len(prompts))))


class VLLMGenerator:
    """vLLM on the GPU; the whole list of prompts goes to the engine at once."""

    def __init__(self, model_path: str, *, stop: list[int], dtype: str = "bfloat16", max_len: int | None = None):
        from vllm import LLM

        self.llm = LLM(model=model_path, dtype=dtype, max_model_len=max_len, enable_prefix_caching=True)
        self.stop = stop

    def generate(
        self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float, seed: int
    ) -> list[list[int]]:
        """Token ids generated after each prompt (at most `max_new_tokens`, through the first stop token)."""
        from vllm import SamplingParams, TokensPrompt

        params = SamplingParams(
            temperature=temperature,
            top_k=-1,
            top_p=1.0,
            seed=seed,
            max_tokens=max_new_tokens,
            stop_token_ids=self.stop,
            detokenize=False,
        )
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
        return [_until_stop(list(o.outputs[0].token_ids), self.stop) for o in outs]


@dataclass(frozen=True)
class Simulated:
    """One generated observation: its text (with the cap note when capped), its token count,
    whether the cap was hit, and the prompt's length."""

    text: str
    tokens: int
    capped: bool
    prompt_tokens: int


@dataclass
class Simulator:
    """A renderer (tokenizer, chat template, framing) and a generator."""

    renderer: Renderer
    generator: Generator
    max_new_tokens: int = 1024
    temperature: float = 0.0
    seed: int = 0

    def prompt(self, traj: Trajectory, turn: int, grounding: Mapping[int, str] | None = None) -> tuple[list[int], str]:
        """The tokens before turn `turn`'s observation output (with the grounding blocks of the
        turns `grounding` names), and the characters of the rendering between the prompt's end and
        that output (generated first, then removed)."""
        r = self.renderer.render(traj, grounding)
        index = next(
            (i for i, m in enumerate(r.messages) if m.kind == "observation" and m.turn == turn),
            None,
        )
        if index is None:
            raise ValueError(f"{traj.instance_id}: turn {turn} has no observation slot to simulate")
        start, _ = r.spans[index]
        content = r.messages[index].content
        begin = start + (len(OBSERVATION_PREFIX) if content.startswith(OBSERVATION_PREFIX) else 0)
        ends = r.offsets[:, 1]
        cut = int(np.searchsorted(ends, begin, side="right"))
        return r.input_ids[:cut].tolist(), r.text[int(ends[cut - 1]) : begin]

    def simulate(
        self, requests: list[tuple[Trajectory, int]], grounding: Sequence[Mapping[int, str] | None] | None = None
    ) -> list[Simulated]:
        """The observation of each (trajectory, turn), generated (with each request's grounding
        blocks, when given); the trajectory holds the real observation there, or any placeholder
        starting with `Observation: `."""
        tok = self.renderer.tokenizer
        blocks = grounding or [None] * len(requests)
        prompts = [self.prompt(traj, turn, g) for (traj, turn), g in zip(requests, blocks, strict=True)]
        generated = self.generator.generate(
            [p for p, _ in prompts], max_new_tokens=self.max_new_tokens, temperature=self.temperature, seed=self.seed
        )
        stop = set(stop_ids(tok))
        out = []
        for (ids, lead), new in zip(prompts, generated, strict=True):
            capped = len(new) >= self.max_new_tokens and (not new or new[-1] not in stop)
            text = tok.decode([t for t in new if t not in stop], skip_special_tokens=True)
            text = text[len(lead) :] if lead and text.startswith(lead) else text
            if capped:
                text += CAP_NOTE.format(n=self.max_new_tokens)
            out.append(Simulated(text=text, tokens=len(new), capped=capped, prompt_tokens=len(ids)))
        return out
