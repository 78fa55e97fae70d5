"""Producing the three loss-mask arms: ours against transformers' generation-marked templates.

    uv run python benchmarks/render.py [--tokenizer qwen3] [--out benchmarks/results/render.json]

The seeds produced the arms with three hand-edited chat templates carrying `{% generation %}`
markers, i.e. three `apply_chat_template(..., return_assistant_tokens_mask=True)` calls per
trajectory (the peer way: transformers, TRL). Ours renders and tokenizes once and derives all three
arms from one ownership pass. Both run on the same real-shaped trajectories (recorded by the
real-shell recorder), at 5 to 80 turns, to show how each scales with the number of turns.
The report also counts the tokens on which the marker method's masks disagree with the rule.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

# ChatML with generation markers around the trained messages: the seeds' three templates.
_MARKED = (
    "{%- for message in messages %}{{ '<|im_start|>' + message.role + '\\n' }}"
    "{%- if message.role in TRAINED %}{% generation %}{{ message.content + '<|im_end|>' }}{% endgeneration %}"
    "{%- else %}{{ message.content + '<|im_end|>' }}{%- endif %}{{ '\\n' }}{%- endfor %}"
)
PEER_TEMPLATES = {
    "assistant": _MARKED.replace("TRAINED", "['assistant']"),
    "user": _MARKED.replace("TRAINED", "['user']"),
    "full": _MARKED.replace("TRAINED", "['user', 'assistant']"),
}
PLAIN = "{%- for message in messages %}{{ '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endfor %}"


def trajectories_with_turns(base, n_turns: int, count: int):
    """`count` trajectories of exactly `n_turns` turns, built from real recorded turns."""
    from dataclasses import replace

    pool = [t for traj in base for t in traj.turns]
    out = []
    for k in range(count):
        turns = tuple(pool[(k * n_turns + i) % len(pool)] for i in range(n_turns))
        out.append(replace(base[k % len(base)], turns=turns, instance_id=f"b{n_turns}-{k}"))
    return out


def ours(renderer, trajs):
    rendered = [renderer.render(t) for t in trajs]
    return [{arm: r.mask(arm) for arm in ("assistant", "full", "user")} for r in rendered], sum(
        len(r.input_ids) for r in rendered
    )


def peer(tok, trajs):
    out = []
    for t in trajs:
        msgs = t.messages()
        masks = {}
        for arm, template in PEER_TEMPLATES.items():
            enc = tok.apply_chat_template(
                msgs, chat_template=template, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
            )
            masks[arm] = np.asarray(enc["assistant_masks"], dtype=bool)
        out.append(masks)
    return out


def timed(fn, *args, repeat: int = 3):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn(*args)
        best = min(best, time.perf_counter() - t0)
    return best, result


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tokenizer", default="qwen3")
    p.add_argument("--turns", default="5,10,20,40,80")
    p.add_argument("--count", type=int, default=16, help="trajectories per point")
    p.add_argument("--corpus", default=str(HERE / ".data" / "render-corpus"))
    p.add_argument("--out", default=str(HERE / "results" / "render.json"))
    a = p.parse_args()

    from terminalworld.core.assets import load_tokenizer
    from terminalworld.core.formats import load_trajectories
    from terminalworld.core.render import Renderer
    from terminalworld.corpus.recorder import RecordConfig, record_corpus

    if not (Path(a.corpus) / "manifest.json").exists():
        record_corpus(RecordConfig(out=a.corpus, trajectories=16, seed=9))
    base = load_trajectories(str(Path(a.corpus) / "*.jsonl.gz"))
    tok = load_tokenizer(a.tokenizer)
    renderer = Renderer(tok, chat_template=PLAIN)
    points = []
    for n in (int(x) for x in a.turns.split(",")):
        trajs = trajectories_with_turns(base, n, a.count)
        t_ours, (mine, tokens) = timed(ours, renderer, trajs)
        t_peer, theirs = timed(peer, tok, trajs)
        disagree = sum(int((m[arm] != th[arm]).sum()) for m, th in zip(mine, theirs, strict=False) for arm in m)
        points.append(
            {
                "turns": n,
                "trajectories": len(trajs),
                "tokens": tokens,
                "ours_s": t_ours,
                "peer_s": t_peer,
                "ours_traj_per_s": len(trajs) / t_ours,
                "peer_traj_per_s": len(trajs) / t_peer,
                "ours_tokens_per_s": tokens / t_ours,
                "peer_tokens_per_s": tokens / t_peer,
                "speedup": t_peer / t_ours,
                "peer_mask_tokens_disagreeing": disagree,
            }
        )
        print(json.dumps(points[-1]))
    report = {"tokenizer": a.tokenizer, "points": points, "speedup_at_max_turns": points[-1]["speedup"]}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(report, indent=2) + "\n")
    plot(points, Path(a.out).with_suffix(".png"))


def plot(points, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    turns = [p["turns"] for p in points]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(
        turns, [p["ours_s"] / p["trajectories"] * 1e3 for p in points], "o-", label="terminalworld (3 arms, 1 pass)"
    )
    ax.plot(turns, [p["peer_s"] / p["trajectories"] * 1e3 for p in points], "s-", label="3 generation-marked templates")
    ax.set_xlabel("turns per trajectory")
    ax.set_ylabel("ms per trajectory (all three arms)")
    from terminalworld.report.figures import log_axis

    log_axis(ax.xaxis)
    log_axis(ax.yaxis)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
