"""Which back end a model gets, and what would stop it before anything loads: the extra
to install, a missing model folder, a tensor-parallel size its attention heads cannot take.
Nothing here imports a back end (nor torch or vLLM): it looks them up."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from gamut_local.config import ModelSpec, resolve_model_path
from gamut_local.engines.images import is_multimodal
from gamut_local.errors import InputError, Problem


def vllm_available() -> bool:
    """Whether vLLM is installed, without importing it (that costs seconds)."""
    return importlib.util.find_spec("vllm") is not None


# What each back end imports beyond the core install, and the pyproject extra that installs it:
# a core install asked for one names the extra to add, not a ModuleNotFoundError from deep inside.
BACKEND_NEEDS = {"openai": ("openai", ("httpx",)), "vllm": ("vllm", ("vllm", "torch", "transformers")),
                 "transformers": ("transformers", ("torch", "transformers"))}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that fails to import, or a stub in sys.modules
        return False


def backend_problem(spec: ModelSpec, backend: str) -> Problem | None:
    """The extra to install when the back end this model uses is not installed, else None."""
    extra, modules = BACKEND_NEEDS.get(backend, (None, ()))
    missing = [m for m in modules if not _installed(m)]
    if not missing:
        return None
    if spec.backend == "auto":  # neither engine: pick_backend fell back to transformers
        return spec.problem("backend", f"auto needs an engine and this install has none ({', '.join(missing)} "
                            "missing): pip install 'gamut_local[vllm]' (GPU) or 'gamut_local[transformers]'")
    return spec.problem("backend", f"{backend} needs the `{extra}` extra ({', '.join(missing)} missing): "
                        f"pip install 'gamut_local[{extra}]'")


def attention_heads(path: str) -> int | None:
    """The model's attention heads as its config.json gives them (the language model's, in a
    vision-language model's `text_config` or `llm_config`); None where it does not say."""
    try:
        config = json.loads((Path(path) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    for part in (config, config.get("text_config"), config.get("llm_config")):
        heads = part.get("num_attention_heads") if isinstance(part, dict) else None
        if isinstance(heads, int) and heads > 0:
            return heads
    return None


def tensor_parallel_problem(spec: ModelSpec, path: str) -> Problem | None:
    """vLLM splits a model's attention heads evenly over its tensor-parallel ranks and refuses
    a size that does not divide them, but only once the engine starts (an internal error, after
    a job has waited in the queue); read off config.json, it is an input error before anything loads."""
    tp = spec.engine.tensor_parallel_size
    heads = attention_heads(path) if tp > 1 and spec.backend in ("vllm", "auto") else None
    if heads is None or heads % tp == 0:
        return None
    sizes = ", ".join(str(n) for n in range(1, heads + 1) if heads % n == 0 and n <= 16)
    return spec.problem("engine.tensor_parallel_size", f"{tp} does not divide the model's {heads} attention heads "
                        f"(num_attention_heads in {Path(path) / 'config.json'}); vLLM splits the heads evenly "
                        f"over the tensor-parallel GPUs: use one of {sizes}")


def model_problem(spec: ModelSpec) -> Problem | None:
    """What would stop this model's engine, found before anything loads: a missing folder (or
    an uncached hub id), or a tensor-parallel size its attention heads cannot be split by."""
    path, problem = resolve_model_path(spec)
    if problem is None and path is not None:
        problem = tensor_parallel_problem(spec, path)
    return problem


def pick_backend(spec: ModelSpec, path: str | None = None) -> str:
    """`auto`: vLLM when installed, else transformers. vLLM's image path needs torchvision;
    scripts/setup_engines.sh installs one that imports on CPU and GPU alike, so a vision model
    goes to vLLM too, and to transformers only in an environment without torchvision."""
    if spec.backend != "auto":
        return spec.backend
    if not vllm_available():
        return "transformers"
    if path is not None and is_multimodal(path) and importlib.util.find_spec("torchvision") is None:
        return "transformers"
    return "vllm"


def require(spec: ModelSpec, backend: str) -> None:
    problem = backend_problem(spec, backend)
    if problem is not None:
        raise InputError([problem])
