"""A run's settings (`configs/runs/*.yaml`): its questions, candidates, judges, output
folder, and the compile, plan and calibration settings."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from gamut_local.config.base import ConfigModel, LocatedConfig, name_field
from gamut_local.config.models import JudgeSpec, ModelSpec
from gamut_local.config.slurm import SlurmSpec
from gamut_local.errors import InputError, Problem
from gamut_local.vocab import DEFAULT_VARIANT, SMALL_POOL_MAX, VARIANTS, Variant


class PlanSpec(ConfigModel):
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


class CompileSpec(ConfigModel):
    small_pool_max: int = Field(default=SMALL_POOL_MAX, ge=0, description=(
        "Flexible lists with at most this many options get one check per option beyond the "
        "coverage check. Every stage that needs checks compiles with it."))


class CalibrationSpec(ConfigModel):
    """Corrected scores in `gamut-local run`: after judging, draw the calibration sample and
    correct every model judge's scores by the gold judges' verdicts on it (docs/correction.md)."""

    gold: str = Field(default="human-*", min_length=1, examples=["human-*"], description=(
        "The gold judges (a name or pattern): their verdicts on the sample correct the model judges'."))
    responses: int = Field(ge=1, examples=[100], description="Responses drawn per system (`sample --responses`).")
    per: Literal["model", "shared"] = Field(default="model", description=(
        "`model`: each system its own questions; `shared`: the same questions for every system (paired)."))
    seed: int = Field(default=0, ge=0, description="The draw's seed (`sample --seed`).")


class RunSpec(LocatedConfig):
    name: str = name_field("The run's name: the report's title and the SLURM jobs' prefix.", "my-eval")
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
