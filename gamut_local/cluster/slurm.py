"""Submitting a run's job graph (`gamut-local slurm`): check what the jobs will read, render
their scripts, `sbatch` each job with its dependencies and record the ids in
`<run>/slurm/jobs.json`; resubmitting sends only the tasks not done (`cluster.done`).

The graph is `cluster.graph`'s, its scripts `cluster.render`'s. Everything the tasks will load
is checked here, before anything waits in a queue: the dataset and its images, the extra
answers, every model and judge folder (and a served judge's weights) and whether a node of the
partition can hold each request (`cluster.fit`, where `sinfo` answers). A resubmission is
refused while jobs of an earlier one are queued, except those that can never start (an
upstream task failed), which it cancels.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from gamut_local.cluster.cost import questions_to_plan
from gamut_local.cluster.done import mark_pending
from gamut_local.cluster.fit import cluster_nodes, misfits, requests
from gamut_local.cluster.graph import Job, check_graph_inputs, run_graph
from gamut_local.cluster.jobs_file import read_jobs
from gamut_local.cluster.render import render_jobs, templates_dir
from gamut_local.config import RunSpec, load_run_config, resolve_model_path
from gamut_local.data.records import load_answers
from gamut_local.engines import model_problem, tensor_parallel_problem
from gamut_local.errors import InputError, Problem
from gamut_local.rundir.paths import inside, run_dir_problems
from gamut_local.rundir.store import write_json, write_text_atomic

_JOB_ID = re.compile(r"^(\d+)(?:;\S+)?$")


def sbatch_argv(job: Job, dep_ids: list[str], script_path: str, start_ids: list[str] = ()) -> list[str]:
    """`dep_ids`: jobs that must succeed first; `start_ids`: jobs that must have started (a
    judge server its clients reach)."""
    argv = ["sbatch", "--parsable"]
    if job.array:
        argv.append(f"--array={job.array_spec}" + (f"%{job.throttle}" if job.throttle else ""))
    deps = ([f"afterok:{':'.join(dep_ids)}"] if dep_ids else []) + ([f"after:{':'.join(start_ids)}"] if start_ids else [])
    if deps:
        argv.append(f"--dependency={','.join(deps)}")
    argv.append(script_path)
    return argv


def _var(key: str) -> str:
    return "JOB_" + re.sub(r"[^A-Za-z0-9]", "_", key)


@dataclass
class Submission:
    jobs: list[Job]  # every job in the graph
    todo: list[Job]  # those with tasks left, in submission order
    run_dir: Path
    scripts_dir: Path
    dataset: str = ""
    spec: RunSpec | None = None
    config: str = ""  # the run config's path, recorded with each submission (`gamut-local status`)


def check_run_inputs(spec: RunSpec) -> list[Problem]:
    """What the jobs will read, checked now, not after hours in the queue: the dataset, the
    extra answers and where the run writes."""
    from gamut_local.data.dataset import load_questions

    problems = run_dir_problems(spec.output_dir, {"dataset": [spec.dataset], "extra_answers": spec.extra_answers,
                                                  "extra_verdicts": spec.extra_verdicts}, spec.source)
    questions = None
    try:
        questions = {q.question_id for q in load_questions(spec.dataset)}
    except InputError as e:
        problems += e.problems
    try:
        answers = load_answers(spec.extra_answers) if spec.extra_answers else []
    except InputError as e:
        problems += e.problems
        answers = []
    unknown = sorted({a["question_id"] for a in answers} - questions) if questions is not None else []
    if unknown:
        problems.append(Problem(spec.source, None, "extra_answers", f"{len(unknown)} answers are to questions "
                                f"not in the dataset (e.g. {', '.join(unknown[:3])})"))
    return problems


def check_engine_inputs(spec: RunSpec, *, dataset: bool = True) -> list[Problem]:
    """What generation and judging tasks load: every model and judge folder and (`dataset`)
    every image of the dataset. A broken image or a missing folder fails here, not in the queue."""
    from gamut_local.data.dataset import load_questions

    problems = [p for m in [*spec.models, *spec.judges] if (p := model_problem(m))]
    for j in spec.judges:  # the weights a judge server job serves
        if j.server is not None and j.server.serve:
            served = j.model_copy(update={"path": j.server.serve, "backend": "vllm", "server": None})
            path, p = resolve_model_path(served)
            if p is not None:
                problems.append(Problem(j.source, None, "server.serve", p.message))
            elif path and (p := tensor_parallel_problem(served, path)) is not None:
                problems.append(p)
    try:
        if dataset:
            load_questions(spec.dataset, check_images=True)
    except InputError as e:
        problems += e.problems
    return problems


def prepare(config_path: str | Path, *, check_inputs: bool = True) -> Submission:
    """The job graph with its scripts rendered, after the same checks a submission needs: the
    dataset and its images, the extra answers and, while any generation or judging is left,
    every model folder (so a dry run finds what `--submit` would). `check_inputs=False` skips
    them (only to render the scripts of a config whose data and weights are elsewhere)."""
    config_path = Path(config_path)
    spec = load_run_config(config_path)
    problems = check_graph_inputs(spec) + (check_run_inputs(spec) if check_inputs else [])
    if problems:
        raise InputError(problems)
    try:
        questions = questions_to_plan(spec)[0]
    except InputError:  # unchecked (check_inputs=False), a dataset not here: one task per engine
        questions = []
    jobs = run_graph(spec, config_path, questions)
    for j in jobs:
        j.throttle = spec.slurm.max_concurrent
    render_jobs(jobs, templates_dir(spec, config_path))
    run_dir = Path(spec.output_dir)
    scripts = run_dir / "slurm" / "scripts"
    outside = [j.key for j in jobs if not inside(scripts / f"{j.key}.sbatch", scripts)]
    if outside:  # names are checked, so this is a bug if it ever fires
        raise InputError([Problem(spec.source, None, "", f"job script paths outside {scripts}: {outside}")])
    mark_pending(jobs, run_dir / "slurm" / "done")
    if check_inputs:
        problems = fit_problems(spec, jobs)
        if problems:
            raise InputError(problems)
    if check_inputs and any(j.pending and j.stage in ("generate", "judge") for j in jobs):
        problems = check_engine_inputs(spec)
        if problems:
            raise InputError(problems)
    return Submission(jobs, [j for j in jobs if j.pending], run_dir, scripts, spec.dataset, spec,
                      str(config_path.resolve()))


def fit_problems(spec: RunSpec, jobs: list[Job]) -> list[Problem]:
    """Requests no node of the target partition can hold, where `sinfo` says what the nodes are."""
    nodes = cluster_nodes()
    if nodes is None:
        return []
    return [Problem(spec.source, None, setting, message)
            for setting, message in misfits(requests(jobs, spec.slurm), nodes, spec.slurm.partition)]


def dry_run_text(submission: Submission) -> str:
    """Every script and the sbatch command for it, as a shell recipe (job ids as variables)."""
    parts = []
    todo = {j.key for j in submission.todo}
    for job in submission.todo:
        path = submission.scripts_dir / f"{job.key}.sbatch"
        parts.append(f"# ===== {path} =====\n{job.script.rstrip()}\n")
    parts.append("# ===== submission =====")
    for job in submission.todo:
        deps = [f"${_var(a)}" for a in job.after if a in todo]
        starts = [f"${_var(a)}" for a in job.after_start if a in todo]
        argv = sbatch_argv(job, deps, str(submission.scripts_dir / f"{job.key}.sbatch"), starts)
        cmd = " ".join(a if a.startswith("--dependency") else shlex.quote(a) for a in argv)
        parts.append(f"{_var(job.key)}=$({cmd} | cut -d';' -f1)")  # --parsable may add ';cluster'
    skipped = [j.key for j in submission.jobs if not j.pending]
    if skipped:
        parts.append(f"# complete, not resubmitted: {', '.join(skipped)}")
    return "\n".join(parts) + "\n"


def _queued(jobs_file: Path, submissions: list[dict]) -> dict[str, str]:
    """Job ids of earlier submissions that squeue still lists -> why they wait (empty without squeue)."""
    if not submissions or shutil.which("squeue") is None:
        return {}
    recorded = {j["job_id"] for sub in submissions for j in sub["jobs"]}
    res = subprocess.run(["squeue", "--noheader", "--me", "--format=%F|%r"], capture_output=True, text=True)
    if res.returncode != 0:
        return {}
    live: dict[str, str] = {}
    for line in res.stdout.splitlines():
        job_id, _, reason = line.strip().partition("|")
        if job_id:
            live[job_id] = live.get(job_id) or reason
    return {i: live[i] for i in sorted(recorded & set(live), key=int)}


def _clear_dead(queued: dict[str, str], echo) -> dict[str, str]:
    """Jobs whose `afterok` can never be met (an upstream task failed, was cancelled or timed out)
    would stay PENDING forever on a cluster without kill_invalid_depend: cancel them, since the
    resubmission replaces them. Returns the jobs still queued for a reason of their own."""
    dead = [i for i, reason in queued.items() if reason == "DependencyNeverSatisfied"]
    if dead:
        subprocess.run(["scancel", *dead], capture_output=True, text=True)
        echo(f"cancelled {len(dead)} job(s) of an earlier submission that could never start, "
             f"as a task they wait for did not finish: {', '.join(dead)}")
    return {i: r for i, r in queued.items() if i not in dead}


def submit(submission: Submission, *, force: bool = False, echo=print) -> list[dict]:
    """Write the scripts, sbatch each job with its dependencies, record the ids; returns the records."""
    jobs_file = submission.run_dir / "slurm" / "jobs.json"
    # Read (and checked) before any sbatch: a damaged record found only when the new ids are
    # added to it would leave jobs in the queue that no file records.
    earlier = read_jobs(jobs_file)
    live = [] if force else list(_clear_dead(_queued(jobs_file, earlier), echo))
    if live:
        raise InputError([Problem(str(jobs_file), None, "", "jobs of an earlier submission are still queued "
                                  f"or running ({', '.join(live)}); wait, scancel them, or pass --force")])
    if shutil.which("sbatch") is None:
        raise InputError([Problem("sbatch", None, "", "sbatch is not on PATH: run this on a SLURM login node "
                                  "(without --submit, `gamut-local slurm` only prints the job graph)")])
    submission.scripts_dir.mkdir(parents=True, exist_ok=True)
    (submission.run_dir / "slurm" / "logs").mkdir(parents=True, exist_ok=True)
    ids: dict[str, str] = {}
    records = []
    for job in submission.todo:
        path = submission.scripts_dir / f"{job.key}.sbatch"
        write_text_atomic(path, job.script)
        argv = sbatch_argv(job, [ids[a] for a in job.after if a in ids], str(path),
                           [ids[a] for a in job.after_start if a in ids])
        res = subprocess.run(argv, capture_output=True, text=True)
        m = _JOB_ID.match(res.stdout.strip())
        if res.returncode != 0 or not m:
            _record(jobs_file, earlier, records, submission.config)
            done = f" (submitted before it: {', '.join(r['key'] for r in records)}; recorded in {jobs_file})" \
                if records else ""
            raise InputError([Problem(str(path), None, "", f"sbatch failed (exit {res.returncode}): "
                                      f"{(res.stderr or res.stdout).strip()}{done}")])
        ids[job.key] = m.group(1)
        rec = {"key": job.key, "stage": job.stage, "job_id": m.group(1), "script": str(path),
               "array": job.array_spec if job.array else None, "gpus_per_node": job.gpus,
               "nodes": job.nodes, "after": [ids[a] for a in job.after if a in ids], "argv": argv,
               "log": _log_path(job, m.group(1))}
        records.append(rec)
        echo(f"{m.group(1)}  {job.key}" + (f"  [{job.array_spec}]" if job.array else ""))
    _record(jobs_file, earlier, records, submission.config)
    return records


def _log_path(job: Job, job_id: str) -> str:
    """Where SLURM writes the job's log (the templates' --output), `%a` left for the task."""
    name = f"{job.values['job_name']}-{job_id}" + ("_%a" if job.array else "")
    return f"{job.values['log_dir']}/{name}.out"


def _record(jobs_file: Path, earlier: list[dict], records: list[dict], config: str = "") -> None:
    if not records:
        return
    new = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "config": config, "jobs": records}
    write_json(jobs_file, {"submissions": [*earlier, new]})
