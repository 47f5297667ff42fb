"""What a run will cost before it is submitted: requests, prompt tokens, GPU-hours per stage.

Counts are exact (questions x models x variants; checks per question from the dataset's
`checks` or its compiled meta-rubric). Token counts of text that exists (questions, checks,
given answers, system prompts) are measured as characters / `plan.chars_per_token` unless the
run's `plan` block fixes a mean; tokens that do not exist yet (answers to generate) and image
tokens come from the `plan` block. GPU-hours = prefill tokens / prefill rate + output tokens /
decode rate, per GPU, scaled per model by `plan.throughput_scale` (a model without an entry is
assumed as fast as an 8B dense model, with a warning). Every array task also starts an engine
and loads the weights once: `plan.startup_minutes` + weights GB / `plan.load_gb_per_minute`, on
every GPU of the task, so many shards of little work spend most of their hours loading (warned,
with the shard count that would not).

Prefix sharing: a judge prompt is instructions, question (and image), response, then one
check; with prefix caching the engine computes the instructions once and each response's
prefix once, so only the check (and the label) is new per request. Candidates share only the
system prompt. The `prompt tokens (shared)` column is what a prefix-caching engine computes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from gamut_local.cluster.fit import slurm_hours as _hours
from gamut_local.cluster.slurm import build_graph, check_engine_inputs, check_graph_inputs, fit_problems
from gamut_local.config import ModelSpec, PlanSpec, RunSpec, load_run_config, resolve_model_path, weights_identity
from gamut_local.data.dataset import load_questions
from gamut_local.data.gamut_release import RELEASE_FILE, RELEASE_QUESTIONS
from gamut_local.data.records import Question, load_answers
from gamut_local.errors import InputError, Problem
from gamut_local.rubric.compiler import checks_for
from gamut_local.rubric.lint import PAPER_CHECKS
from gamut_local.vocab import VARIANTS


@dataclass
class StageRow:
    stage: str  # generate | judge
    name: str  # model (generate) or judge (judge)
    target: str  # variants (generate) or model.variant (judge)
    requests: int
    prompt_tokens: int  # every request's prompt, computed in full
    prompt_tokens_shared: int  # what a prefix-caching engine computes
    output_tokens: int
    gpu_hours: float
    gpus_per_task: int
    tasks: int  # array tasks (shards x variants for generation)
    hours_per_task: float  # loading included
    load_gpu_hours: float = 0.0  # of gpu_hours: every task starting its engine and loading the weights
    over_time_limit: bool = False


DEFAULT_WEIGHTS_GB = 16.0  # an 8B model in bf16, for a model whose folder cannot be measured


def _tokens(text: str | None, plan: PlanSpec) -> int:
    return 0 if not text else max(1, round(len(text) / plan.chars_per_token))


def _scale(plan: PlanSpec, name: str) -> float:
    return float(plan.throughput_scale.get(name, 1.0))


def _gpu_hours(prefill: float, output: float, plan: PlanSpec, scale: float) -> float:
    return (prefill / plan.prefill_tokens_per_s_per_gpu
            + output / plan.decode_tokens_per_s_per_gpu) / scale / 3600


def _row(stage, name, target, requests, full, shared, out, spec: ModelSpec, plan: PlanSpec,
         tasks: int, limit: str, load_hours: float) -> StageRow:
    computed = shared if spec.engine.enable_prefix_caching else full
    work = _gpu_hours(computed, out, plan, _scale(plan, name))
    gpus, tasks = spec.total_gpus(), max(tasks, 1)
    per_task = work / gpus / tasks + load_hours
    limit_hours = _hours(limit)
    return StageRow(stage, name, target, requests, full, shared, out, work + load_hours * gpus * tasks, gpus,
                    tasks, per_task, load_gpu_hours=load_hours * gpus * tasks,
                    over_time_limit=bool(limit_hours is not None and per_task > limit_hours))


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

    def image(self, q: Question, variant: str) -> int:
        return self.plan.image_tokens if variant == "multimodal" and q.image else 0


def _generation_rows(spec: RunSpec, questions: list[Question], tok: _Tokens, loads: dict) -> list[StageRow]:
    plan, rows = spec.plan, []
    for m in spec.models:
        vs = m.variants(spec.variants)
        if not vs:
            continue
        sys_tok = _tokens(m.system_prompt, plan)
        own = sum(tok.question(q, v) + tok.image(q, v) for v in vs for q in questions)
        n = len(questions) * len(vs)
        # Only the system prompt is shared: computed once per variant, then cached.
        full, shared = own + n * sys_tok, own + len(vs) * sys_tok
        rows.append(_row("generate", m.name, "+".join(vs), n, full, shared, n * plan.mean_answer_tokens,
                         m, plan, spec.slurm.shards_generate * len(vs), spec.slurm.time_generate, loads[m.name]))
    return rows


def _answer_tokens(spec: RunSpec, questions: list[Question]) -> list[tuple[str, str, dict[str, int]]]:
    """(model, variant, answer tokens per question) of every answer set the judges will grade:
    generated ones at the assumed mean length, given ones (`extra_answers`) as measured."""
    pairs = [(m.name, v, {q.question_id: spec.plan.mean_answer_tokens for q in questions})
             for m in spec.models for v in m.variants(spec.variants)]
    known = {q.question_id for q in questions}
    given: dict[tuple[str, str], dict[str, int]] = {}
    for answer in load_answers(spec.extra_answers):
        if answer["question_id"] not in known:
            raise InputError([Problem(spec.source, None, "extra_answers",
                                      f"an answer to {answer['question_id']!r}, which is not a question of the dataset")])
        tokens = _tokens(answer["response"], spec.plan)
        given.setdefault((answer["model"], answer["variant"]), {})[answer["question_id"]] = tokens
    return pairs + [(m, v, toks) for (m, v), toks in given.items()]


def _judge_rows(spec: RunSpec, questions: list[Question], tok: _Tokens, loads: dict) -> list[StageRow]:
    plan, rows = spec.plan, []
    by_id = {q.question_id: q for q in questions}
    instr = plan.judge_instruction_tokens
    answer_sets = _answer_tokens(spec, questions)
    for j in spec.judges:
        for model, variant, answers in answer_sets:
            full = shared = requests = 0
            for qid, a_tok in answers.items():
                q, k = by_id[qid], len(tok.judged[qid, variant])
                prefix = tok.question(q, variant) + (tok.image(q, variant) if j.sees_image else 0) + a_tok
                full += k * (instr + prefix) + tok.check_total[qid, variant]
                shared += prefix + tok.check_total[qid, variant]
                requests += k
            shared += instr  # the instructions are the same for every request of the judge
            rows.append(_row("judge", j.name, f"{model}.{variant}", requests, full, shared,
                             requests * plan.judge_output_tokens, j, plan, spec.slurm.shards_judge,
                             spec.slurm.time_judge, loads[j.name]))
    return rows


def _totals(rows: list[StageRow]) -> dict:
    totals = {}
    for stage in ("generate", "judge"):
        mine = [r for r in rows if r.stage == stage]
        totals[stage] = {"requests": sum(r.requests for r in mine),
                         "prompt_tokens": sum(r.prompt_tokens for r in mine),
                         "prompt_tokens_shared": sum(r.prompt_tokens_shared for r in mine),
                         "output_tokens": sum(r.output_tokens for r in mine),
                         "gpu_hours": sum(r.gpu_hours for r in mine),
                         "load_gpu_hours": sum(r.load_gpu_hours for r in mine)}
    return totals


def _loading_warnings(spec: RunSpec, rows: list[StageRow]) -> list[str]:
    """Where loading the weights costs more GPU-hours than the work, and the shard count at
    which it would not (each shard is a task that loads the model once)."""
    out = []
    for stage, shards in (("generate", spec.slurm.shards_generate), ("judge", spec.slurm.shards_judge)):
        for name in dict.fromkeys(r.name for r in rows if r.stage == stage):
            mine = [r for r in rows if r.stage == stage and r.name == name]
            load = sum(r.load_gpu_hours for r in mine)
            work = sum(r.gpu_hours for r in mine) - load
            if load <= work:
                continue
            # Per row, tasks = shards x (variants of a generation row): the most shards whose loading fits the work.
            fits = min(int((r.gpu_hours - r.load_gpu_hours) / (r.load_gpu_hours / shards)) for r in mine)
            advice = (f"slurm.shards_{stage}: {fits} would not" if 1 <= fits < shards
                      else f"even slurm.shards_{stage}: 1 would, as each of its {len(mine)} arrays loads it")
            out.append(f"{stage} {name}: loading the weights takes {load:.3g} GPU-h, more than the "
                       f"{work:.3g} GPU-h of work, with slurm.shards_{stage}: {shards}; {advice}")
    return out


def estimate(spec: RunSpec, questions: list[Question], warnings: list[str] | None = None) -> dict:
    """Requests, tokens and GPU-hours per (stage, model/judge); totals per stage; warnings about
    assumptions made for want of a setting, and about loading that dominates."""
    warnings = list(warnings or [])
    unscaled = [m.name for m in [*spec.models, *spec.judges] if m.name not in spec.plan.throughput_scale]
    if unscaled:
        warnings.append(f"plan.throughput_scale has no entry for {', '.join(dict.fromkeys(unscaled))}: each "
                        "assumed as fast as an 8B dense model (1.0)")
    loads = {m.name: load_hours(spec, m, warnings) for m in [*spec.models, *spec.judges]}
    tok = _Tokens(spec.plan, questions, spec.compile.small_pool_max)
    rows = _generation_rows(spec, questions, tok, loads) + _judge_rows(spec, questions, tok, loads)
    totals = _totals(rows)
    return {
        "run": spec.name,
        "dataset": spec.dataset,
        "questions": len(questions),
        "questions_with_image": sum(1 for q in questions if q.image),
        "checks": sum(len(c) for c in tok.checks.values()),
        "assumptions": spec.plan.model_dump(),
        "load_minutes": {name: hours * 60 for name, hours in loads.items()},
        "rows": [asdict(r) for r in rows],
        "totals": totals,
        "gpu_hours": sum(t["gpu_hours"] for t in totals.values()),
        "warnings": list(dict.fromkeys(warnings + _loading_warnings(spec, rows))),  # a name can be model and judge
    }


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


def plan_run(config_path: str | Path) -> dict:
    """The estimate of a run, after the checks a submission makes: a model folder that is not
    there or an image that does not open is a warning here (the plan itself does not need them).
    Before the release is downloaded (the dataset is a `gamut.jsonl` not there yet) the plan
    counts on the release's known shape, and says so."""
    spec = load_run_config(config_path)
    dataset = Path(spec.dataset)
    if dataset.name == RELEASE_FILE and not dataset.exists():
        questions = release_shape(spec.plan)
        notes = [f"{dataset} is not downloaded yet (scripts/fetch_data.py): planned on the GAMUT release's "
                 f"shape, {RELEASE_QUESTIONS} questions with an image and {PAPER_CHECKS} checks each on average, "
                 f"questions and checks of {spec.plan.mean_question_tokens or RELEASE_QUESTION_TOKENS} and "
                 f"{spec.plan.mean_check_tokens or RELEASE_CHECK_TOKENS} tokens (plan.mean_question_tokens, "
                 "plan.mean_check_tokens)"]
        notes += [f"{p} (a submission refuses this)" for p in check_engine_inputs(spec, dataset=False)]
    else:
        questions = load_questions(spec.dataset, check_images=False)
        notes = [f"{p} (a submission refuses this)" for p in check_engine_inputs(spec)]
    if not check_graph_inputs(spec):  # a graph that cannot be built is `slurm`'s to report
        jobs = build_graph(spec, Path(config_path))
        notes += [f"{p.field}: {p.message} (a submission refuses this)" for p in fit_problems(spec, jobs)]
    result = estimate(spec, questions, notes)
    result["dataset_shape"] = "release" if questions and questions[0].domain == "release" else "measured"
    return result


def _si(x: float) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= size:
            return f"{x / size:.3g}{unit}"
    return f"{x:.0f}"


def _hours_text(x: float) -> str:
    return f"{x:.2g}" if x < 10 else f"{x:,.0f}"


def render_table(result: dict, console) -> None:
    """One table per stage; token counts in k/M/B, hours to three significant digits."""
    from rich.table import Table
    from rich.text import Text

    console.print(Text.assemble((str(result["run"]), "bold"), f": {result['questions']} questions "
                                f"({result['questions_with_image']} with an image), {result['checks']} checks"))
    for stage, tot in result["totals"].items():
        rows = [r for r in result["rows"] if r["stage"] == stage]
        if not rows:
            continue
        saved = 1 - tot["prompt_tokens_shared"] / tot["prompt_tokens"] if tot["prompt_tokens"] else 0.0
        table = Table(title=f"{stage}: {tot['requests']:,} requests, {_hours_text(tot['gpu_hours'])} GPU-h, "
                        f"{_hours_text(tot['load_gpu_hours'])} of them loading weights "
                        f"(prefix sharing saves {saved:.0%} of prompt tokens)", title_justify="left")
        table.add_column("judge" if stage == "judge" else "model", overflow="fold", min_width=12)
        table.add_column("answers of" if stage == "judge" else "variants", overflow="fold", min_width=12)
        for col in ("requests", "prompt", "shared", "output", "GPU-h", "GPUs", "tasks", "h/task"):
            table.add_column(col, justify="right", no_wrap=True)
        for r in rows:
            over = (" >limit", "red") if r["over_time_limit"] else ""
            table.add_row(r["name"], r["target"], f"{r['requests']:,}", _si(r["prompt_tokens"]),
                      _si(r["prompt_tokens_shared"]), _si(r["output_tokens"]), _hours_text(r["gpu_hours"]),
                      str(r["gpus_per_task"]), str(r["tasks"]), Text.assemble(_hours_text(r["hours_per_task"]), over))
        table.add_row(Text("total", "bold"), "", f"{tot['requests']:,}", _si(tot["prompt_tokens"]),
                  _si(tot["prompt_tokens_shared"]), _si(tot["output_tokens"]),
                  Text(_hours_text(tot["gpu_hours"]), "bold"), "", "", "")
        console.print(table)
    assumed = result["assumptions"]
    console.print("prompt/shared/output: tokens computed without and with prefix caching, and generated.")
    console.print(Text.assemble("GPU-hours in all: ", (_hours_text(result["gpu_hours"]), "bold"), ". Assumed per GPU: "
                  f"{assumed['prefill_tokens_per_s_per_gpu']:,.0f} prompt tok/s, {assumed['decode_tokens_per_s_per_gpu']:,.0f} "
                  f"output tok/s; {assumed['mean_answer_tokens']} tokens per answer, {assumed['image_tokens']} per image "
                  f"(the run's `plan:` block)."))
    loads = ", ".join(f"{n} {m:.1f}" for n, m in result["load_minutes"].items())
    console.print(f"Every task first starts its engine and loads the weights: {assumed['startup_minutes']:g} min + "
                  f"weights at {assumed['load_gb_per_minute']:g} GB/min (plan.startup_minutes, "
                  f"plan.load_gb_per_minute), minutes per task: {loads}; included in GPU-h and h/task.")
    for line in result["warnings"]:
        console.print(f"warning: {line}", style="yellow", markup=False)
    if any(r["over_time_limit"] for r in result["rows"]):
        console.print(">limit: tasks estimated to run past their SLURM time limit; raise "
                      "slurm.shards_* or slurm.time_*.", style="red")
