# Included into every job script by `gamut-local slurm` (not an sbatch script on its own).
# Each array task gets its own temporary folder and compile caches: concurrent tasks sharing
# one vLLM/torch/triton cache race on the same files. The Hugging Face cache is shared and
# read-only here: HF_HUB_OFFLINE=1 makes a missing model an immediate error, not a download.
TASK_TMP="${SLURM_TMPDIR:-${TMPDIR:-/tmp}}/gamut-${SLURM_ARRAY_JOB_ID:-${SLURM_JOB_ID:-local}}-${SLURM_ARRAY_TASK_ID:-0}"
mkdir -p "$TASK_TMP"
trap 'rm -rf "$TASK_TMP"' EXIT
export TMPDIR="$TASK_TMP"
export VLLM_CACHE_ROOT="$TASK_TMP/vllm"
export TORCHINDUCTOR_CACHE_DIR="$TASK_TMP/inductor"
export TRITON_CACHE_DIR="$TASK_TMP/triton"
export HF_HUB_OFFLINE=1
export HF_DATASETS_OFFLINE=1
export TRANSFORMERS_OFFLINE=1
export VLLM_WORKER_MULTIPROC_METHOD=spawn
RUN_CONFIG={{run_config}}
DONE_DIR={{done_dir}}
mkdir -p "$DONE_DIR"
# A shard is complete when its marker exists; `gamut-local slurm` skips it on resubmission.
mark_done() { touch "$DONE_DIR/$1"; }
