"""What each engine of a run will cost, and how many tasks it is split into.

The unit is the engine: a candidate model answering every question in every variant, or a judge
grading every system's answers. Counts are exact (questions x variants; checks per question
from the dataset's `checks` or its compiled meta-rubric). Token counts of text that exists
(questions, checks, given answers, system prompts) are measured as characters /
`plan.chars_per_token` unless the run's `plan` block fixes a mean; tokens that do not exist yet
(answers to generate) come from the `plan` block, and an image costs what the model's processor
makes of one (`image_tokens`) unless `plan.image_tokens` fixes it for all.

Work (GPU-hours) = prefill tokens / prefill rate + decode tokens / decode rate, per GPU, scaled
per model by `plan.throughput_scale`. A judge decodes nothing: its label is read from the step
that reads the prompt, so its `judge_output_tokens` are charged as prefill. Every task of an
engine first starts it and loads the weights once: `plan.startup_minutes` + weights GB /
`plan.load_gb_per_minute`, on every GPU of the task.

Prefix sharing: a judge prompt is instructions, question (and image), response, then one check;
the judge stage orders requests question by question, each response's checks adjacent, so a
prefix-caching engine computes the instructions once per task, each question (and image) once
per variant, each response once, and only the check (and the label) per request. Candidates
share only the system prompt.

Shards (`shard_counts`): where `slurm.shards_*` leave an engine's count open, it gets as many
tasks as keep loading at most `plan.max_load_share` of its GPU-hours (at least one), raised to
what its time limit needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from gamut_local.cluster.image_tokens import image_tokens
from gamut_local.config import ModelSpec, PlanSpec, RunSpec, resolve_model_path, slurm_hours, weights_identity
from gamut_local.data.dataset import load_questions
from gamut_local.data.gamut_release import RELEASE_FILE, RELEASE_QUESTIONS
from gamut_local.data.records import Question, answered_systems, load_answers
from gamut_local.errors import InputError, Problem
from gamut_local.rubric.compiler import checks_for
from gamut_local.rubric.lint import PAPER_CHECKS
from gamut_local.vocab import VARIANTS

DEFAULT_WEIGHTS_GB = 16.0  # an 8B model in bf16, for a model whose folder cannot be measured


@dataclass
class EngineWork:
    """One engine's whole work in the run, before it is split into tasks."""

    stage: str  # generate | judge
    name: str  # the model or judge
    targets: list[str]  # variants (generate) or the systems graded, model.variant (judge)
    requests: int
    prompt_tokens: int  # every request's prompt, computed in full
    prompt_tokens_shared: int  # what a prefix-caching engine computes
    output_tokens: int  # generated (a judge's label tokens: charged as prefill)
    work_gpu_hours: float  # computing only, loading excluded
    load_hours: float  # one start-up and weight load, wall-clock hours
    gpus: int  # GPUs of one engine (one task)
    served: bool = False  # a `backend: openai` judge: the engine runs in a server
    caches: bool = True  # prefix caching on: the engine computes `prompt_tokens_shared`
    image_tokens: int = 0  # what one image costs it (0: it sees none)
    image_source: str = ""  # where that figure comes from


def _tokens(text: str | None, plan: PlanSpec) -> int:
    return 0 if not text else max(1, round(len(text) / plan.chars_per_token))


def work_hours(prefill: float, decode: float, plan: PlanSpec, name: str) -> float:
    scale = float(plan.throughput_scale.get(name, 1.0))
    return (prefill / plan.prefill_tokens_per_s_per_gpu + decode / plan.decode_tokens_per_s_per_gpu) / scale / 3600


def load_hours(spec: RunSpec, m: ModelSpec, warnings: list[str]) -> float:
    """Hours one task of `m` spends before its first request: engine start-up and reading the
    weights (their size from `plan.weights_gb`, else measured on the folder, else assumed)."""
    plan, gb = spec.plan, spec.plan.weights_gb.get(m.name)
    if gb is None:
        local, _ = resolve_model_path(m)
        if local is not None:
            gb = sum(size for _, size in weights_identity(local)["weights"]) / 1e9
        else:
            gb = DEFAULT_WEIGHTS_GB
            warnings.append(f"{m.name}: weights not found to measure; assumed {gb:g} GB "
                            f"(set plan.weights_gb.{m.name})")
    return (plan.startup_minutes + gb / plan.load_gb_per_minute) / 60


class _Tokens:
    """Token counts of a dataset's texts under a run's `plan` assumptions."""

    def __init__(self, plan: PlanSpec, questions: list[Question], small_pool_max: int):
        self.plan = plan
        self.checks = {q.question_id: checks_for(q, small_pool_max) for q in questions}
        # Per (question, variant): a text-only answer is graded on the text-only split's own checks.
        self.judged = {(q.question_id, v): q.checks_for_variant(v, self.checks[q.question_id])
                       for q in questions for v in VARIANTS}
        self.check_total = {key: (plan.mean_check_tokens * len(cs) if plan.mean_check_tokens is not None
                                  else sum(_tokens(c.text, plan) for c in cs))
                            for key, cs in self.judged.items()}

    def question(self, q: Question, variant: str) -> int:
        if self.plan.mean_question_tokens is not None:
            return self.plan.mean_question_tokens
        return _tokens(q.text_for(variant)[0], self.plan)


def per_image(spec: RunSpec, m: ModelSpec) -> tuple[int, str]:
    """Tokens one image costs `m`, and where the figure comes from: `plan.image_tokens` where
    set, else the model's own (its processor settings or its family's)."""
    if spec.plan.image_tokens is not None:
        return spec.plan.image_tokens, "plan.image_tokens"
    return image_tokens(m)


def _generation_work(spec: RunSpec, m: ModelSpec, questions: list[Question], tok: _Tokens,
                     load: float) -> EngineWork:
    plan, vs = spec.plan, m.variants(spec.variants)
    image, source = per_image(spec, m) if "multimodal" in vs else (0, "")
    sys_tok = _tokens(m.system_prompt, plan)
    own = sum(tok.question(q, v) + (image if v == "multimodal" and q.image else 0) for v in vs for q in questions)
    n = len(questions) * len(vs)
    # Only the system prompt is shared: computed once per variant, then cached.
    full, shared = own + n * sys_tok, own + len(vs) * sys_tok
    out = n * plan.mean_answer_tokens
    computed = shared if m.engine.enable_prefix_caching else full
    return EngineWork("generate", m.name, list(vs), n, full, shared, out,
                      work_hours(computed, out, plan, m.name), load, m.total_gpus(),
                      caches=m.engine.enable_prefix_caching, image_tokens=image, image_source=source)


def judged_systems(spec: RunSpec, extra: list[dict]) -> list[tuple[str, str]]:
    """(model, variant) of every answer set a judge grades: generated ones, then `extra` (the
    run's extra answers, loaded)."""
    systems = [(m.name, v) for m in spec.models for v in m.variants(spec.variants)]
    return systems + [p for p in answered_systems(extra) if p not in systems]


def _answer_tokens(spec: RunSpec, questions: list[Question]) -> dict[tuple[str, str], dict[str, int]]:
    """(model, variant) -> answer tokens per question of every answer set the judges grade:
    generated ones at the assumed mean length, given ones (`extra_answers`) as measured."""
    extra = load_answers(spec.extra_answers)
    known = {q.question_id for q in questions}
    out = {s: {q.question_id: spec.plan.mean_answer_tokens for q in questions} for s in judged_systems(spec, [])}
    for answer in extra:
        if answer["question_id"] not in known:
            raise InputError([Problem(spec.source, None, "extra_answers",
                                      f"an answer to {answer['question_id']!r}, which is not a question of the dataset")])
        out.setdefault((answer["model"], answer["variant"]), {})[answer["question_id"]] = _tokens(answer["response"], spec.plan)
    return out


def _judge_work(spec: RunSpec, j: ModelSpec, questions: list[Question], tok: _Tokens, load: float,
                answers: dict) -> EngineWork:
    """Every system's answers graded by one judge engine, in the judge stage's order."""
    plan, instr, label = spec.plan, spec.plan.judge_instruction_tokens, spec.plan.judge_output_tokens
    image, source = per_image(spec, j) if j.sees_image else (0, "")
    by_id = {q.question_id: q for q in questions}
    full = shared = requests = 0
    prefixes: set[tuple[str, str]] = set()  # (question, variant) whose question (and image) is computed
    for (_, variant), per_question in answers.items():
        for qid, a_tok in per_question.items():
            q, k = by_id[qid], len(tok.judged[qid, variant])
            head = tok.question(q, variant) + (image if variant == "multimodal" and q.image else 0)
            full += k * (instr + head + a_tok + label) + tok.check_total[qid, variant]
            shared += a_tok + k * label + tok.check_total[qid, variant] + (0 if (qid, variant) in prefixes else head)
            prefixes.add((qid, variant))
            requests += k
    shared += instr  # the same for every request of the judge (once per task: added per task below)
    computed = shared if j.engine.enable_prefix_caching else full
    return EngineWork("judge", j.name, [f"{m}.{v}" for m, v in answers], requests, full, shared,
                      requests * label, work_hours(computed, 0, plan, j.name), load, j.total_gpus(),
                      served=j.backend == "openai", caches=j.engine.enable_prefix_caching,
                      image_tokens=image, image_source=source)


def engine_work(spec: RunSpec, questions: list[Question], warnings: list[str]) -> list[EngineWork]:
    """Every engine of the run with its whole work: generation per model (that answers any
    variant), then one per judge; `warnings` collects assumptions made for want of a setting."""
    tok = _Tokens(spec.plan, questions, spec.compile.small_pool_max)
    out = [_generation_work(spec, m, questions, tok, load_hours(spec, m, warnings))
           for m in spec.models if m.variants(spec.variants)]
    answers = _answer_tokens(spec, questions)
    out += [_judge_work(spec, j, questions, tok,
                        0.0 if j.backend == "openai" and not j.server.serve else load_hours(spec, j, warnings),
                        answers)
            for j in spec.judges]
    warnings += [f"{w.name}: {w.image_source}" for w in out if w.image_source.startswith("unknown")]
    return out


def auto_shards(w: EngineWork, plan: PlanSpec, limit: str, questions: int) -> int:
    """The most tasks whose loading stays within `plan.max_load_share` of the engine's GPU-hours
    (each task loads once: n x L <= share x (W + n x L)), at least 1, raised to the fewest whose
    tasks end within `limit` (W / gpus / n + load <= limit), at most one per question."""
    if w.served:  # its clients load nothing and share one server: more of them add no GPU
        return 1
    load_gpu_hours = w.load_hours * w.gpus
    share = plan.max_load_share
    n = math.floor(w.work_gpu_hours * share / ((1 - share) * load_gpu_hours)) if load_gpu_hours > 0 else 1
    hours = slurm_hours(limit)
    if hours is not None and hours > w.load_hours and w.gpus:
        n = max(n, math.ceil(w.work_gpu_hours / w.gpus / (hours - w.load_hours)))
    return max(1, min(n, max(questions, 1)))


def shard_counts(spec: RunSpec, work: list[EngineWork], questions: int | None = None) -> dict[tuple[str, str], int]:
    """("generate" | "judge", name) -> array tasks: the run's `slurm.shards_*` (a number for all,
    or one per name), else `auto_shards`."""
    out = {}
    for w in work:
        given = spec.slurm.shards_generate if w.stage == "generate" else spec.slurm.shards_judge
        n = given.get(w.name) if isinstance(given, dict) else given
        limit = spec.slurm.time_generate if w.stage == "generate" else spec.slurm.time_judge
        out[w.stage, w.name] = n or auto_shards(w, spec.plan, limit, questions if questions is not None else 10**9)
    return out


# Lengths assumed for the release's texts while it is not downloaded (plan.mean_*_tokens win).
RELEASE_QUESTION_TOKENS, RELEASE_CHECK_TOKENS = 30, 30


def release_shape(plan: PlanSpec) -> list[Question]:
    """Stand-in questions of the GAMUT release's known shape, for a plan before the download:
    RELEASE_QUESTIONS questions, each with an image and a text-only form, PAPER_CHECKS checks
    on average, texts of the assumed lengths."""
    n = RELEASE_QUESTIONS
    total_checks = round(PAPER_CHECKS * n)
    q_chars = round((plan.mean_question_tokens or RELEASE_QUESTION_TOKENS) * plan.chars_per_token)
    c_chars = round((plan.mean_check_tokens or RELEASE_CHECK_TOKENS) * plan.chars_per_token)
    out = []
    for i in range(n):
        k = total_checks // n + (i < total_checks % n)
        checks = [{"check_id": f"c{j}", "text": "x" * c_chars, "tier": "answer_critical"} for j in range(k)]
        out.append(Question(question_id=f"release-{i:04d}", domain="release", question="x" * q_chars,
                            question_text_only="x" * q_chars, image="image.jpg", checks=checks))
    return out


def questions_to_plan(spec: RunSpec) -> tuple[list[Question], list[str]]:
    """The run's questions, and notes on them: before the release is downloaded (the dataset is
    a `gamut.jsonl` not there yet), stand-ins of the release's known shape, and a note saying so."""
    dataset = Path(spec.dataset)
    if dataset.name != RELEASE_FILE or dataset.exists():
        return load_questions(dataset, check_images=False), []
    return release_shape(spec.plan), [
        f"{dataset} is not downloaded yet (scripts/fetch_data.py): planned on the GAMUT release's "
        f"shape, {RELEASE_QUESTIONS} questions with an image and {PAPER_CHECKS} checks each on average, "
        f"questions and checks of {spec.plan.mean_question_tokens or RELEASE_QUESTION_TOKENS} and "
        f"{spec.plan.mean_check_tokens or RELEASE_CHECK_TOKENS} tokens (plan.mean_question_tokens, "
        "plan.mean_check_tokens)"]
