"""`gamut-local plan`: requests, tokens, tasks, engine loads and GPU-hours of the job graph the
run would submit, before it is submitted.

The rows are the graph's own jobs (`graph.run_graph`): one per generation array, judging array
and judge server, with the tasks and engine loads that job makes, so the plan counts exactly what
`gamut-local slurm --submit` sends. Each job's work comes from `cost.engine_work`; a task adds one
start-up and weight load on every GPU it holds. A served judge's clients run on CPU (no GPU, no
load: their requests and tokens are theirs); its server job holds the GPUs, loads once and does
the work.

The plan is typed (`Plan`, its `StageRow`s and per-stage `StageTotals`); `plan --json` writes
`dataclasses.asdict` of it, and `reporting.jobs` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from gamut_local.cluster.cost import EngineWork, auto_shards, engine_work, questions_to_plan, shard_counts, work_hours
from gamut_local.cluster.graph import Job, build_graph, check_graph_inputs
from gamut_local.cluster.slurm import check_engine_inputs, fit_problems
from gamut_local.config import RunSpec, load_run_config, slurm_hours
from gamut_local.data.records import Question
from gamut_local.errors import InputError
from gamut_local.rubric.compiler import checks_for


@dataclass(frozen=True)
class StageRow:
    stage: str  # generate | judge (a judge server's row too)
    job: str  # the graph job's key
    name: str  # model (generate) or judge
    targets: list[str]  # variants (generate) or systems graded, model.variant (judge; none for a server)
    requests: int
    prompt_tokens: int  # every request's prompt, computed in full
    prompt_tokens_shared: int  # what a prefix-caching engine computes
    output_tokens: int  # generated; a judge's label tokens, charged as prefill
    gpu_hours: float  # work and loading
    gpus_per_task: int  # 0: a served judge's clients (CPU)
    tasks: int  # array tasks of the job
    loads: int  # engine loads: one per task on GPUs
    hours_per_task: float  # loading included
    load_gpu_hours: float = 0.0  # of gpu_hours: every load on every GPU of its task
    over_time_limit: bool = False


@dataclass(frozen=True)
class StageTotals:
    """A stage's rows summed; `load_share`: of its GPU-hours, loading the weights."""

    requests: int
    prompt_tokens: int
    prompt_tokens_shared: int
    output_tokens: int
    gpu_hours: float
    load_gpu_hours: float
    tasks: int
    loads: int
    load_share: float


@dataclass(frozen=True)
class Plan:
    """What `plan` prints: the run's questions and checks, the assumptions (the run's `plan:`
    block), minutes per engine load, image tokens per model, tasks per engine, one row per
    job, totals per stage, warnings, and whether the dataset's measured shape or the release's
    known one was counted on."""

    run: str
    dataset: str
    questions: int
    questions_with_image: int
    checks: int
    assumptions: dict
    load_minutes: dict[str, float]
    image_tokens: dict[str, dict]
    shards: dict[str, dict[str, int]]
    rows: tuple[StageRow, ...]
    totals: dict[str, StageTotals]  # generate, judge
    gpu_hours: float
    warnings: tuple[str, ...]
    dataset_shape: str = "measured"  # or "release"


def _row(job: Job, w: EngineWork, spec: RunSpec) -> StageRow:
    """The cost of one graph job doing `w` in `len(job.tasks)` tasks."""
    n, limit = len(job.tasks), slurm_hours(spec.slurm.time_generate if w.stage == "generate" else spec.slurm.time_judge)
    per_load = w.load_hours * w.gpus
    if job.stage == "serve":  # the engine: loads once, computes everything; requests on the clients' row
        row = StageRow("judge", job.key, w.name, [], 0, 0, 0, 0, w.work_gpu_hours + per_load, w.gpus,
                       1, 1, w.work_gpu_hours / w.gpus + w.load_hours, per_load)
    elif w.served:  # clients on CPU; their wall time is the server's
        row = StageRow("judge", job.key, w.name, w.targets, w.requests, w.prompt_tokens,
                       w.prompt_tokens_shared, w.output_tokens, 0.0, 0, n, 0, w.work_gpu_hours / max(w.gpus, 1))
    else:
        # The judge's instructions are computed once per task (engine_work counts them once).
        more = (n - 1) * spec.plan.judge_instruction_tokens * (w.stage == "judge") * w.caches
        shared, work = w.prompt_tokens_shared + more, w.work_gpu_hours + work_hours(more, 0, spec.plan, w.name)
        row = StageRow(w.stage, job.key, w.name, w.targets, w.requests, w.prompt_tokens, shared, w.output_tokens,
                       work + n * per_load, w.gpus, n, n, work / w.gpus / n + w.load_hours, n * per_load)
    return replace(row, over_time_limit=bool(limit is not None and row.hours_per_task > limit))


def _totals(rows: list[StageRow]) -> dict[str, StageTotals]:
    totals = {}
    for stage in ("generate", "judge"):
        mine = [r for r in rows if r.stage == stage]
        t = {k: sum(getattr(r, k) for r in mine) for k in ("requests", "prompt_tokens", "prompt_tokens_shared",
                                                           "output_tokens", "gpu_hours", "load_gpu_hours",
                                                           "tasks", "loads")}
        totals[stage] = StageTotals(**t, load_share=t["load_gpu_hours"] / t["gpu_hours"] if t["gpu_hours"] else 0.0)
    return totals


def _shard_warnings(spec: RunSpec, work: list[EngineWork], shards: dict, questions: int) -> list[str]:
    """Where a shard count the run fixes makes loading more than `plan.max_load_share` of an
    engine's GPU-hours, and the count the plan would choose."""
    out = []
    for w in work:
        n, share = shards[w.stage, w.name], spec.plan.max_load_share
        limit = spec.slurm.time_generate if w.stage == "generate" else spec.slurm.time_judge
        best, load = auto_shards(w, spec.plan, limit, questions), n * w.load_hours * w.gpus
        if w.served or n <= best or load <= share * (w.work_gpu_hours + load):
            continue
        out.append(f"{w.stage} {w.name}: loading the weights takes {load:.3g} of {w.work_gpu_hours + load:.3g} "
                   f"GPU-h ({load / (w.work_gpu_hours + load):.0%}) in {n} tasks (slurm.shards_{w.stage}); "
                   f"{best} would keep it within plan.max_load_share: leave the count unset for {w.name}")
    return out


def estimate(spec: RunSpec, questions: list[Question], config_path: Path,
             warnings: list[str]) -> tuple[Plan, list[Job]]:
    """Requests, tokens, tasks, loads and GPU-hours per job of the run's graph (returned beside);
    totals per stage; warnings about assumptions made for want of a setting, and about loading
    that dominates."""
    warnings = list(warnings)
    unscaled = [m.name for m in [*spec.models, *spec.judges] if m.name not in spec.plan.throughput_scale]
    if unscaled:
        warnings.append(f"plan.throughput_scale has no entry for {', '.join(dict.fromkeys(unscaled))}: each "
                        "assumed as fast as an 8B dense model (1.0)")
    work = engine_work(spec, questions, warnings)
    shards = shard_counts(spec, work, len(questions))
    jobs = build_graph(spec, config_path, shards, questions)
    by_engine = {(w.stage, w.name): w for w in work}
    rows = [_row(job, by_engine["generate" if job.stage == "generate" else "judge", job.engine], spec)
            for job in jobs if job.engine]
    totals = _totals(rows)
    return Plan(
        run=spec.name,
        dataset=spec.dataset,
        questions=len(questions),
        questions_with_image=sum(1 for q in questions if q.image),
        checks=sum(len(checks_for(q, spec.compile.small_pool_max)) for q in questions),
        assumptions=spec.plan.model_dump(),
        load_minutes={w.name: w.load_hours * 60 for w in work},
        image_tokens={w.name: {"tokens": w.image_tokens, "source": w.image_source} for w in work if w.image_source},
        shards={stage: {n: k for (s, n), k in shards.items() if s == stage} for stage in ("generate", "judge")},
        rows=tuple(rows),
        totals=totals,
        gpu_hours=sum(t.gpu_hours for t in totals.values()),
        warnings=tuple(dict.fromkeys(warnings + _shard_warnings(spec, work, shards, len(questions)))),
    ), jobs


def plan_run(config_path: str | Path) -> Plan:
    """The estimate of a run's graph, after the checks a submission makes: a model folder that is
    not there or an image that does not open is a warning here (the plan itself does not need
    them). Before the release is downloaded (the dataset is a `gamut.jsonl` not there yet) the
    plan counts on the release's known shape, and says so."""
    config_path = Path(config_path)
    spec = load_run_config(config_path)
    problems = check_graph_inputs(spec)
    if problems:  # the plan is the graph: one that cannot be built has no plan
        raise InputError(problems)
    questions, notes = questions_to_plan(spec)
    notes += [f"{p} (a submission refuses this)" for p in check_engine_inputs(spec, dataset=notes == [])]
    result, jobs = estimate(spec, questions, config_path, notes)
    refused = [f"{p.field}: {p.message} (a submission refuses this)" for p in fit_problems(spec, jobs)]
    return replace(result, warnings=result.warnings + tuple(refused),
                   dataset_shape="release" if questions and questions[0].domain == "release" else "measured")
