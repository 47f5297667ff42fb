"""Where a run stands: per stage, model, variant and judge, how much is done (from the run
directory's files and the SLURM done markers), and, where SLURM answers (`scontrol`), which
tasks are queued, running, or ended without finishing, with their log. Without SLURM it reads
the files only. `gamut-local status` prints it (`reporting.jobs`); the result is plain data.

It is typed (`RunStatus`, a `JobStatus` per job, an `OpenTask` per unfinished task), and
`status --json` writes `dataclasses.asdict` of it.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gamut_local.cluster.jobs_file import expand_indices, read_jobs
from gamut_local.cluster.done import mark_pending
from gamut_local.cluster.graph import Job, run_graph
from gamut_local.config import load_run_config
from gamut_local.data.dataset import load_questions
from gamut_local.data.records import answer_key, load_answers, verdict_key
from gamut_local.rubric.compiler import checks_for
from gamut_local.errors import InputError, Problem
from gamut_local.rundir import verdict_store
from gamut_local.rundir.layout import answer_files, scores_path, verdict_siblings
from gamut_local.rundir.store import read_jsonl

# SLURM job states of a task that ended without its done marker, and what the user does next.
ENDED = {"FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE"}
LIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED", "REQUEUE_HOLD"}


@dataclass(frozen=True)
class OpenTask:
    """A task of a job without its done marker: SLURM's state of it (or "not submitted", or
    unknown), and its log with the log's last line once it ended without finishing."""

    task: int | None  # None: a job that is not an array
    job_id: str | None  # None: never submitted
    state: str
    reason: str
    exit: str
    log: str
    log_tail: str

    @property
    def ended(self) -> bool:
        """It ended without finishing (failed, cancelled, timed out, ...): resubmit it."""
        return self.state in ENDED


@dataclass(frozen=True)
class JobStatus:
    """One job of the graph: how much of its work is in the files, and its open tasks."""

    key: str
    stage: str
    progress: str
    tasks: int
    tasks_done: int
    open: tuple[OpenTask, ...]


@dataclass(frozen=True)
class RunStatus:
    config: str
    run_dir: str
    slurm: bool  # scontrol answers here
    rows: tuple[JobStatus, ...]
    complete: bool  # no job has an open task


def resolve_config(target: Path) -> Path:
    """A run config as given, or the one a run directory's last submission recorded."""
    if target.is_file():
        return target
    jobs = target / "slurm" / "jobs.json"
    if target.is_dir() and jobs.is_file():
        subs = read_jobs(jobs)
        config = next((s["config"] for s in reversed(subs) if s.get("config")), None)
        if config:
            return Path(config)
    raise InputError([Problem(str(target), None, "", "not a run config, nor a run directory with a "
                              "recorded submission (slurm/jobs.json); give the run's YAML")])


def _count(paths: list[Path], key) -> int:
    def rows(p: Path):
        if verdict_store.is_store(p):  # another task may be writing parts: count what is renamed
            return verdict_store.read_unit(p, ["question_id", "model", "variant", "judge", "check_id"]).to_pylist()
        return (r for _, r in read_jsonl(p, allow_empty=True))
    return len({key(r) for p in paths for r in rows(p)})


def _task_records(run_dir: Path) -> dict[tuple[str, int], dict]:
    """(job key, task index) -> the latest submission's record of that task, with its log path."""
    jobs = run_dir / "slurm" / "jobs.json"
    out = {}
    for sub in read_jobs(jobs):
        for rec in sub["jobs"]:
            tasks = expand_indices(rec["array"]) if rec.get("array") else [0]
            for t in tasks:
                log = (rec.get("log") or "").replace("%a", str(t))
                out[(rec["key"], t)] = {"job_id": rec["job_id"], "array": bool(rec.get("array")), "log": log}
    return out


def _scontrol(job_id: str) -> list[dict]:
    """Every task of a job as `scontrol -o show job` reports it (finished ones for MinJobAge)."""
    res = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        return []
    return [dict(re.findall(r"(\w+)=(\S*)", line)) for line in res.stdout.splitlines() if line.strip()]


def slurm_states(tasks: dict[tuple[str, int], dict]) -> dict[tuple[str, int], dict]:
    """(job key, task) -> {state, reason, exit}; empty without scontrol."""
    if shutil.which("scontrol") is None:
        return {}
    by_job: dict[str, list[tuple[str, int]]] = {}
    for (key, t), rec in tasks.items():
        by_job.setdefault(rec["job_id"], []).append((key, t))
    out = {}
    for job_id, keys in by_job.items():
        infos = _scontrol(job_id)
        for key, t in keys:
            for info in infos:
                ids = _task_ids(info)
                if t in ids:
                    out[(key, t)] = {"state": info.get("JobState", "?"), "reason": info.get("Reason", ""),
                                     "exit": info.get("ExitCode", "")}
    return out


def _task_ids(info: dict) -> list[int]:
    """The array tasks one `scontrol` line stands for ([0] for a plain job; none for a form
    this reader does not know, so that task's state is unknown rather than an error)."""
    try:
        return expand_indices(info["ArrayTaskId"]) if info.get("ArrayTaskId") else [0]
    except ValueError:
        return []


def _last_line(log: str) -> str:
    path = Path(log)
    if not log or not path.is_file():
        return ""
    lines = [x for x in path.read_text(errors="replace").splitlines() if x.strip()]
    return lines[-1].strip()[:300] if lines else ""


def _progress(spec, run_dir: Path, job: Job, questions) -> str:
    """How much of a job's work is in the files."""
    v = job.values
    if job.stage == "generate":
        model = job.key.split(".", 1)[1]
        variants = next(m for m in spec.models if m.name == model).variants(spec.variants)
        return ", ".join(f"{model}.{x}: {_count(answer_files(run_dir, model, x), answer_key)}/{len(questions)} answers"
                         for x in variants)
    if job.stage == "judge":
        systems = [tuple(x.rsplit(".", 1)) for x in shlex.split(v["systems"])]
        extra = {}
        for a in load_answers(spec.extra_answers):
            extra.setdefault((a["model"], a["variant"]), set()).add(a["question_id"])
        got = expected = 0
        for model, variant in systems:  # a generated system's answers, else its extra answers
            answered = extra.get((model, variant)) or {a["question_id"] for p in answer_files(run_dir, model, variant)
                                                       for _, a in read_jsonl(p)}
            expected += sum(len(q.checks_for_variant(variant, checks_for(q, spec.compile.small_pool_max)))
                            for q in questions if q.question_id in answered)
            got += _count(verdict_siblings(run_dir, job.engine, model, variant), verdict_key)
        return f"{got}/{expected} verdicts of the answers of {len(systems)} systems so far"
    if job.stage == "serve":  # a judge's server: its work is its clients'
        return f"serves {v['judge']} for {len(job.serves)} judging arrays"
    path = scores_path(run_dir) if job.stage == "score" else run_dir / "report.md"
    return f"{path.relative_to(run_dir)} {'written' if path.is_file() else 'not yet written'}"


def run_status(target: str | Path) -> RunStatus:
    config = resolve_config(Path(target))
    spec = load_run_config(config)
    run_dir = Path(spec.output_dir)
    questions = load_questions(spec.dataset, check_images=False)
    jobs = run_graph(spec, config, questions)
    mark_pending(jobs, run_dir / "slurm" / "done")
    tasks = _task_records(run_dir)
    states = slurm_states(tasks)
    # A recorded task SLURM does not list: no scontrol here, or finished longer ago than MinJobAge.
    unknown = "unknown (SLURM no longer lists it)" if shutil.which("scontrol") else "unknown (no scontrol)"
    rows = []
    for job in jobs:
        open_ = []
        for t in job.pending:
            rec, st = tasks.get((job.key, t)), states.get((job.key, t), {})
            state = st.get("state") or ("not submitted" if rec is None else unknown)
            open_.append(OpenTask(task=t if job.array else None, job_id=rec["job_id"] if rec else None, state=state,
                                  reason=st.get("reason", ""), exit=st.get("exit", ""), log=rec["log"] if rec else "",
                                  log_tail=_last_line(rec["log"]) if rec and state in ENDED else ""))
        rows.append(JobStatus(key=job.key, stage=job.stage, progress=_progress(spec, run_dir, job, questions),
                              tasks=len(job.tasks), tasks_done=len(job.tasks) - len(job.pending), open=tuple(open_)))
    return RunStatus(config=str(config), run_dir=str(run_dir), slurm=shutil.which("scontrol") is not None,
                     rows=tuple(rows), complete=all(not r.open for r in rows))
