"""A model's and a judge's settings (`configs/models/*.yaml`, `configs/judges/*.yaml`): the
engine, sampling and server settings, and the settings hash every record carries."""

from __future__ import annotations

import json
import re
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from gamut_local.config.base import ConfigModel, LocatedConfig, name_field
from gamut_local.config.weights import weights_key
from gamut_local.errors import redact
from gamut_local.hashing import short_hash
from gamut_local.vocab import HUMAN_PREFIX

EXTRA_TYPES = {"pipeline_parallel_size": (int, "a whole number >= 1"),
               "data_parallel_size": (int, "a whole number >= 1"),
               "tokenizer_mode": (str, "a string"), "distributed_executor_backend": (str, "a string")}


class EngineArgs(ConfigModel):
    """Passed to the engine; None means the engine's default."""

    tensor_parallel_size: int = Field(default=1, ge=1, description=(
        "GPUs one copy of the model is split over (vLLM tensor parallelism); a 235B model needs 8. "
        "Must divide the model's attention heads (checked before anything loads)."))
    max_model_len: int | None = Field(default=None, ge=1, examples=[16384], description=(
        "Longest prompt + output in tokens; lower it to fit a GPU's memory. Unset: the model's own."))
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1, description=(
        "Share of each GPU's memory vLLM may take for weights and KV cache."))
    enforce_eager: bool = Field(default=False, description=(
        "Skip CUDA graph capture: starts faster, runs slower (for debugging)."))
    dtype: str = Field(default="auto", examples=["bfloat16"], description=(
        "Weight and activation type (`auto`, `bfloat16`, `float16`, `float32`); part of the settings hash."))
    seed: int = Field(default=0, ge=0, description="The engine's random seed; part of the settings hash.")
    enable_prefix_caching: bool = Field(default=True, description=(
        "Reuse the KV cache of a shared prompt start (a judge sees one answer with many checks)."))
    kv_cache_memory_bytes: int | None = Field(default=None, ge=1, examples=[4294967296], description=(
        "A fixed KV cache size instead of `gpu_memory_utilization` (vLLM's CPU build needs it)."))
    limit_mm_per_prompt: dict[str, int] = Field(default={"image": 1, "video": 0}, description=(
        "Most images/videos one prompt may carry; a GAMUT question has one image."))
    min_pixels: int | None = Field(default=None, ge=1, examples=[262144], description=(
        "Smallest image size in pixels the processor scales to (Qwen-VL style: multiples of 32*32)."))
    max_pixels: int | None = Field(default=1280 * 32 * 32, ge=1, description=(
        "Largest image size in pixels; bounds the visual tokens per image and vLLM's memory profile."))
    max_num_seqs: int | None = Field(default=None, ge=1, examples=[256], description=(
        "Most sequences in one engine batch. Unset: the engine's default."))
    extra: dict = Field(default={}, examples=[{"quantization": "fp8", "pipeline_parallel_size": 2}],
                        description=("Anything else, passed to the engine constructor as is; part of "
                                     "the settings hash."))

    @field_validator("extra")
    @classmethod
    def _extra_keys_we_read(cls, extra: dict) -> dict:
        """The keys of `extra` gamut-local reads itself (GPU counts, the SLURM layout, the
        tokenizer) hold what it reads there; the rest go to the engine unread."""
        for key, (kind, what) in EXTRA_TYPES.items():
            value = extra.get(key)
            if key in extra and (isinstance(value, bool) or not isinstance(value, kind)):
                raise ValueError(f"extra.{key}: expected {what}, got {value!r}")
        for key in ("pipeline_parallel_size", "data_parallel_size"):
            if extra.get(key, 1) < 1:
                raise ValueError(f"extra.{key}: expected a whole number >= 1, got {extra[key]!r}")
        return extra


class Sampling(ConfigModel):
    """How outputs are sampled; all of it is part of the settings hash."""

    max_tokens: int = Field(default=1024, ge=1, examples=[2048], description=(
        "Longest answer in tokens; with `thinking_budget` set, a reasoning model's thinking "
        "does not count against it."))
    temperature: float = Field(default=0.0, ge=0, description="0 is greedy decoding, as in the paper.")
    top_p: float = Field(default=1.0, gt=0, le=1, description="Nucleus sampling mass (1 keeps all tokens).")
    seed: int = Field(default=0, ge=0, description="Sampling seed.")
    # Constrain the output to this JSON schema (set by `draft`, never needed in a model YAML).
    # It changes outputs, so it is part of the settings hash whenever it is set.
    json_schema: dict | None = Field(default=None, examples=[{"type": "object"}], description=(
        "Constrain the output to this JSON schema; set by `draft`, never needed in a model config."))


_BASE_URL = re.compile(r"https?://[^\s/?#]+(/\S*)?")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def _looks_like_a_key(name: str) -> bool:
    """A variable's name is words joined by `_` (OPENAI_API_KEY, HF_TOKEN_2); a long run of
    letters and digits with no `_` (a hex or base-62 key) is a pasted key."""
    return len(name) >= 20 and any(c.isdigit() for c in name) and any(len(w) >= 20 for w in name.split("_"))


class ServerArgs(ConfigModel):
    """Where a `backend: openai` model is served: any OpenAI-compatible chat endpoint (vLLM,
    SGLang, a provider). The API key is read from the environment only, never from a file."""

    base_url: str = Field(examples=["http://gpu-node-1:8000/v1"], description=(
        "The API root, up to and including `/v1`; no credentials in it (no `user:password@`, "
        "no `?key=`): the key goes in the variable `api_key_env` names."))
    api_key_env: str | None = Field(default=None, examples=["OPENAI_API_KEY"], description=(
        "The NAME of the environment variable holding the API key (sent as a bearer token), "
        "never the key itself. Unset: no key."))
    request_timeout: float = Field(default=300.0, gt=0, description=(
        "Seconds one request may take before it is retried."))
    max_concurrency: int = Field(default=32, ge=1, description=(
        "Most requests in flight at once (the server batches them)."))
    retries: int = Field(default=4, ge=0, description=(
        "Re-sends of any request (start-up ones included) after a timeout, a dropped connection, "
        "a 408, 429 or 5xx, with growing, jittered waits; still failing, the stage stops without "
        "writing the chunk in flight (never an `invalid` verdict), and a rerun asks it again."))
    # Neither check quotes what it refuses: a refused value may be the very secret a person
    # pasted in the wrong place (messages show URLs through `errors.redact`).
    @field_validator("base_url", mode="before")
    @classmethod
    def _an_address_without_secrets(cls, url):
        if not isinstance(url, str) or not _BASE_URL.fullmatch(url):
            raise ValueError("must be an http:// or https:// address such as http://gpu-node-1:8000/v1, got "
                             + (repr(redact(url)) if isinstance(url, str) else "a value that is not text"))
        if redact(url) != url:
            raise ValueError(f"must not hold credentials (got {redact(url)!r}): a config file is no place for "
                             "a secret; put the key in an environment variable and name it in `api_key_env`")
        return url

    @field_validator("api_key_env", mode="before")
    @classmethod
    def _a_variable_name(cls, name):
        if name is None:
            return None
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name) or _looks_like_a_key(name):
            raise ValueError("must be the NAME of an environment variable (letters, digits and _, e.g. "
                             "OPENAI_API_KEY), not the key itself; the value given is not shown, as it may be "
                             "a key: set the variable to the key and write its name here")
        return name

    serve: str | None = Field(default=None, examples=["/models/Qwen3-VL-235B-A22B-Instruct-FP8"], description=(
        "Weights for `gamut-local slurm` to serve this judge from (a folder or hub id): the job "
        "graph then starts `vllm serve` on them in a job of its own, with this judge's `engine` "
        "settings and GPUs, and its judging arrays run on CPU nodes against it, reaching it at "
        "the address the server job hands them (`base_url` is then used only outside SLURM). "
        "A judge only (docs/slurm.md)."))


class ModelSpec(LocatedConfig):
    name: str = name_field("The `model` / `judge` field of every record, and part of file names. "
                            "Defaults to the config file's name.", "my-model-7b")
    path: str = Field(min_length=1, examples=["${GAMUT_MODEL_CACHE:-../../.cache/models}/my-model",
                                              "Qwen/Qwen3-VL-8B-Instruct"], description=(
        "The weights: a local folder (relative to this file; `${VAR:-default}` expanded) or a "
        "Hugging Face hub id, read offline from the cache."))
    backend: Literal["vllm", "transformers", "auto", "openai"] = Field(default="auto", description=(
        "The engine; `auto` takes vLLM where it is installed, else transformers; `openai` sends "
        "requests to the server in `server`, and `path` is then the served model's name."))
    vision: bool = Field(default=True, description=(
        "Whether the model takes images; without vision it answers the `text_only` variant only."))
    engine: EngineArgs = Field(default=EngineArgs(), description="Engine settings (below).")
    sampling: Sampling = Field(default=Sampling(), description="Sampling settings (below).")
    system_prompt: str | None = Field(default=None, examples=["You are a helpful assistant."],
                                      description=("A system message before every prompt; part of the "
                                                   "settings hash."))
    gpus: int | None = Field(default=None, ge=1, examples=[8], description=(
        "GPUs one task takes. Unset: `tensor_parallel_size` x `extra.pipeline_parallel_size`."))
    nodes: int = Field(default=1, ge=1, description=(
        "Nodes one task spans; above 1 the engine runs through Ray across them (docs/slurm.md)."))
    chat_template_kwargs: dict = Field(default={}, examples=[{"enable_thinking": False}], description=(
        "Keywords for the model's chat template, in both engines; a judge of a reasoning model "
        "needs `{enable_thinking: false}` where its template has that switch. Part of the settings hash."))
    thinking_budget: int | None = Field(default=None, ge=1, examples=[4096], description=(
        "A reasoning candidate's tokens of thinking, apart from `sampling.max_tokens` for the "
        "answer: vLLM ends the reasoning block after this many (needs `reasoning_parser`; vLLM only), "
        "and the answer after it is held to `sampling.max_tokens` (docs/architecture.md, Reasoning "
        "models). Unset: `sampling.max_tokens` holds thinking and answer together."))
    reasoning_parser: str | None = Field(default=None, examples=["qwen3"], description=(
        "vLLM's reasoning parser for this model (its `--reasoning-parser` name), used to split "
        "a candidate's reasoning from its answer. Unset, or with transformers: the text up to "
        "the last `</think>` is the reasoning."))
    server: ServerArgs | None = Field(default=None, examples=[{"base_url": "http://gpu-node-1:8000/v1"}], description=(
        "The endpoint of a `backend: openai` model (docs/engines.md)."))

    @model_validator(mode="after")
    def _server_only_for_openai(self):
        if (self.server is None) == (self.backend == "openai"):
            raise ValueError("`server` is required with backend: openai, and only there")
        return self

    @property
    def config_file(self) -> str | None:
        """The YAML file this spec came from; None for a spec written inline in a run config."""
        return self._source

    def variants(self, run_variants) -> list[str]:
        """The run's variants this model can answer: without vision, only `text_only`."""
        return [v for v in run_variants if v != "multimodal" or self.vision]

    def samples(self) -> bool:
        """Whether `sampling` shapes this model's outputs (a judge only reads label probabilities)."""
        return True

    def total_gpus(self) -> int:
        """GPUs one task of this model takes: `gpus`, else tensor x pipeline x data parallel
        size (a served judge's `vllm serve --data-parallel-size 2` runs two copies of the
        model in its one job, each on tensor x pipeline GPUs)."""
        pipeline = int(self.engine.extra.get("pipeline_parallel_size", 1) or 1)
        data = int(self.engine.extra.get("data_parallel_size", 1) or 1)
        return self.gpus or self.engine.tensor_parallel_size * pipeline * data

    def settings_hash(self) -> str:
        """What determines the outputs, hashed; part of every record's resume key: the
        weights' identity (not where they lie, so a moved checkout or cache still resumes),
        the engine settings that change outputs (all of `extra`), sampling, system prompt."""
        keep = self.model_dump(include={"engine", "sampling", "system_prompt"})
        keep["engine"] = {k: v for k, v in keep["engine"].items()
                          if k in ("dtype", "seed", "max_model_len", "min_pixels", "max_pixels", "extra")}
        keep["weights"] = weights_key(self)  # reads the model folder: config/weights.py
        if keep["sampling"].get("json_schema") is None:  # unset: the hashes of earlier runs stay valid
            keep["sampling"].pop("json_schema", None)
        for key in ("chat_template_kwargs", "thinking_budget", "reasoning_parser"):
            value = getattr(self, key)
            if value:  # unset: the hashes of earlier runs stay valid
                keep[key] = value
        if not self.samples():
            keep.pop("sampling")
        return short_hash(json.dumps(keep, sort_keys=True))


# Why a judge refuses a key a candidate takes: classify reads the label greedily off one
# decoding step restricted to the labels' first tokens, or off a choice constrained to the labels
# (engines/labels.py), with a token budget the labels fix.
JUDGE_UNUSED = {
    "sampling": "a judge does not sample: its label is read greedily from the label probabilities "
                "(one restricted decoding step, or an output constrained to the labels, with a budget "
                "the labels' length fixes), so this setting would change nothing; remove it",
    "thinking_budget": "a judge does not think: its label is read right after the assistant prefix; "
                       "remove it (and set chat_template_kwargs: {enable_thinking: false} for a reasoning model)",
    "reasoning_parser": "a judge produces no reasoning to split off; remove it",
    "max_retries": "removed: an unreadable first-token readout is re-asked once with the other readout "
                   "method (a choice constrained to the labels); re-sending the same greedy request "
                   "gave the same output, so the setting is gone; remove it",
}


def _unused(where: tuple, value, why: str) -> InitErrorDetails:
    return InitErrorDetails(type=PydanticCustomError("judge_unused", "not used by a judge: {why}", {"why": why}),
                            loc=where, input=value)


class JudgeSpec(ModelSpec):
    sees_image: bool = Field(default=False, description=(
        "The judge gets the question's image too (the paper's judge_sees_image)."))
    sampling: Sampling = Field(default=Sampling(), description=(
        "Not used by a judge, and any key here is an error: the label is read greedily from the "
        "label probabilities, with a token budget the labels fix."))

    @model_validator(mode="before")
    @classmethod
    def _only_what_a_judge_uses(cls, data):
        """Keys a judge ignores are errors at their own line, with the reason (JUDGE_UNUSED)."""
        if not isinstance(data, dict):
            return data
        found = []
        for key, why in JUDGE_UNUSED.items():
            value = data.get(key)
            if key == "sampling" and isinstance(value, dict):
                found += [_unused((key, k), v, why) for k, v in value.items()]
            elif key in data and value is not None and not isinstance(value, Sampling):
                found.append(_unused((key,), value, why))
        if found:
            raise ValidationError.from_exception_data(cls.__name__, found)
        return data

    @field_validator("name")
    @classmethod
    def _not_a_person(cls, name: str) -> str:
        # Human verdicts get "newest record wins" and count as gold: a model must never pass
        # for an annotator, nor share an annotator's verdict folder.
        if isinstance(name, str) and name.startswith(HUMAN_PREFIX):
            raise ValueError(f"judge names starting with {HUMAN_PREFIX!r} are reserved for people "
                             "(`gamut-local view --annotator`); rename this judge")
        return name

    @field_validator("sees_image")
    @classmethod
    def _sees_only_with_vision(cls, sees: bool, info) -> bool:
        if sees and info.data.get("vision") is False:
            raise ValueError("this judge has vision: false, so it cannot see the image")
        return sees

    def samples(self) -> bool:
        return False
