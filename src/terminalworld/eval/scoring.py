"""Env-token perplexity of a model on held-out rows: the world-model probe's scorer.

Span (docs/design.md, "Env-token scoring"): the tokens of the target observation's content after the
literal prefix `Observation: `, by the same last-character ownership rule as the loss masks, plus
its end-of-turn token. The conversation is rendered and tokenized once; the span is never derived
by subtracting the length of a prefix render (Qwen3's template renders the last assistant turn
differently when it is last, which shifts such a window).

Agent mode renders the agent conversation; sim mode the write-up's dedicated-simulator framing. Both
put the same target text in the same kind of slot, so a row has the same target tokens in both.

Speed: the model body runs once per row; the LM head and a float32 log-softmax run only at the
positions that predict span tokens, a chunk at a time, so the head's cost and memory follow the
span, not the whole sequence times the vocabulary. `all_depths` scores every observation of the row in the same forward.
On CPU rows go one per forward (the matmuls are already large); on GPU and with vLLM they are
batched, longest first.

A row whose target observation holds no terminal text is skipped with its reason (`empty_target`),
as is a row longer than the model's context. Every row carries its target's class (`core.targets`:
sentinel, copy, read, predict; empty for the skipped empty targets), every depth of `all_depths`
its own, and the summary gives each class's statistics and the headline's (read + predict).

Output: one JSON row per held-out row, appended to `OUT.partial` as each finishes; a rerun skips
the rows already there. At the end `OUT` is written atomically: the rows in held-out order, then one
`{"_summary": true, ...}` row.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from terminalworld.core.assets import load_hf_model, local_model_path
from terminalworld.core.heldout import heldout_trajectory, read_heldout
from terminalworld.core.paths import check_outputs
from terminalworld.core.precision import Precision, resolve
from terminalworld.core.render import Rendered, Renderer, build_renderer
from terminalworld.core.resumable import model_label, resumable, resumable_rows
from terminalworld.core.targets import CLASSES, HEADLINE, classify_turn, empty_target, terminal_text
from terminalworld.core.trajectories import OBSERVATION_PREFIX, Trajectory, command_family, extract_command
from terminalworld.core.views import SIM_SYSTEM_PROMPT
from terminalworld.errors import InputError
from terminalworld.eval.metrics import BUCKET_LABELS, ppl_stats, token_bucket
from terminalworld.grounding.modes import Grounder, GroundingOptions, blocks_of, same_grounding
from terminalworld.options import at_least, option

Mode = Literal["agent", "sim"]


@dataclass(frozen=True)
class Span:
    """One observation to score in a rendered row: its depth, its token positions, the command
    family of the action it answers, and its length in characters without the `Observation: `
    prefix."""

    depth: int  # 1-based index of the observation in the trajectory
    positions: np.ndarray  # token indices of the span (each predicted from the position before it)
    family: str
    chars: int
    target_class: str | None = None  # `core.targets`' class of the observation at its depth


def observation_spans(r: Rendered, traj: Trajectory, all_depths: bool) -> list[Span]:
    """Token spans of the target observation (or of every observation), by the ownership rule
    with the `Observation: ` prefix excluded."""
    ends = r.offsets[:, 1] - 1
    spans = []
    for i, m in enumerate(r.messages):
        if m.kind != "observation" or (not all_depths and m.turn != len(traj.turns) - 1):
            continue
        start, _ = r.spans[i]
        skip = len(OBSERVATION_PREFIX) if m.content.startswith(OBSERVATION_PREFIX) else 0
        positions = np.flatnonzero((r.owner == i) & (ends >= start + skip))
        turn = traj.turns[m.turn]
        spans.append(Span(m.turn + 1, positions, command_family(extract_command(turn.action)), len(m.content) - skip))
    return spans


# Span positions per head call: bounds the float32 logits to HEAD_CHUNK x vocabulary floats (100 MB
# for SmolLM2, 311 MB for Qwen3) however many tokens --all-depths scores.
HEAD_CHUNK = 512


class HFScorer:
    """Transformers/torch: the body once, then head + float32 log-softmax at span positions only."""

    def __init__(self, model, device: str = "cpu"):
        import torch

        self.torch = torch
        self.model = model.eval().to(device)
        self.device = device
        self.body = model.get_decoder() if hasattr(model, "get_decoder") else model.base_model
        self.head = model.get_output_embeddings()
        self.max_len = getattr(model.config, "max_position_embeddings", None)

    def batch_logprobs(self, items: list[tuple[np.ndarray, np.ndarray]]) -> list[np.ndarray]:
        """log p(token[p] | tokens[:p]) at each row's positions (each p >= 1), several rows in one
        forward. Rows are right-padded: under causal attention a real
        token never sees the padding after it, so no attention mask is needed."""
        torch = self.torch
        width = max(len(ids) for ids, _ in items)
        batch = np.zeros((len(items), width), dtype=np.int64)
        for b, (ids, _) in enumerate(items):
            batch[b, : len(ids)] = ids
        with torch.inference_mode():
            ids = torch.as_tensor(batch, device=self.device)
            hidden = self.body(input_ids=ids, use_cache=False).last_hidden_state
            out = []
            for b, (_, positions) in enumerate(items):
                pos = torch.as_tensor(positions, dtype=torch.long, device=self.device)
                parts = []
                for p in pos.split(HEAD_CHUNK):
                    logp = torch.log_softmax(self.head(hidden[b, p - 1]).float(), dim=-1)
                    parts.append(logp.gather(1, ids[b, p][:, None])[:, 0])
                out.append(torch.cat(parts).double().cpu().numpy())
            return out


class VLLMScorer:
    """vLLM `prompt_logprobs`, reading the observed token's log-probability at every position,
    whatever its rank (the rank-1 entry is the argmax token's, not the observed one's)."""

    def __init__(self, model_path: str, dtype: str, max_len: int | None = None):
        try:
            from vllm import LLM, SamplingParams
        except ImportError as e:
            raise InputError(
                "the vllm backend needs the optional extra (uv sync --extra gpu), or --endpoint: a running vLLM "
                "server, such as the vLLM CPU build (docs/serving.md)"
            ) from e
        from terminalworld.core.assets import hf_folder

        # A GGUF file is served as its HF conversion, the same weights the HF backend scores.
        self.llm = LLM(
            model=hf_folder(model_path, "model"), dtype=dtype, max_model_len=max_len, enable_prefix_caching=False
        )
        self.params = SamplingParams(max_tokens=1, prompt_logprobs=0)
        self.max_len = self.llm.llm_engine.model_config.max_model_len

    def batch_logprobs(self, items: list[tuple[np.ndarray, np.ndarray]]) -> list[np.ndarray]:
        """log p(token[p] | tokens[:p]) at each row's positions (each p >= 1) as float64 arrays, in
        the order of `items`; all rows go to one `generate` call."""
        from vllm.inputs import TokensPrompt

        prompts = [TokensPrompt(prompt_token_ids=ids.tolist()) for ids, _ in items]
        outs = self.llm.generate(prompts, self.params, use_tqdm=False)
        return [
            observed_logprobs(o.prompt_logprobs, ids, positions)
            for o, (ids, positions) in zip(outs, items, strict=False)
        ]


def observed_logprobs(prompt_logprobs: list, ids: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """The observed tokens' log-probabilities from vLLM's `prompt_logprobs`, where entry p maps
    token ids to `Logprob`s for position p and always holds the token at p, whatever its rank."""
    return np.array([prompt_logprobs[p][int(ids[p])].logprob for p in positions], dtype=np.float64)


def span_stats(logprobs: np.ndarray) -> dict[str, Any]:
    """Token count, summed NLL (nats), mean NLL and PPL (exp of the mean) of one span's
    log-probabilities; mean and PPL are None (JSON null, never a bare NaN) for an empty span."""
    n = len(logprobs)
    s = float(-logprobs.sum())
    mean = s / n if n else None
    return {"n_target_tokens": n, "sum_nll": s, "mean_nll": mean, "ppl": math.exp(mean) if n else None}


@dataclass(frozen=True)
class ScoreConfig(GroundingOptions):
    """One scoring run: a model, the held-out rows, the framing, the grounding mode, and where the
    scores go."""

    model_path: str = option(help="HF folder, gs:// folder, cached HF id, GGUF file, or smollm2")
    heldout: str = option(help="held-out rows (JSON Lines)")
    out: str = option(
        flag=("--out", "--out-path"),
        help="scores file; rerunning resumes it",
    )
    mode: Mode = option("agent", help="agent: the agent conversation; sim: the dedicated-simulator framing")
    model_name: str | None = option(None, help="name in the summary (default: the model folder's name)")
    chat_template_from: str | None = option(None, help="render with this checkpoint's chat template")
    dtype: Precision = option(
        "auto", help="compute precision; auto: bfloat16 where it runs natively and agrees (core.precision)"
    )
    device: Literal["cpu", "cuda"] = option("cpu")
    all_depths: bool = option(False, help="also score every earlier observation (PPL by depth)")
    window: int | None = option(
        None, help="score only rows within this many tokens (the trained window); longer rows are skipped"
    )
    backend: Literal["hf", "vllm"] = option("hf")
    endpoint: str | None = option(None, help="--backend vllm: a running vLLM server's base URL (…/v1) to score through")
    served_model: str = option("model", help="the model's name at --endpoint")
    sim_prompt: str = option(SIM_SYSTEM_PROMPT, cli=False)
    batch_tokens: int = option(65536, cli=False)  # GPU: padded tokens per forward

    def __post_init__(self) -> None:
        super().__post_init__()
        at_least(self, window=1)

    def check_paths(self) -> None:
        """Refuse, before any work, outputs that cannot be written or that touch an input."""
        check_outputs(
            [("--out", self.out, "file", (".partial",))], [("--heldout", self.heldout), *self.grounding_inputs()]
        )


def score_rows(
    cfg: ScoreConfig,
    scorer,
    renderer: Renderer,
    rows: list[dict[str, Any]],
    done: dict[str, dict[str, Any]],
    grounder: Grounder | None = None,
) -> Iterator[dict[str, Any]]:
    """Scored rows as they finish (in batches, longest first, on GPU and vLLM; one by one in input
    order on CPU). With a grounder, each scored observation has its grounding block in the view;
    in hybrid mode an observation the shadow serves exactly is counted, not scored."""
    from tqdm import tqdm

    pending = []
    for row in rows:
        if row["instance_id"] in done:
            continue
        traj = heldout_trajectory(row)
        target_turn = len(traj.turns) - 1
        turns = range(len(traj.turns)) if cfg.all_depths else [target_turn]
        grounded = grounder.trajectory(traj, turns) if grounder else {}
        r = renderer.render(traj, blocks_of(grounded))
        base = {"instance_id": row["instance_id"], "repo": row.get("repo"), "full_len": len(r.input_ids)}
        base["target_class"] = classify_turn(traj, target_turn)
        base |= {"grounding": cfg.grounding, **(grounded[target_turn].record() if grounder else {})}
        if grounder:  # whether the target stands in its block (the copy rule): emulation, not prediction
            base["target_in_block"] = grounded[target_turn].holds(terminal_text(row["target_env"]))
        if empty_target(row):
            yield {**base, "skipped": "empty target observation: only its end-of-turn token would be scored"}
            continue
        spans = [
            replace(s, target_class=classify_turn(traj, s.depth - 1))
            for s in observation_spans(r, traj, cfg.all_depths)
        ]
        exact = {t for t, g in grounded.items() if g.served is not None}
        served = [s for s in spans if s.depth - 1 in exact]
        if served:
            target = traj.turns[target_turn].observation.removeprefix(OBSERVATION_PREFIX)
            base["served"] = [
                {"depth": s.depth, "n_target_tokens": len(s.positions), "target_chars": s.chars, "family": s.family}
                for s in served
            ]
            if grounded[target_turn].served is not None:
                base["served_matches_target"] = grounded[target_turn].served == target
            spans = [s for s in spans if s.depth - 1 not in exact]
        if target_turn in exact:  # the shadow served the target exactly: nothing is left to score
            last = served[-1]
            yield {
                **base,
                "n_target_tokens": len(last.positions),
                "target_chars": last.chars,
                "target_family": last.family,
            }
            continue
        if scorer.max_len is not None and len(r.input_ids) > scorer.max_len:
            yield {**base, "skipped": f"{len(r.input_ids)} tokens exceed the model's {scorer.max_len}"}
            continue
        if cfg.window is not None and len(r.input_ids) > cfg.window:
            yield {**base, "skipped": f"{len(r.input_ids)} tokens exceed the trained window of {cfg.window}"}
            continue
        pending.append((base, r.input_ids, spans))
    batched = cfg.device == "cuda" or cfg.backend == "vllm"  # on CPU one row per forward is fastest
    if batched:
        pending.sort(key=lambda p: -len(p[1]))
    with tqdm(total=len(pending), desc=f"score {cfg.mode}", unit="traj") as bar:
        for batch in _batches(pending, cfg.batch_tokens if batched else 0):
            items = [(ids, np.concatenate([s.positions for s in spans])) for _, ids, spans in batch]
            for (base, _, spans), logprobs in zip(batch, scorer.batch_logprobs(items), strict=False):
                yield _row(base, spans, logprobs, cfg.all_depths)
            bar.update(len(batch))


def _batches(pending: list, token_budget: int) -> Iterator[list]:
    """Consecutive groups whose padded size (rows x longest) stays within the budget; 0: one row each."""
    batch: list = []
    for item in pending:
        if batch and (len(batch) + 1) * max(len(item[1]), len(batch[0][1])) > token_budget:
            yield batch
            batch = []
        batch.append(item)
    if batch:
        yield batch


def _row(base: dict[str, Any], spans: list[Span], logprobs: np.ndarray, all_depths: bool) -> dict[str, Any]:
    parts, k = [], 0
    for s in spans:
        parts.append((s, logprobs[k : k + len(s.positions)]))
        k += len(s.positions)
    target, target_lp = parts[-1]
    out = {**base, **span_stats(target_lp), "target_chars": target.chars, "target_family": target.family}
    if all_depths:
        out["depths"] = [
            {"depth": s.depth, "family": s.family, "target_class": s.target_class, **span_stats(lp)} for s, lp in parts
        ]
    return out


def summarize(rows: list[dict[str, Any]], cfg: ScoreConfig, model_name: str) -> dict[str, Any]:
    """The `{"_summary": true, ...}` row: counts, the per-checkpoint statistics of the scored rows
    (`eval.metrics.ppl_stats`), and the skipped rows with their reasons. Every row is exactly one
    of scored, skipped (with its reason) or served (hybrid: the shadow gave the target exactly, so
    it is counted, not scored)."""
    scored = [r for r in rows if "skipped" not in r and "ppl" in r]
    skipped = [r for r in rows if "skipped" in r]
    stats = ppl_stats(scored)
    tokens = stats["tokens"]
    return {
        "_summary": True,
        "model_name": model_name,
        "model_path": cfg.model_path,
        "mode": cfg.mode,
        "grounding": cfg.grounding,
        **({"grounding_budget": cfg.grounding_budget} if cfg.grounding != "none" else {}),
        "n_trajectories": len(rows),
        "n_scored": len(scored),
        "n_skipped": len(skipped),
        "n_served": len(rows) - len(scored) - len(skipped),
        **stats,  # a checkpoint's statistics under `ppl_stats`' names, as the report shows them
        "mean_nll_per_token": stats["sum_nll"] / tokens if tokens else None,
        "skipped": [{"instance_id": r["instance_id"], "reason": r["skipped"]} for r in skipped],
        "by_bucket": {
            b: _ppl(bucket_rows) for b, bucket_rows in _by(scored, lambda r: token_bucket(r["n_target_tokens"]))
        },
        "by_family": {
            f: _ppl(family_rows) for f, family_rows in _by(scored, lambda r: r.get("target_family", "other"))
        },
        **class_summary(rows),
        **served_summary(rows),
    }


def class_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per target class, the scored rows' statistics (`by_class`, every scored class, empty ones with
    n 0), the headline's over read + predict (`headline`), and each class's count among all rows
    (`class_counts`, skipped and served included). Rows without a class (older scores) are left out."""
    scored = [r for r in rows if "skipped" not in r and "ppl" in r and "target_class" in r]
    counts: dict[str, int] = {}
    for r in rows:
        if "target_class" in r:
            counts[r["target_class"]] = counts.get(r["target_class"], 0) + 1
    if not counts:
        return {}
    return {
        "class_counts": counts,
        "by_class": {c: _ppl([r for r in scored if r["target_class"] == c]) for c in CLASSES},
        "headline": _ppl([r for r in scored if r["target_class"] in HEADLINE]),
    }


def _by(rows: list[dict[str, Any]], key) -> list[tuple[str, list[dict[str, Any]]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r)
    order = list(BUCKET_LABELS)
    return sorted(groups.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order else len(order), kv[0]))


def _ppl(rows: list[dict[str, Any]]) -> dict[str, Any]:
    stats = ppl_stats(rows)
    return {
        "n": len(rows),
        "tokens": stats["tokens"],
        "ppl": stats["token_weighted_ppl"],
        "median_ppl": stats["median_ppl"],
    }


def served_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Hybrid mode: how many target rows and tokens the shadow served exactly (in all and per
    target family), and how often the served output equals the recorded one (empty outside hybrid
    mode). A skipped row (an empty target) carries its route but no target, so it is neither served
    nor counted."""
    counted = [r for r in rows if "n_target_tokens" in r]
    served = [r for r in counted if r.get("route") == "exact" and r.get("grounding") == "hybrid"]
    if not any(r.get("grounding") == "hybrid" for r in rows):
        return {}
    total = sum(r["n_target_tokens"] for r in counted)
    tokens = sum(r["n_target_tokens"] for r in served)
    matches = [r["served_matches_target"] for r in served if "served_matches_target" in r]
    return {
        "served_rows": len(served),
        "served_target_tokens": tokens,
        "exact_token_share": tokens / total if total else None,
        "served_matches_target": sum(matches) / len(matches) if matches else None,
        "served_by_family": {f: len(g) for f, g in _by(served, lambda r: r.get("target_family", "other"))},
    }


def score(cfg: ScoreConfig) -> dict[str, Any]:
    """Score every held-out row (resuming a partial run) and write the scores file atomically;
    returns the summary row."""
    from terminalworld.core.threads import set_threads

    set_threads()  # the cores this process has (or the share its parent passed), one thread each
    rows = read_heldout(cfg.heldout)
    # Repeated ids, another run's --out, or one made under another --grounding are refused before
    # the model loads.
    resumable(
        cfg.out, [r["instance_id"] for r in rows], source=cfg.heldout, accept=same_grounding(cfg.grounding, cfg.out)
    )
    path = local_model_path(cfg.model_path)
    renderer = build_renderer(
        tokenizer=path, template_from=cfg.chat_template_from, view=cfg.mode, sim_prompt=cfg.sim_prompt
    )
    precision = resolve(cfg.dtype, cfg.device)
    name = model_label(cfg.model_name, cfg.model_path)
    grounder = Grounder(cfg, renderer.tokenizer) if cfg.grounding != "none" else None
    scorer = _scorer(cfg, path, precision)
    return resumable_rows(
        cfg.out,
        [r["instance_id"] for r in rows],
        lambda done: score_rows(cfg, scorer, renderer, rows, done, grounder),
        lambda results: {**summarize(results, cfg, name), "precision": precision},
        source=cfg.heldout,
    )


def _scorer(cfg: ScoreConfig, path: str, precision: str):
    """HF in process; vLLM through a running server (`--endpoint`: the vLLM CPU build, which lives in
    its own environment, docs/serving.md), or in process where the `gpu` extra is installed."""
    if cfg.backend == "hf":
        return HFScorer(load_hf_model(path, precision), cfg.device)
    if cfg.endpoint:
        from terminalworld.eval.vllm_server import VLLMServerScorer

        return VLLMServerScorer(cfg.endpoint, cfg.served_model)
    return VLLMScorer(path, precision)
