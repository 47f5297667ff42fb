#!/usr/bin/env bash
# First contact with a GPU machine: the bundled sample through the real CLI with
# configs/runs/sample-gpu.yaml's models and their shipped settings (Qwen3-VL-4B answers both
# variants, Qwen3-VL-8B judges and sees the image), weights read offline from the Hugging Face
# cache; then the judge alone at two max_num_seqs values (checks/s after its load, prefix-cache
# hit rate in the judge's order). Writes one JSON object (device, backend and vLLM build, label
# method, counts, throughput, prefix-cache fraction, the judge at each batch size, deviations)
# to WORK/gpu_check.json and stdout; exits non-zero on any deviation. Under 15 minutes on one
# H100/H200 (a deviation past 13).
#
#   bash scripts/gpu_check.sh                         # vLLM (run setup_engines.sh on this node first)
#   bash scripts/gpu_check.sh --backend transformers  # a GPU machine with torch + transformers, no vLLM
#   bash scripts/gpu_check.sh --tiny [--backend ...]  # the tiny seeded Qwen3-VL: no hub, CPU too
#   PYTHON=/path/to/python bash scripts/gpu_check.sh  # another environment (default: .venv/bin/python)
# Extra flags (--limit N, --work DIR, --budget-s S, --max-num-seqs A,B, --out FILE) go to
# scripts/gpu_check.py.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PY="${PYTHON:-$HERE/../.venv/bin/python}"
[[ -x "$PY" ]] || PY="$(command -v python3)"
export VLLM_WORKER_MULTIPROC_METHOD=spawn
# Hard stop a little past the budget: a hung engine must not hold the machine.
exec timeout --kill-after=30 900 "$PY" "$HERE/gpu_check.py" "$@"
