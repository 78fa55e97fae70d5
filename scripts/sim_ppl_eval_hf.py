"""Score a model's env-token perplexity on held-out rows (the world-model probe).

    python scripts/sim_ppl_eval_hf.py --model-path PATH --mode {agent,sim} --heldout PATH --out-path PATH \
        [--model-name NAME] [--chat-template-from PATH] [--dtype float32|bfloat16] [--device cpu|cuda] \
        [--all-depths] [--backend hf|vllm]

PATH may be a local HF folder, a gs:// checkpoint folder (downloaded once and cached), an HF id
already in the local cache, a GGUF file, or `smollm2`. Rerunning with the same --out-path resumes.
The same as `terminalworld score`, under the write-up's script name.
"""

import sys

from terminalworld.cli import main

if __name__ == "__main__":
    sys.exit(main(["score", *sys.argv[1:]]))
