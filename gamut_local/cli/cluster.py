"""A run on a cluster: plan (the cost before submitting), slurm (the job graph, submitted with
--submit), status (where a run stands)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from gamut_local.cli.console import err, out
from gamut_local.cli.errors import reads_dataset, user_errors
from gamut_local.cli.options import RUN_CONFIG_HELP, AsJson, RunConfig, Strict
from gamut_local.errors import InputError, Problem


@user_errors
@reads_dataset
def plan_cmd(config: RunConfig, as_json: AsJson = False, strict: Strict = False):
    """Requests, prompt tokens (with and without prefix sharing) and GPU-hours per stage."""
    from gamut_local.cluster.plan import plan_run
    from gamut_local.reporting.jobs import plan_tables

    result = plan_run(config)
    if as_json:
        _write_json(result)
    else:
        plan_tables(result, out)


@user_errors
@reads_dataset
def slurm_cmd(
    config: RunConfig,
    submit_: bool = typer.Option(False, "--submit", help="Submit the jobs; without it nothing is submitted."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print every job script and sbatch command and "
                                 "submit nothing (the default; kept for scripts that say so)."),
    force: bool = typer.Option(False, "--force", help="Submit even if jobs of an earlier submission are still queued."),
    strict: Strict = False,
):
    """Print the run's SLURM job graph (generate -> judge -> score -> report); --submit submits
    it, and rerunning with --submit resubmits only what is not done. Both check the dataset, its
    images and every model folder first."""
    from gamut_local.cluster.slurm import dry_run_text, prepare, submit

    if dry_run and submit_:
        raise InputError([Problem("--dry-run/--submit", None, "", "give one of them, not both")])
    submission = prepare(config)
    if not submit_:
        sys.stdout.write(dry_run_text(submission))
        err.print("Dry run: nothing was submitted or written; add --submit to submit.")
        return
    if not submission.todo:
        out.print(f"Nothing to submit: every task of {config} has its done marker in {submission.run_dir / 'slurm' / 'done'}.")
        return
    records = submit(submission, force=force, echo=lambda line: out.print(line))
    tasks = sum(len(j.pending) for j in submission.todo)
    out.print(f"Submitted {len(records)} jobs ({tasks} tasks); ids in {submission.run_dir / 'slurm' / 'jobs.json'}.")


@user_errors
def status_cmd(
    run_dir: Optional[Path] = typer.Argument(None, help="The run directory of a submitted run, instead of "
                                             "--config: its last submission recorded the config."),
    config: Optional[Path] = typer.Option(None, "--config", help=RUN_CONFIG_HELP),
    as_json: AsJson = False,
):
    """Per stage, model, variant and judge: how much is done (from the files), which SLURM tasks
    are queued, running or ended without finishing (with their logs), and what to do next."""
    from gamut_local.cluster.status import run_status
    from gamut_local.reporting.jobs import status_lines

    _check_run_given(run_dir, config)
    result = run_status(config or run_dir)
    if as_json:
        _write_json(result)
    else:
        status_lines(result, out)


def _write_json(result) -> None:
    """A typed result (a dataclass) as the JSON `--json` prints."""
    import json
    from dataclasses import asdict

    sys.stdout.write(json.dumps(asdict(result), indent=2) + "\n")


def _check_run_given(run_dir: Path | None, config: Path | None) -> None:
    """One of the two; a run config is `--config` here as in every command."""
    if (run_dir is None) == (config is None):
        raise InputError([Problem("gamut-local status", None, "", "give the run's config (--config RUN.yaml) "
                                  "or its run directory, one of them")])
    if run_dir is not None and run_dir.is_file():
        raise InputError([Problem(str(run_dir), None, "", "a file, not a run directory; give a run config "
                                  f"with --config: gamut-local status --config {run_dir}")])
