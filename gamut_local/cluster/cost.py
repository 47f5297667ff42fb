"""What a run will cost before it is submitted: requests, prompt tokens, GPU-hours per stage.

Counts are exact (questions x models x variants; checks per question from the dataset's
`checks` or its compiled meta-rubric). Token counts of text that exists (questions, checks,
given answers, system prompts) are measured as characters / `plan.chars_per_token` unless the
run's `plan` block fixes a mean; tokens that do not exist yet (answers to generate) and image
tokens come from the `plan` block. GPU-hours = prefill tokens / prefill rate + output tokens /
decode rate, per GPU, scaled per model by `plan.throughput_scale`.

Prefix sharing: a judge prompt is instructions, question (and image), response, then one
check; with prefix caching the engine computes the instructions once and each response's
prefix once, so only the check (and the label) is new per request. Candidates share only the
system prompt. The `prompt tokens (shared)` column is what a prefix-caching engine computes.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

from gamut_local.config import ModelSpec, PlanSpec, RunSpec, load_run_config
from gamut_local.data.dataset import load_questions
from gamut_local.data.records import Question, load_answers
from gamut_local.errors import InputError, Problem
from gamut_local.rubric.compiler import checks_for
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
    hours_per_task: float
    over_time_limit: bool = False


def _tokens(text: str | None, plan: PlanSpec) -> int:
    return 0 if not text else max(1, round(len(text) / plan.chars_per_token))


def _scale(plan: PlanSpec, name: str) -> float:
    return float(plan.throughput_scale.get(name, 1.0))


def _hours(limit: str) -> float | None:
    """A SLURM time limit in hours: 'M', 'M:S', 'H:M:S', 'D-H', 'D-H:M' or 'D-H:M:S'."""
    match = re.fullmatch(r"(?:(\d+)-)?(\d+(?::\d+){0,2})", limit.strip())
    if not match:
        return None
    parts = [int(p) for p in match.group(2).split(":")]
    if match.group(1) is not None:
        h, mi, se = (parts + [0, 0])[:3]
    else:
        h, mi, se = ([0] * (3 - len(parts)) + parts) if len(parts) == 3 else (0, *(parts + [0])[:2])
    return int(match.group(1) or 0) * 24 + h + mi / 60 + se / 3600


def _gpu_hours(prefill: float, output: float, plan: PlanSpec, scale: float) -> float:
    return (prefill / plan.prefill_tokens_per_s_per_gpu
            + output / plan.decode_tokens_per_s_per_gpu) / scale / 3600


def _row(stage, name, target, requests, full, shared, out, spec: ModelSpec, plan: PlanSpec,
         tasks: int, limit: str) -> StageRow:
    computed = shared if spec.engine.enable_prefix_caching else full
    gpu_hours = _gpu_hours(computed, out, plan, _scale(plan, name))
    gpus = spec.total_gpus()
    per_task = gpu_hours / gpus / max(tasks, 1)
    limit_hours = _hours(limit)
    return StageRow(stage, name, target, requests, full, shared, out, gpu_hours, gpus, tasks, per_task,
                    over_time_limit=bool(limit_hours is not None and per_task > limit_hours))


class _Tokens:
    """Token counts of a dataset's texts under a run's `plan` assumptions."""

    def __init__(self, plan: PlanSpec, questions: list[Question]):
        self.plan = plan
        self.checks = {q.question_id: checks_for(q) for q in questions}
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


def _generation_rows(spec: RunSpec, questions: list[Question], tok: _Tokens) -> list[StageRow]:
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
                         m, plan, spec.slurm.shards_generate * len(vs), spec.slurm.time_generate))
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


def _judge_rows(spec: RunSpec, questions: list[Question], tok: _Tokens) -> list[StageRow]:
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
                             spec.slurm.time_judge))
    return rows


def _totals(rows: list[StageRow]) -> dict:
    totals = {}
    for stage in ("generate", "judge"):
        mine = [r for r in rows if r.stage == stage]
        totals[stage] = {"requests": sum(r.requests for r in mine),
                         "prompt_tokens": sum(r.prompt_tokens for r in mine),
                         "prompt_tokens_shared": sum(r.prompt_tokens_shared for r in mine),
                         "output_tokens": sum(r.output_tokens for r in mine),
                         "gpu_hours": sum(r.gpu_hours for r in mine)}
    return totals


def estimate(spec: RunSpec, questions: list[Question]) -> dict:
    """Requests, tokens and GPU-hours per (stage, model/judge); totals per stage."""
    tok = _Tokens(spec.plan, questions)
    rows = _generation_rows(spec, questions, tok) + _judge_rows(spec, questions, tok)
    totals = _totals(rows)
    return {
        "run": spec.name,
        "dataset": spec.dataset,
        "questions": len(questions),
        "questions_with_image": sum(1 for q in questions if q.image),
        "checks": sum(len(c) for c in tok.checks.values()),
        "assumptions": spec.plan.model_dump(),
        "rows": [asdict(r) for r in rows],
        "totals": totals,
        "gpu_hours": sum(t["gpu_hours"] for t in totals.values()),
    }


def plan_run(config_path: str | Path) -> dict:
    spec = load_run_config(config_path)
    questions = load_questions(spec.dataset, check_images=False)
    return estimate(spec, questions)


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

    console.print(f"[bold]{result['run']}[/bold]: {result['questions']} questions "
                  f"({result['questions_with_image']} with an image), {result['checks']} checks")
    for stage, tot in result["totals"].items():
        rows = [r for r in result["rows"] if r["stage"] == stage]
        if not rows:
            continue
        saved = 1 - tot["prompt_tokens_shared"] / tot["prompt_tokens"] if tot["prompt_tokens"] else 0.0
        table = Table(title=f"{stage}: {tot['requests']:,} requests, {_hours_text(tot['gpu_hours'])} GPU-h "
                        f"(prefix sharing saves {saved:.0%} of prompt tokens)", title_justify="left")
        table.add_column("judge" if stage == "judge" else "model", overflow="fold", min_width=12)
        table.add_column("answers of" if stage == "judge" else "variants", overflow="fold", min_width=12)
        for col in ("requests", "prompt", "shared", "output", "GPU-h", "GPUs", "tasks", "h/task"):
            table.add_column(col, justify="right", no_wrap=True)
        for r in rows:
            over = " [red]>limit[/red]" if r["over_time_limit"] else ""
            table.add_row(r["name"], r["target"], f"{r['requests']:,}", _si(r["prompt_tokens"]),
                      _si(r["prompt_tokens_shared"]), _si(r["output_tokens"]), _hours_text(r["gpu_hours"]),
                      str(r["gpus_per_task"]), str(r["tasks"]), _hours_text(r["hours_per_task"]) + over)
        table.add_row("[bold]total[/bold]", "", f"{tot['requests']:,}", _si(tot["prompt_tokens"]),
                  _si(tot["prompt_tokens_shared"]), _si(tot["output_tokens"]),
                  f"[bold]{_hours_text(tot['gpu_hours'])}[/bold]", "", "", "")
        console.print(table)
    assumed = result["assumptions"]
    console.print("prompt/shared/output: tokens computed without and with prefix caching, and generated.")
    console.print(f"GPU-hours in all: [bold]{_hours_text(result['gpu_hours'])}[/bold]. Assumed per GPU: "
                  f"{assumed['prefill_tokens_per_s_per_gpu']:,.0f} prompt tok/s, {assumed['decode_tokens_per_s_per_gpu']:,.0f} "
                  f"output tok/s; {assumed['mean_answer_tokens']} tokens per answer, {assumed['image_tokens']} per image "
                  f"(the run's `plan:` block).")
    if any(r["over_time_limit"] for r in result["rows"]):
        console.print("[red]>limit: tasks estimated to run past their SLURM time limit; raise "
                      "slurm.shards_* or slurm.time_*.[/red]")
