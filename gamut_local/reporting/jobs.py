"""What `plan` and `status` print: the job graph's cost, a table per stage (rich tables, token
counts in k/M/B, hours to two or three significant digits), and each job's progress with the
tasks that have not finished and what to do about them. The results themselves are
`cluster.plan.Plan` and `cluster.status.RunStatus`, which `--json` writes as they are."""

from __future__ import annotations

from pathlib import Path


def _si(x: float) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= size:
            return f"{x / size:.3g}{unit}"
    return f"{x:.0f}"


def _hours_text(x: float) -> str:
    return f"{x:.2g}" if x < 10 else f"{x:,.0f}"


def plan_tables(result, console) -> None:
    """`result` (a `cluster.plan.Plan`) as one table per stage, a row per job of the graph;
    token counts in k/M/B, hours to three significant digits."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    console.print(Text.assemble((str(result.run), "bold"), f": {result.questions} questions "
                                f"({result.questions_with_image} with an image), {result.checks} checks"))
    for stage, tot in result.totals.items():
        rows = [r for r in result.rows if r.stage == stage]
        if not rows:
            continue
        saved = 1 - tot.prompt_tokens_shared / tot.prompt_tokens if tot.prompt_tokens else 0.0
        table = Table(title=f"{stage}: {tot.requests:,} requests, {tot.tasks} tasks, {tot.loads} engine "
                            f"loads, {_hours_text(tot.gpu_hours)} GPU-h, {_hours_text(tot.load_gpu_hours)} "
                            f"of them loading weights ({tot.load_share:.0%}; prefix sharing saves {saved:.0%} "
                            "of prompt tokens)", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        table.add_column("judge" if stage == "judge" else "model", overflow="fold", min_width=10)
        table.add_column("systems" if stage == "judge" else "variants", justify="right", no_wrap=True)
        for col in ("requests", "tokens", "GPU-h", "GPUs", "tasks", "loads", "h/task"):
            table.add_column(col, justify="right", no_wrap=True)
        for r in rows:
            over = (" >limit", "red") if r.over_time_limit else ""
            what = "server" if r.job.endswith(".server") else str(len(r.targets))
            table.add_row(r.name, what, f"{r.requests:,}", _si(r.prompt_tokens_shared + r.output_tokens),
                          _hours_text(r.gpu_hours), str(r.gpus_per_task),
                          str(r.tasks), str(r.loads), Text.assemble(_hours_text(r.hours_per_task), over))
        table.add_row(Text("total", "bold"), "", f"{tot.requests:,}",
                      _si(tot.prompt_tokens_shared + tot.output_tokens), Text(_hours_text(tot.gpu_hours), "bold"), "",
                      str(tot.tasks), str(tot.loads), "")
        console.print(table)
    assumed = result.assumptions
    console.print("tokens: what the engine computes, prompt tokens after prefix sharing and generated tokens "
                  "(`plan --json` splits them, and counts prompts without sharing too; a judge's label is read "
                  "in the prefill step and charged as a prompt token); loads: engine start-ups with a weight load.")
    image = (f"{assumed['image_tokens']} per image" if assumed["image_tokens"] is not None
             else "each model's own tokens per image")
    console.print(Text.assemble("GPU-hours in all: ", (_hours_text(result.gpu_hours), "bold"), ". Assumed per GPU: "
                  f"{assumed['prefill_tokens_per_s_per_gpu']:,.0f} prompt tok/s, {assumed['decode_tokens_per_s_per_gpu']:,.0f} "
                  f"output tok/s; {assumed['mean_answer_tokens']} tokens per answer, {image} (the run's `plan:` block)."))
    loads = ", ".join(f"{n} {m:.1f}" for n, m in result.load_minutes.items())
    console.print(f"Every task first starts its engine and loads the weights: {assumed['startup_minutes']:g} min + "
                  f"weights at {assumed['load_gb_per_minute']:g} GB/min (plan.startup_minutes, "
                  f"plan.load_gb_per_minute), minutes per load: {loads}; included in GPU-h and h/task. Tasks per "
                  f"engine: slurm.shards_* where set, else as many as keep loading within "
                  f"{assumed['max_load_share']:.0%} of its GPU-h (plan.max_load_share).")
    for line in result.warnings:
        console.print(f"warning: {line}", style="yellow", markup=False)
    if any(r.over_time_limit for r in result.rows):
        console.print(">limit: tasks estimated to run past their SLURM time limit; raise "
                      "slurm.shards_* or slurm.time_*.", style="red")


def _task_line(o) -> str:
    task = f"task {o.task}" if o.task is not None else "job"
    job = (f"job {o.job_id}" + (f"_{o.task}" if o.task is not None else "")) if o.job_id else ""
    what = f"{task} ({job})" if o.task is not None and job else (job or task)
    why = f", {o.reason}" if o.reason and o.reason != "None" else ""
    code = f", exit {o.exit}" if o.state == "FAILED" and o.exit else ""
    line = f"    {what}: {o.state}{why}{code}"
    if o.ended or o.state.startswith("unknown"):
        has_log = bool(o.log) and Path(o.log).is_file()
        line += f"; log: {o.log}" if has_log else "; it never started (no log)"
    return line


def status_lines(status, console) -> None:
    """`status` (a `cluster.status.RunStatus`): one line per job of the graph, then one per
    unfinished task, then what to do next."""
    ended = 0
    for r in status.rows:
        console.print(f"{r.key:<48} {r.tasks_done}/{r.tasks} tasks done   {r.progress}", markup=False)
        for o in r.open:
            ended += o.ended
            console.print(_task_line(o), markup=False)
            if o.log_tail:
                console.print(f"      last log line: {o.log_tail}", markup=False)
    if status.complete:
        console.print("Every task is done.", markup=False)
    elif ended:
        console.print(f"{ended} task(s) ended without finishing. Fix the cause (see the log), then resubmit "
                      f"what is not done: gamut-local slurm --config {status.config} --submit", markup=False)
    elif not status.slurm:
        console.print(f"Without SLURM here, queued and running tasks cannot be told apart from ended ones; once none "
                      f"runs, resubmit what is not done: gamut-local slurm --config {status.config} --submit", markup=False)
