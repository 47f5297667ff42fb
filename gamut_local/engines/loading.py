"""Loading an engine: the back end a model spec asks for, imported only when chosen."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager

from gamut_local.config import JudgeSpec, ModelSpec, resolve_model_path
from gamut_local.engines.base import Engine
from gamut_local.engines.choice import pick_backend, require, tensor_parallel_problem
from gamut_local.engines.identity import judge_identity
from gamut_local.errors import InputError


def load_engine(spec: ModelSpec, startup=None) -> Engine:
    """Build the engine a model spec asks for. The model path is checked first, so a missing
    folder or uncached hub id is an InputError naming it, not a traceback from deep inside a
    loader. `startup`: what a served model's server said at the stage's start-up
    (`identity.start_up`; asked here if None), so the engine reads as the stage's hash says."""
    if spec.backend == "openai":  # served elsewhere: nothing to load, the server is checked
        require(spec, "openai")
        from gamut_local.engines.served.engine import OpenAIEngine

        return OpenAIEngine(spec, startup)
    path, problem = resolve_model_path(spec)
    if problem is not None:
        raise InputError([problem])
    problem = tensor_parallel_problem(spec, path)
    if problem is not None:
        raise InputError([problem])
    backend = pick_backend(spec, path)
    if isinstance(spec, JudgeSpec):
        judge_identity(spec)  # refuses, before any weights load, a label read inside <think>
    require(spec, backend)
    started = time.monotonic()
    if backend == "vllm":
        from gamut_local.engines.vllm_engine import VllmEngine

        engine = VllmEngine(spec, path)
    else:
        from gamut_local.engines.transformers_engine import TransformersEngine

        engine = TransformersEngine(spec, path)
    # One line per load in every job's log: how often a task loaded, and what a load costs here
    # (what `plan.startup_minutes` and `plan.load_gb_per_minute` stand for).
    print(f"gamut-local: {spec.name} loaded ({backend}, {path}) in {time.monotonic() - started:.1f} s",
          file=sys.stderr, flush=True)
    return engine


@contextmanager
def load_and_close(spec, startup=None):
    """The default way a stage gets an engine: load it, close it when the stage is done.

    Stages take `open_engine` (a callable spec -> context manager yielding an engine; a served
    model's also takes `startup=`, what its server said at the stage's start-up) so that `run`
    can keep one engine for two stages when candidate and judge are the same weights.
    """
    engine = load_engine(spec, startup)
    try:
        yield engine
    finally:
        engine.close()
