# Included into every job script by `gamut-local slurm` (not an sbatch script on its own).
# Each array task gets its own temporary folder and compile caches: concurrent tasks sharing
# one vLLM/torch/triton cache race on the same files. The Hugging Face cache is shared and
# read-only here: HF_HUB_OFFLINE=1 makes a missing model an immediate error, not a download.
TASK_TMP="${SLURM_TMPDIR:-${TMPDIR:-/tmp}}/gamut-${SLURM_ARRAY_JOB_ID:-${SLURM_JOB_ID:-local}}-${SLURM_ARRAY_TASK_ID:-0}"
mkdir -p "$TASK_TMP"
trap 'rm -rf "$TASK_TMP"' EXIT
export TMPDIR="$TASK_TMP"
SHARED_MODELINFOS="${VLLM_CACHE_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/vllm}/modelinfos"
export VLLM_CACHE_ROOT="$TASK_TMP/vllm"
# Except vLLM's notes on each model class (modelinfos: small JSON files keyed by the hash of the
# class's source, each written by an atomic rename), which are safe to share: without them
# every task inspects the model class in a child process that imports vLLM again (measured on
# a 2-core node: 23 s of each task's start).
if mkdir -p "$VLLM_CACHE_ROOT" "$SHARED_MODELINFOS" 2>/dev/null; then
  ln -sfn "$SHARED_MODELINFOS" "$VLLM_CACHE_ROOT/modelinfos" || true
fi
export TORCHINDUCTOR_CACHE_DIR="$TASK_TMP/inductor"
export TRITON_CACHE_DIR="$TASK_TMP/triton"
export HF_HUB_OFFLINE=1
export HF_DATASETS_OFFLINE=1
export TRANSFORMERS_OFFLINE=1
export VLLM_WORKER_MULTIPROC_METHOD=spawn
RUN_CONFIG={{run_config}}
DONE_DIR={{done_dir}}
mkdir -p "$DONE_DIR"
# A shard is complete when its marker holds the key of the work now asked for (GAMUT_DONE_KEY:
# the engine's settings, the questions and checks); `gamut-local slurm` skips it on resubmission.
mark_done() { printf '%s\n' "${GAMUT_DONE_KEY:-}" > "$DONE_DIR/$1.tmp" && mv -f "$DONE_DIR/$1.tmp" "$DONE_DIR/$1"; }
# The GPUs a job is given must be real: a test cluster's fake GPUs (gres backed by /dev/null)
# set CUDA_VISIBLE_DEVICES as real ones do, and vLLM would take the job for a GPU job. A job
# meant for CPU says so (slurm.setup: "export GAMUT_FAKE_GPUS=1"): its GPU variables are cleared.
if [ "${GAMUT_FAKE_GPUS:-0}" = 1 ]; then
  unset CUDA_VISIBLE_DEVICES SLURM_STEP_GPUS SLURM_JOB_GPUS SLURM_GPUS_ON_NODE GPU_DEVICE_ORDINAL ROCR_VISIBLE_DEVICES
elif [ -n "${CUDA_VISIBLE_DEVICES:-}" ] && ! compgen -G '/dev/nvidia[0-9]*' >/dev/null && [ ! -e /dev/kfd ]; then
  echo "gamut-local: this job was given GPUs (CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES) but $(hostname -s) has" \
       "no GPU device (no /dev/nvidia0, no /dev/kfd): the cluster's gres.conf names devices that are not GPUs." \
       "On a test cluster with fake GPUs, add 'export GAMUT_FAKE_GPUS=1' to slurm.setup to run on CPU." >&2
  exit 2
fi
