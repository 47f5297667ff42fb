#!/usr/bin/env bash
# First contact with a GPU machine: the bundled sample through the real CLI with
# configs/runs/sample-gpu.yaml's models (Qwen3-VL-4B answers both variants, Qwen3-VL-8B judges
# and sees the image), weights read offline from the Hugging Face cache. Prints one JSON
# object (device, backend and vLLM build, label method, counts, throughput, prefix-cache
# fraction, deviations) and exits non-zero on any deviation. Under 10 minutes on one H100/H200.
#
#   bash scripts/gpu_check.sh                         # vLLM (run setup_engines.sh on this node first)
#   bash scripts/gpu_check.sh --backend transformers  # a GPU machine with torch + transformers, no vLLM
#   bash scripts/gpu_check.sh --tiny [--backend ...]  # the tiny seeded Qwen3-VL: no hub, CPU too
#   PYTHON=/path/to/python bash scripts/gpu_check.sh  # another environment (default: .venv/bin/python)
# Extra flags (--limit N, --work DIR, --budget-s S) go to scripts/gpu_check.py.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PY="${PYTHON:-$HERE/../.venv/bin/python}"
[[ -x "$PY" ]] || PY="$(command -v python3)"
export VLLM_WORKER_MULTIPROC_METHOD=spawn
# Hard stop a little past the budget: a hung engine must not hold the machine.
exec timeout --kill-after=30 900 "$PY" "$HERE/gpu_check.py" "$@"
