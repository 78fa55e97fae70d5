"""Score a model's env-token perplexity on held-out rows (the world-model probe).

    python scripts/sim_ppl_eval_hf.py --model-path PATH --mode {agent,sim} --heldout PATH --out-path PATH \
        [--model-name NAME] [--chat-template-from PATH] [--dtype float32|bfloat16] [--device cpu|cuda] \
        [--all-depths] [--backend hf|vllm]

PATH may be a local HF folder, a gs:// checkpoint folder (downloaded once and cached), an HF id
already in the local cache, a GGUF file, or `smollm2`. Rerunning with the same --out-path resumes.
"""

import argparse
import sys

from terminalworld.cli import run_cli
from terminalworld.eval.scoring import ScoreConfig, score


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model-path", required=True)
    p.add_argument("--mode", choices=["agent", "sim"], required=True)
    p.add_argument("--heldout", required=True)
    p.add_argument("--out-path", required=True)
    p.add_argument("--model-name", default=None)
    p.add_argument("--chat-template-from", default=None, help="render with this checkpoint's chat template")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--all-depths", action="store_true", help="also score every earlier observation (PPL by depth)")
    p.add_argument("--backend", choices=["hf", "vllm"], default="hf")
    a = p.parse_args(argv)
    cfg = ScoreConfig(
        model_path=a.model_path,
        heldout=a.heldout,
        out_path=a.out_path,
        mode=a.mode,
        model_name=a.model_name,
        chat_template_from=a.chat_template_from,
        dtype=a.dtype,
        device=a.device,
        all_depths=a.all_depths,
        backend=a.backend,
    )
    return run_cli(lambda: score(cfg))


if __name__ == "__main__":
    sys.exit(main())
