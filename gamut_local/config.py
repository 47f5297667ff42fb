"""YAML configs for models, judges, runs and sweeps, validated by pydantic on load.

A run names its models and judges either inline or by a name that resolves to
`configs/models/<name>.yaml` / `configs/judges/<name>.yaml`. The `configs/` folder is looked
for above the run file first, then in the current directory, then in the project checkout
this package lives in.

Paths inside a config are relative to the config file that holds them. `${VAR}` and
`${VAR:-default}` are expanded first (e.g. `${GAMUT_MODEL_CACHE:-../../.cache/models}/x`), so
one config serves machines that keep weights in different places. A model `path` of the form
`org/name` that is not a local folder is a Hugging Face hub id, read offline from the cache.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import types
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from gamut_local.errors import InputError, Problem, plain_message, redact, unknown_key_message
from gamut_local.vocab import DEFAULT_VARIANT, HUMAN_PREFIX, NAME_PATTERN, SMALL_POOL_MAX, VARIANTS, Variant

# A SLURM time limit: M, M:S, H:M:S, D-H, D-H:M or D-H:M:S.
SLURM_TIME = r"(\d+-\d+(:\d+){0,2}|\d+(:\d+){0,2})"
SLURM_MEM = r"\d+[KMGT]?"  # sbatch --mem: a number with an optional K/M/G/T unit


def _name_field(description: str, example: str):
    """A name that becomes part of file names: safe characters only."""
    return Field(min_length=1, pattern=f"^{NAME_PATTERN}$", examples=[example], description=description)


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid")


Lines = dict[tuple, int]  # key path (keys and list indexes) -> 1-based line in its YAML file
EXTRA_TYPES = {"pipeline_parallel_size": (int, "a whole number >= 1"),
               "data_parallel_size": (int, "a whole number >= 1"),
               "tokenizer_mode": (str, "a string"), "distributed_executor_backend": (str, "a string")}


class _Located(_Config):
    """A config read from a YAML file: it remembers the file and the line of each of its keys,
    so a problem found later (a model folder that is not there) still points at the line."""

    _source: str | None = PrivateAttr(default=None)
    _lines: Lines = PrivateAttr(default_factory=dict)
    _prefix: str = PrivateAttr(default="")  # where an inline spec sits in its file: "judges.0"

    @property
    def source(self) -> str:
        """The YAML file this spec came from, for messages that name it."""
        return self._source or "<config>"

    def line_of(self, *key) -> int | None:
        """The line of `key` (a path of keys) in the spec's file; None when not written there."""
        return self._lines.get(tuple(key))

    def problem(self, field: str, message: str) -> Problem:
        """A Problem at `field` (dotted) of this spec, with its file and line."""
        parts = tuple(int(x) if x.isdigit() else x for x in field.split(".")) if field else ()
        shown = ".".join(x for x in (self._prefix, field) if x)
        return Problem(self.source, self.line_of(*parts), shown, message)


class EngineArgs(_Config):
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


class Sampling(_Config):
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


class ServerArgs(_Config):
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


class ModelSpec(_Located):
    name: str = _name_field("The `model` / `judge` field of every record, and part of file names. "
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
        local, _ = resolve_model_path(self)
        keep["weights"] = (weights_identity(local, self.path if is_hub_id(self.path) else None)
                           if local else {"path": self.path})
        if self.server is not None and self.server.serve:  # served by the run's own job, on any node:
            served, _ = resolve_model_path(self.model_copy(update={"path": self.server.serve, "backend": "vllm",
                                                                   "server": None}))
            keep["weights"] = {"serve": weights_identity(served, self.server.serve if is_hub_id(self.server.serve)
                                                         else None) if served else {"path": self.server.serve},
                               "model": self.path}
        elif self.server is not None:  # served: the endpoint's host and model name (not the key)
            keep["weights"] = {"server": server_host(self.server.base_url), "model": self.path}
        if keep["sampling"].get("json_schema") is None:  # unset: the hashes of earlier runs stay valid
            keep["sampling"].pop("json_schema", None)
        for key in ("chat_template_kwargs", "thinking_budget", "reasoning_parser"):
            value = getattr(self, key)
            if value:  # unset: the hashes of earlier runs stay valid
                keep[key] = value
        if not self.samples():
            keep.pop("sampling")
        return hashlib.sha256(json.dumps(keep, sort_keys=True).encode()).hexdigest()[:12]


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


_SBATCH_WORD = r"^[A-Za-z0-9_.,:+=%-]+$"  # a partition, account or QoS name: one word, no newline
_SBATCH_LINE = re.compile(r"(?:#SBATCH\s+)?(--?[A-Za-z][A-Za-z0-9-]*)(?:[= ](\S.*))?")
_SBATCH_CHECKED = {"--time": SLURM_TIME, "-t": SLURM_TIME, "--mem": SLURM_MEM}


class SlurmSpec(_Config):
    partition: str | None = Field(default=None, pattern=_SBATCH_WORD, examples=["gpu"],
                                  description="sbatch --partition. Unset: the cluster's default.")
    account: str | None = Field(default=None, pattern=_SBATCH_WORD, examples=["my-lab"],
                                description="sbatch --account.")
    qos: str | None = Field(default=None, pattern=_SBATCH_WORD, examples=["normal"],
                            description="sbatch --qos.")
    time_generate: str = Field(default="12:00:00", pattern=f"^{SLURM_TIME}$",
                               description="Time limit of one generation task (sbatch --time).")
    time_judge: str = Field(default="24:00:00", pattern=f"^{SLURM_TIME}$",
                            description="Time limit of one judging task.")
    time_score: str = Field(default="01:00:00", pattern=f"^{SLURM_TIME}$",
                            description="Time limit of the scoring and report job.")
    cpus_per_gpu: int = Field(default=4, ge=1, description=(
        "CPU cores asked for per GPU (a node needs its GPUs x this many cores to run a task on all of them)."))
    mem_per_gpu: str = Field(default="32G", pattern=f"^{SLURM_MEM}$",
                             description="Host memory asked for per GPU.")
    gpus_per_node: int = Field(default=8, ge=1, description=(
        "GPUs on one node of the partition; a task needing more spans nodes."))
    shards_generate: Annotated[int, Field(ge=1)] | dict[str, Annotated[int, Field(ge=1)]] | None = Field(
        default=None, examples=[2, {"qwen3-vl-235b-a22b": 2}], description=(
            "Array tasks of a model's generation array; each answers a slice of the questions in every "
            "variant and loads the model once. A number for every model, or one per model name. Unset "
            "(or a model left out): as many as keep loading at most `plan.max_load_share` of the model's "
            "work, and enough to end within `time_generate` (`plan` shows the counts)."))
    shards_judge: Annotated[int, Field(ge=1)] | dict[str, Annotated[int, Field(ge=1)]] | None = Field(
        default=None, examples=[1, {"qwen3-vl-235b-a22b-fp8": 2}], description=(
            "Array tasks of a judge's array; each grades every system's answers to a slice of the "
            "questions and loads the judge once. A number for every judge, or one per judge name. "
            "Unset: chosen as for `shards_generate`."))
    extra_sbatch: list[str] = Field(default=[], examples=[["--constraint=h100"]], description=(
        "More sbatch options, one per entry; `--time` and `--mem` values are checked."))
    setup: list[str] = Field(default=[], examples=[["module load cuda/12.4", "source .venv/bin/activate"]],
                             description=("Shell lines run at the top of every job, after it has changed "
                                          "to the project folder."))
    cpus_score: int = Field(default=4, ge=1, description="CPU cores of the scoring and report job (no GPU).")
    mem_score: str = Field(default="32G", pattern=f"^{SLURM_MEM}$", description="Memory of the scoring job.")
    max_concurrent: int | None = Field(default=None, ge=1, examples=[4], description=(
        "At most this many tasks of one array at once (the array's %N throttle)."))
    launcher: str = Field(default="gamut-local", examples=["python -m gamut_local.cli"],
                          description="How job scripts call the command line tool.")
    templates: str | None = Field(default=None, examples=["my-slurm-templates"], description=(
        "A folder of your own sbatch templates. Unset: the project's `slurm/`."))
    network_interface: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$",
                                          examples=["ib0"], description=(
        "For judges on several nodes: the network interface the nodes reach each other on. Each "
        "node's Ray, vLLM (VLLM_HOST_IP) and NCCL/Gloo (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME) use "
        "its address there. Unset: the address the node's name resolves to (a loopback one is refused)."))

    @field_validator("shards_generate", "shards_judge", mode="wrap")
    @classmethod
    def _shard_counts(cls, value, handler):
        """One message for a bad count, not one per member of the union."""
        try:
            return handler(value)
        except ValidationError:
            counts = value.items() if isinstance(value, dict) else [(None, value)]
            for name, n in counts:
                if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                    where = f"{name}: " if name is not None else ""
                    raise ValueError(f"{where}must be at least 1, got {n!r}" if isinstance(n, int)
                                     and not isinstance(n, bool) else
                                     f"{where}must be a number of tasks (at least 1), or a mapping of "
                                     f"names to one, got {n!r}") from None
            raise

    @field_validator("extra_sbatch")
    @classmethod
    def _sbatch_lines(cls, lines: list[str]) -> list[str]:
        """Each line one sbatch option (`--name[=value]`); time and memory values checked,
        so `--time=banana` fails here, not in the queue."""
        for line in lines:
            m = _SBATCH_LINE.fullmatch(line.strip())
            if "\n" in line or not m:
                raise ValueError(f"{line!r} is not one sbatch option like --constraint=h100")
            pattern = _SBATCH_CHECKED.get(m.group(1))
            if pattern and not re.fullmatch(pattern, (m.group(2) or "").strip()):
                raise ValueError(f"{line!r}: {m.group(2)!r} is not a valid {m.group(1)} value")
        return lines


class PlanSpec(_Config):
    """Throughput assumptions for `gamut-local plan` (tokens per second per GPU)."""

    prefill_tokens_per_s_per_gpu: float = Field(default=20000.0, gt=0, description=(
        "Prompt tokens read per second per GPU by an 8B dense model (scaled per model)."))
    decode_tokens_per_s_per_gpu: float = Field(default=2000.0, gt=0, description=(
        "Output tokens written per second per GPU by an 8B dense model, batched (scaled per model)."))
    mean_answer_tokens: int = Field(default=600, ge=0, description=(
        "Tokens of an answer not yet written (answers already there are measured)."))
    mean_question_tokens: int | None = Field(default=None, ge=0, examples=[60], description=(
        "Tokens of a question. Unset: measured on the dataset (characters / `chars_per_token`)."))
    image_tokens: int | None = Field(default=None, ge=0, examples=[1024], description=(
        "Tokens of one image in a multimodal prompt, for every model. Unset: per model, from its "
        "processor settings or its family's figure at the release's image size (`plan` says which)."))
    judge_instruction_tokens: int = Field(default=400, ge=0, description=(
        "Tokens of the judge's instructions around one (answer, check) pair."))
    mean_check_tokens: int | None = Field(default=None, ge=0, examples=[30], description=(
        "Tokens of a check. Unset: measured on the dataset's checks."))
    chars_per_token: float = Field(default=4.0, gt=0, description="Characters per token, to measure text.")
    judge_output_tokens: int = Field(default=1, ge=0, description=(
        "Tokens a judge reads its label from, charged as prefill: the label comes out of the step "
        "that reads the prompt (one restricted step), not from decoding."))
    startup_minutes: float = Field(default=2.0, ge=0, description=(
        "Minutes each task spends before its first request besides reading weights: starting the "
        "engine, compiling, capturing CUDA graphs."))
    load_gb_per_minute: float = Field(default=20.0, gt=0, description=(
        "How fast one task reads weights from storage into GPU memory, in GB per minute."))
    max_load_share: float = Field(default=0.1, gt=0, lt=1, description=(
        "The most of an engine's GPU-hours that starting it and loading its weights may take where "
        "`slurm.shards_*` leave the shard count to the plan: more shards load more often."))
    weights_gb: dict[str, Annotated[float, Field(ge=0)]] = Field(
        default={}, examples=[{"qwen3-vl-235b-a22b-fp8": 240}], description=(
            "Per model or judge name: the size of its weights in GB, for the loading time. Unset: "
            "measured on the model folder, else assumed for an 8B model in bf16, and `plan` says so."))
    throughput_scale: dict[str, Annotated[float, Field(gt=0)]] = Field(
        default={}, examples=[{"qwen3-vl-2b": 2.5, "qwen3-vl-235b-a22b": 0.15}], description=(
            "Per model or judge name: its speed relative to an 8B dense model (multiplies both "
            "throughputs). A model without an entry counts as 1.0, and `plan` says so."))


class CompileSpec(_Config):
    small_pool_max: int = Field(default=SMALL_POOL_MAX, ge=0, description=(
        "Flexible lists with at most this many options get one check per option beyond the "
        "coverage check. Every stage that needs checks compiles with it."))


class CalibrationSpec(_Config):
    """Corrected scores in `gamut-local run`: after judging, draw the calibration sample and
    correct every model judge's scores by the gold judges' verdicts on it (docs/correction.md)."""

    gold: str = Field(default="human-*", min_length=1, examples=["human-*"], description=(
        "The gold judges (a name or pattern): their verdicts on the sample correct the model judges'."))
    responses: int = Field(ge=1, examples=[100], description="Responses drawn per system (`sample --responses`).")
    per: Literal["model", "shared"] = Field(default="model", description=(
        "`model`: each system its own questions; `shared`: the same questions for every system (paired)."))
    seed: int = Field(default=0, ge=0, description="The draw's seed (`sample --seed`).")


class RunSpec(_Located):
    name: str = _name_field("The run's name: the report's title and the SLURM jobs' prefix.", "my-eval")
    dataset: str = Field(min_length=1, examples=["${GAMUT_DATA:-../../data/gamut}/gamut.jsonl"], description=(
        "The questions: GAMUT JSONL (or the release parquet), relative to this file."))
    output_dir: str = Field(min_length=1, examples=["${GAMUT_RUNS:-../../runs}/my-eval"], description=(
        "The run folder everything is written to (and resumed from), relative to this file."))
    models: list[ModelSpec] = Field(default=[], examples=[["qwen3-vl-8b", "my-model-7b"]], description=(
        "The candidates: names of files in configs/models/ or inline model settings."))
    variants: list[Variant] = Field(default=[DEFAULT_VARIANT], examples=[["multimodal", "text_only"]],
                                    description="Which forms of each question the candidates answer.")
    judges: list[JudgeSpec] = Field(min_length=1, examples=[["qwen3-vl-235b-a22b-fp8"]], description=(
        "The judges: names of files in configs/judges/ or inline judge settings."))
    extra_answers: list[str] = Field(default=[], examples=[["answers/reference.jsonl"]], description=(
        "Answer files judged beside the generated ones (e.g. the sample's reference answers)."))
    extra_verdicts: list[str] = Field(default=[], examples=[["verdicts/gold.jsonl"]], description=(
        "Verdict files scored beside the judged ones (e.g. human gold verdicts)."))
    seed: int = Field(default=0, ge=0, description="The run's seed (bootstrap confidence intervals).")
    # Requests per engine call and per atomic append: a killed job loses at most one chunk.
    # Large enough to keep the engine's batch full; small enough to lose little on a kill.
    chunk_size: int = Field(default=1024, ge=1, description=(
        "Requests per engine call and per atomic append: a killed job loses at most one chunk."))
    compile: CompileSpec = Field(default=CompileSpec(), description=(
        "How meta-rubrics compile into checks (the judge, score, viewer and plan all use it)."))
    slurm: SlurmSpec = Field(default=SlurmSpec(), description="The SLURM jobs (`gamut-local slurm`).")
    plan: PlanSpec = Field(default=PlanSpec(), description="The estimate's assumptions (`gamut-local plan`).")
    calibration: CalibrationSpec | None = Field(default=None, examples=[{"gold": "human-*", "responses": 100}], description=(
        "Corrected scores in `gamut-local run`: the sample to draw and the gold judges (unset: none)."))

    @property
    def source(self) -> str:
        """The run YAML this spec came from, for messages that name it."""
        return self._source or "<run config>"

    def pick(self, kind: Literal["models", "judges"], name: str | None) -> list[ModelSpec]:
        """All of the run's models (or judges), or the one named on the command line."""
        specs = getattr(self, kind)
        if name is None:
            return list(specs)
        chosen = [m for m in specs if m.name == name]
        if not chosen:
            known = ", ".join(m.name for m in specs) or "none"
            message = f"no {kind[:-1]} named {name!r} in this run (known: {known})"
            raise InputError([self.problem(kind, message)])
        return chosen

    def select_variants(self, variant: str | None) -> list[str]:
        """The run's variants, or the one named on the command line (which it must include)."""
        if variant is None:
            return list(self.variants)
        if variant not in VARIANTS:
            raise InputError([Problem("--variant", None, "",
                                      f"expected one of {', '.join(VARIANTS)}, got {variant!r}")])
        if variant not in self.variants:
            raise InputError([self.problem("variants", f"this run does not include the {variant!r} variant")])
        return [variant]


MAX_YAML_NODES = 100_000  # values that aliases may add to a document; far above any real use


# libyaml's parser where PyYAML was built with it: the pure-Python scanner takes a minute
# on an exported rubric of 20,000 items. The constructor (and so every rule below) is the same.
_SAFE_BASE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_SAFE_BASE):
    """Safe YAML with a key given twice refused (PyYAML keeps the last silently) and aliases
    bounded: a cyclic alias, or an alias bomb that would expand to gigabytes, is an error."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode) and not any(k.tag == _MERGE for k, _ in node.value):
            return self._plain_mapping(node, deep)
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE:
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                if key in seen:
                    raise _twice(key, seen[key], key_node)
                seen[key] = key_node.start_mark.line + 1
            except TypeError:  # an unhashable key: PyYAML reports it below
                continue
        return super().construct_mapping(node, deep=deep)

    def _plain_mapping(self, node, deep: bool) -> dict:
        """A mapping without merge keys (all an exported rubric has), checked and built in one
        pass: the same value and errors as above, in half the time on 10,000 files."""
        mapping: dict = {}
        for key_node, value_node in node.value:  # every key first, as above, then the values
            key = self.construct_object(key_node, deep=True)
            try:
                if key in mapping:
                    first = next(k for k, _ in node.value if self.construct_object(k, deep=True) == key)
                    raise _twice(key, first.start_mark.line + 1, key_node)
            except TypeError:  # an unhashable key: PyYAML's own message
                return super().construct_mapping(node, deep=deep)
            mapping[key] = value_node
        for key, value_node in mapping.items():
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


_MERGE = "tag:yaml.org,2002:merge"


def _twice(key, first_line: int, key_node) -> yaml.constructor.ConstructorError:
    return yaml.constructor.ConstructorError(
        None, None, f"key {key!r} appears twice (first on line {first_line})", key_node.start_mark)


# An anchor (`&name`) stands after a space, a flow indicator or at a line's start, never after a
# letter or digit ("R&D" is text). Without one a document has no aliases to check.
_MAYBE_ANCHOR = re.compile(r"(?<!\w)&")


def _check_aliases(node) -> None:
    """Raise on a cyclic alias, or on aliases that add more than MAX_YAML_NODES values to the
    document (an alias bomb); a large document without aliases (an exported rubric of 10,000
    items) is not bounded."""
    memo: dict = {}
    if _expanded_size(node, memo, set()) > len(memo) + MAX_YAML_NODES:
        raise yaml.composer.ComposerError(None, None, f"expands to more than {MAX_YAML_NODES} values "
                                          "through its aliases", node.start_mark)


def _expanded_size(node, memo: dict, stack: set) -> int:
    """Nodes in the document with every alias expanded (memoised: linear in the distinct
    nodes); raises on a cycle."""
    if id(node) in stack:
        raise yaml.composer.ComposerError(None, None, "an alias refers to itself (a cycle)", node.start_mark)
    if id(node) in memo:
        return memo[id(node)]
    stack.add(id(node))
    if isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(n, memo, stack) for n in node.value)
    elif isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, memo, stack) + _expanded_size(v, memo, stack) for k, v in node.value)
    else:
        size = 1
    stack.discard(id(node))
    memo[id(node)] = size
    return size


def _node_lines(node, path: tuple = (), out: Lines | None = None) -> Lines:
    """The line of every key and list item under `node`, by key path; merged keys (`<<`)
    count at the line of their anchor, keys written out win over merged ones."""
    out = {} if out is None else out
    if isinstance(node, yaml.MappingNode):
        merged = [v for k, v in node.value if k.tag == "tag:yaml.org,2002:merge"]
        for k, v in node.value:
            if k.tag != "tag:yaml.org,2002:merge" and isinstance(k, yaml.ScalarNode):
                out.setdefault((*path, k.value), k.start_mark.line + 1)
                _node_lines(v, (*path, k.value), out)
        for v in merged:
            _node_lines(v, path, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            out.setdefault((*path, i), item.start_mark.line + 1)
            _node_lines(item, (*path, i), out)
    return out


def load_yaml_lines(text: str) -> tuple[object, Lines]:
    """YAML as our configs are read (safe, no repeated keys, aliases bounded), with the line
    of every key, so an error can say where the key is written."""
    loader = _StrictLoader(text)  # a SafeLoader subclass
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}
        if "&" in text and _MAYBE_ANCHOR.search(text):  # `in` first: the look-behind scan is slow
            _check_aliases(node)
        return loader.construct_document(node), _node_lines(node)
    finally:
        loader.dispose()


def load_yaml_text(text: str):
    """YAML as our configs are read: safe, no repeated keys, aliases bounded."""
    return load_yaml_lines(text)[0]


def load_yaml_node(text: str):
    """(node tree, value) of one YAML document read as `load_yaml_text` reads it: the tree for
    callers that point at the line of a field (`import` of an edited rubric)."""
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        if "&" in text and _MAYBE_ANCHOR.search(text):  # `in` first: the look-behind scan is slow
            _check_aliases(node)
        return node, loader.construct_document(node)
    finally:
        loader.dispose()


def _read_yaml(path: Path) -> tuple[dict, Lines]:
    try:
        if not path.is_file():
            why = "not a file" if path.exists() else "config file not found"
            raise InputError([Problem(str(path), None, "", why)])
        data, lines = load_yaml_lines(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise InputError([Problem(str(path), None, "", f"cannot read: {e.strerror or e}")]) from None
    except RecursionError:
        raise InputError([Problem(str(path), None, "", "not valid YAML: nested too deeply")]) from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        line = getattr(getattr(e, "problem_mark", None), "line", None)
        raise InputError([Problem(str(path), None if line is None else line + 1, "",
                                  f"not valid YAML: {e}")]) from None
    if not isinstance(data, dict):
        raise InputError([Problem(str(path), None, "", "expected a YAML mapping at the top level")])
    return data, lines


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
PROJECT_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class _Written:
    """Where the keys under `prefix` of a config are written: a file and its key lines (a run
    file holds everything but the model and judge configs it names by name)."""

    prefix: tuple
    file: Path
    lines: Lines


def _where(parts: list[_Written], loc: tuple) -> tuple[_Written, tuple, int | None]:
    """The file holding the key at `loc`, the key's path in that file, and its line (or the
    line of the nearest key above it that is written, e.g. for a key that is missing)."""
    part = max((p for p in parts if loc[:len(p.prefix)] == p.prefix), key=lambda p: len(p.prefix))
    rest = loc[len(part.prefix):]
    line = next((part.lines[rest[:n]] for n in range(len(rest), 0, -1) if rest[:n] in part.lines), None)
    return part, rest, line


def _unwrapped(t):
    """A field's type without Annotated and without None in a union."""
    while True:
        if get_origin(t) is Annotated:
            t = get_args(t)[0]
        elif get_origin(t) in (Union, types.UnionType):
            t = next(a for a in get_args(t) if a is not type(None))
        else:
            return t


def _keys_at(cls, loc: tuple) -> list[str]:
    """The keys a config accepts at `loc` (a path of keys and list indexes into `cls`)."""
    t = cls
    for part in loc:
        t = _unwrapped(t)
        if isinstance(t, type) and issubclass(t, BaseModel):
            t = t.model_fields[part].annotation if part in t.model_fields else None
        elif get_origin(t) in (list, dict):
            t = get_args(t)[-1]
        else:
            return []
    t = _unwrapped(t)
    return list(t.model_fields) if isinstance(t, type) and issubclass(t, BaseModel) else []


# The regular expressions the configs check, in the words an error message uses.
VALUE_FORMS = {
    f"^{NAME_PATTERN}$": "a name of letters, digits and _ . + - (starting with a letter or digit)",
    f"^{SLURM_TIME}$": "a SLURM time such as 90 (minutes), 12:00:00 or 1-00:00:00",
    f"^{SLURM_MEM}$": "a memory size such as 64G (a number, then K, M, G or T)",
    _SBATCH_WORD: "one word (letters, digits and _ . , : + = % -)",
}


def _config_problem(cls, err: dict, parts: list[_Written]) -> Problem:
    """One validation error of a `cls` config as `FILE:LINE: key: message` in plain words."""
    loc = tuple(p for p in err["loc"] if not str(p).startswith("function-"))
    part, rest, line = _where(parts, loc)
    if err["type"] == "extra_forbidden":
        message = unknown_key_message(loc[-1], _keys_at(cls, loc[:-1]))
    else:
        message = plain_message(err, VALUE_FORMS)
    return Problem(str(part.file), line, ".".join(map(str, rest)), message)


def _place(spec: _Located, parts: list[_Written], prefix: tuple) -> None:
    """Tell `spec` (the config at `prefix`) which file it came from and its keys' lines."""
    part, rest, _ = _where(parts, prefix)
    spec._source = str(part.file)
    spec._prefix = ".".join(map(str, rest))
    spec._lines = {k[len(rest):]: v for k, v in part.lines.items() if k[:len(rest)] == rest}


def _config_roots(run_path: Path) -> list[Path]:
    """Candidate `configs/` folders, nearest first, without repeats."""
    roots = []
    for d in (run_path.resolve().parent, *run_path.resolve().parents):
        if d.name == "configs":
            roots.append(d)
        elif (d / "configs").is_dir():
            roots.append(d / "configs")
    roots += [Path.cwd() / "configs", PROJECT_ROOT / "configs"]
    seen, out = set(), []
    for r in roots:
        if r.is_dir() and r.resolve() not in seen:
            seen.add(r.resolve())
            out.append(r)
    return out


def _resolve_ref(ref, kind: str, run: _Written, key: tuple, problems: list[Problem]):
    """A model/judge given by name -> (its YAML as a dict, the file it came from, its lines);
    one written inline -> (the mapping, the run file, None)."""
    field, line = ".".join(map(str, key)), run.lines.get(key)
    if isinstance(ref, dict):
        return ref, run.file, None
    if not isinstance(ref, str):
        problems.append(Problem(str(run.file), line, field, "expected a name or a mapping"))
        return None
    if not re.fullmatch(NAME_PATTERN, ref):
        # A reference is a plain name under configs/<kind>/, never a path (`../../x`).
        problems.append(Problem(str(run.file), line, field, f"{ref!r} is not a config name (letters, digits, "
                                "_ . + -, starting with a letter or digit); write the settings inline instead"))
        return None
    roots = _config_roots(run.file)
    for root in roots:
        candidate = root / kind / f"{ref}.yaml"
        if candidate.is_file():
            data, lines = _read_yaml(candidate)
            data.setdefault("name", ref)
            return data, candidate, lines
    where = ", ".join(str(r / kind) for r in roots) or "no configs/ folder found"
    problems.append(Problem(str(run.file), line, field,
                            f"no {kind} config named {ref!r} (looked in {where})"))
    return None


def _model_entry(ref, kind: str, run: _Written, key: tuple, problems: list[Problem],
                 parts: list[_Written]) -> dict | None:
    """One model or judge of a config, by name or inline, its path made absolute. A config
    file it names joins `parts`, so an error inside that file points into it."""
    got = _resolve_ref(ref, kind, run, key, problems)
    if got is None:
        return None
    data, src, lines = got
    if lines is None:  # inline: its keys are the run file's
        field, line = ".".join(map(str, (*key, "path"))), run.lines.get((*key, "path"))
    else:
        parts.append(_Written(key, src, lines))
        field, line = "path", lines.get(("path",))
    if isinstance(data.get("path"), str) and data.get("backend") != "openai":  # openai: a served name
        path = expand_vars(data["path"], src, field, problems, line)
        data = {**data, "path": _model_path(path, src.parent)}
    server = data.get("server")
    if data.get("backend") == "openai" and isinstance(server, dict) and isinstance(server.get("serve"), str):
        # The weights a SLURM server job serves: a folder relative to this file, as `path` is.
        serve = expand_vars(server["serve"], src, field.rsplit("path", 1)[0] + "server.serve", problems, line)
        data = {**data, "server": {**server, "serve": _model_path(serve, src.parent)}}
    return data


def expand_vars(value: str, file: Path, field: str, problems: list[Problem], line: int | None = None) -> str:
    """`${VAR}` / `${VAR:-default}` from the environment; an unset VAR without default is a problem."""

    def sub(m: re.Match) -> str:
        name, default = m.group(1), m.group(2)
        if name in os.environ and os.environ[name] != "":
            return os.environ[name]
        if default is not None:
            return default
        problems.append(Problem(str(file), line, field,
                                f"environment variable {name} is not set (write ${{{name}:-default}} for a fallback)"))
        return m.group(0)

    return _VAR.sub(sub, value)


def server_host(base_url: str) -> str:
    """`host[:port]` of an endpoint URL: its identity in settings hashes (not the path or scheme,
    which a proxy may change; never userinfo, which may hold a secret)."""
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    return parts.hostname + (f":{parts.port}" if parts.port else "") if parts.hostname else base_url


def is_hub_id(path: str) -> bool:
    return bool(_HUB_ID.fullmatch(path)) and not path.startswith(".")


def _relative(p: str, base: Path) -> str:
    """Paths in configs are relative to the config file; hub ids, absolute and pkg: paths stay."""
    p = os.path.expanduser(p)
    if p.startswith(("/", "pkg:")):
        return p
    return str((base / p).resolve())


def _model_path(p: str, base: Path) -> str:
    if p.startswith(("/", "~")) or not is_hub_id(p) or (base / p).exists():
        return _relative(p, base)
    return p  # a hub id like Qwen/Qwen3-VL-8B-Instruct


# What makes a folder a model folder: a Hugging Face config, or Mistral's own format
# (params.json, no config.json; e.g. mistralai/Pixtral-12B-2409, loaded with tokenizer_mode: mistral).
MODEL_CONFIG_FILES = ("config.json", "params.json")


# Files that fix what a folder's weights do with a prompt: architecture, generation defaults,
# tokenizer, chat templates, image processor. Hashed by content; the weights themselves are
# too large to hash on every start, so they count by file name and size (a hub snapshot
# adds its commit).
IDENTITY_FILES = (*MODEL_CONFIG_FILES, "generation_config.json", "tokenizer_config.json", "tokenizer.json",
                  "chat_template.jinja", "chat_template.json", "preprocessor_config.json",
                  "processor_config.json", "model.safetensors.index.json")


@functools.lru_cache(maxsize=64)
def weights_identity(local: str, hub_id: str | None = None) -> dict:
    """A model folder's identity, independent of where it lies (see IDENTITY_FILES)."""
    folder = Path(local)
    ident: dict = {name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
                   for name in IDENTITY_FILES if (folder / name).is_file()}
    ident["weights"] = sorted((f.name, f.stat().st_size) for f in folder.iterdir()
                              if f.suffix in (".safetensors", ".bin", ".pt", ".gguf"))
    if hub_id is not None:  # a hub cache snapshot folder is named by its commit
        ident["hub"] = {"id": hub_id, "revision": folder.name}
    return ident


def resolve_model_path(spec: ModelSpec) -> tuple[str | None, Problem | None]:
    """The local folder a model's weights are in, or a Problem naming what is missing.

    Checked before any model loads, so a typo costs a second, not a GPU allocation.
    Hub ids are looked up in the Hugging Face cache only (no network). A served model
    (`backend: openai`) has no local folder.
    """
    if spec.backend == "openai":
        return None, None
    if not is_hub_id(spec.path) or Path(spec.path).is_absolute():
        path = Path(spec.path)
        if not path.is_dir():
            return None, spec.problem("path", f"model folder not found: {path}")
        if not any((path / name).is_file() for name in MODEL_CONFIG_FILES):
            return None, spec.problem("path", f"not a model folder (no config.json, nor a Mistral-format "
                                              f"params.json): {path}")
        return str(path), None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None, spec.problem("path", f"{spec.path!r} looks like a hub id, but huggingface_hub is "
                                          "not installed")
    hits = [try_to_load_from_cache(spec.path, name) for name in MODEL_CONFIG_FILES]
    hit = next((h for h in hits if isinstance(h, str)), None)
    if hit is None:
        from huggingface_hub.constants import HF_HUB_CACHE

        return None, spec.problem("path", f"{spec.path!r} is neither a local folder nor a hub id in the "
                                          f"Hugging Face cache ({HF_HUB_CACHE}); download it where there is "
                                          f"internet (huggingface-cli download {spec.path}) or point path at "
                                          "a local folder")
    return str(Path(hit).parent), None


def _validated(cls, data: dict, parts: list[_Written]):
    """`data` as a `cls` config; every error names the file and line its key is written on."""
    try:
        spec = cls.model_validate(data)
    except ValidationError as e:
        found = [_config_problem(cls, err, parts) for err in e.errors()]
        raise InputError(sorted(found, key=lambda p: (p.file, p.line or 0))) from None
    _place(spec, parts, ())
    return spec


def load_run_config(path: str | Path) -> RunSpec:
    """Read a run YAML, resolve model/judge names and relative paths, validate everything."""
    path = Path(path)
    data, lines = _read_yaml(path)
    run = _Written((), path, lines)
    parts, problems = [run], []
    for kind in ("models", "judges"):
        if isinstance(data.get(kind), list):  # absent: the validator says it is missing
            data[kind] = [_model_entry(r, kind, run, (kind, i), problems, parts)
                          for i, r in enumerate(data[kind])]
    for key in ("dataset", "output_dir"):
        if isinstance(data.get(key), str):
            data[key] = _relative(expand_vars(data[key], path, key, problems, lines.get((key,))), path.parent)
    for key in ("extra_answers", "extra_verdicts"):
        if isinstance(data.get(key), list):
            data[key] = [_relative(expand_vars(p, path, f"{key}.{i}", problems, lines.get((key, i))),
                                   path.parent) if isinstance(p, str) else p for i, p in enumerate(data[key])]
    if problems:
        raise InputError(problems)
    spec = _validated(RunSpec, data, parts)
    for kind in ("models", "judges"):
        for i, m in enumerate(getattr(spec, kind)):
            _place(m, parts, (kind, i))
        names = [m.name for m in getattr(spec, kind)]
        for n in sorted(n for n, k in Counter(names).items() if k > 1):  # a set, not names.count: linear
            problems.append(spec.problem(kind, f"{n!r} is listed twice (names key the result files)"))
    if problems:
        raise InputError(problems)
    return spec


# -- authoring rubrics: `gamut-local draft` and `gamut-local audit` ---------------------------


class DraftSpec(_Located):
    """DRAFT.yaml: which model drafts meta-rubrics, and the bounds its output is held to."""

    model: ModelSpec = Field(examples=["qwen3-vl-8b"], description=(
        "The model that drafts: a name under configs/models/ or inline model settings."))
    max_retries: int = Field(default=2, ge=0, description=(
        "Re-asks with the validation errors; after them the question is recorded as failed."))
    chunk_size: int = Field(default=64, ge=1, description="Questions per engine call and atomic append.")
    # Bounds written into the JSON schema the output is constrained to: they keep a drafted
    # meta-rubric to paper size (~15 checks) and stop a weak model from writing forever.
    max_items: int = Field(default=12, ge=1, description="Most items in one drafted meta-rubric.")
    max_list: int = Field(default=10, ge=2, description=(
        "Most elements, options, steps, entities or aspects in one item."))
    max_chars: int = Field(default=300, ge=20, description="Longest text of any one field.")
    max_snippet_chars: int = Field(default=1500, ge=100, description="Evidence text shown per snippet.")


class AuditSpec(_Located):
    """AUDIT.yaml: which model re-reads each cited snippet, and what happens to ungrounded items."""

    model: ModelSpec = Field(examples=["qwen3-vl-8b"], description=(
        "The model that re-reads each cited snippet: a name under configs/models/ or inline settings."))
    ungrounded: Literal["keep", "demote", "drop"] = Field(default="demote", description=(
        "What happens to an item no snippet supports: kept, demoted one tier, or dropped."))
    partial_counts: bool = Field(default=False, description="Whether `partially_supported` grounds an item.")
    min_coverage: float = Field(default=0.5, ge=0.0, le=1.0, description=(
        "A question whose grounded share of items is below this is reported as poorly covered."))
    chunk_size: int = Field(default=256, ge=1, description="Requests per engine call and atomic append.")
    max_snippet_chars: int = Field(default=1500, ge=100, description="Evidence text shown per snippet.")


def load_authoring_config(path: str | Path, kind: type[DraftSpec] | type[AuditSpec]):
    """Read DRAFT.yaml / AUDIT.yaml: `model` by name (configs/models/<name>.yaml) or inline."""
    path = Path(path)
    data, lines = _read_yaml(path)
    run = _Written((), path, lines)
    parts, problems = [run], []
    if "model" in data:
        data = {**data, "model": _model_entry(data["model"], "models", run, ("model",), problems, parts)}
    if problems:
        raise InputError(problems)
    spec = _validated(kind, data, parts)
    _place(spec.model, parts, ("model",))
    return spec
