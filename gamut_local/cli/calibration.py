"""Grading a random sample by hand to correct a judge: sample (draw it) and plan-sample (how
many responses people must grade)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from gamut_local.cli.console import err, out
from gamut_local.cli.errors import user_errors
from gamut_local.cli.options import AsJson, SampleName
from gamut_local.errors import InputError, Problem
from gamut_local.reporting.console import echo, sample_plan_lines, strata_lines


@user_errors
def sample(
    run_dir: Path = typer.Argument(..., help="Run directory (needs a model judge's verdicts)."),
    responses: int = typer.Option(..., "--responses", help="Responses to draw per system (model, variant)."),
    per: str = typer.Option("model", "--per", help="model: each system (model, variant) its own random "
                            "questions; shared: the same questions for every system (differences paired)."),
    shared: bool = typer.Option(False, "--shared", help="Short for --per shared."),
    seed: int = typer.Option(0, help="Seed of the draw."),
    name: str = typer.Option("calibration", help="Name of the sample (RUN/samples/NAME.json)."),
):
    """Draw a seeded stratified random sample of responses for people to grade in full, and
    record its design, so that `score --correct-with` can correct a judge's scores with it."""
    from gamut_local.stages.sample import draw_sample

    if per not in ("model", "shared") or (shared and per != "model"):
        raise InputError([Problem("--per", None, "", f"expected model or shared (or --shared alone), got {per!r}"
                                  f"{' with --shared' if shared else ''}")])
    shared = shared or per == "shared"
    drawn = draw_sample(run_dir, responses, per="shared" if shared else "model", seed=seed, name=name, console=err)
    state = "drawn" if drawn.written else "already drawn, unchanged"
    out.print(f"{drawn.path}: sample {drawn.design.sample_id} {state}: {len(drawn.design.responses)} responses "
              f"({'shared questions' if shared else 'per system'}, seed {seed})")
    echo(out, strata_lines(drawn.design))
    out.print(f"Grade it in full: gamut-local view {run_dir} --annotator NAME, then \"Calibration sample\".")


@user_errors
def plan_sample(
    run_dir: Path = typer.Argument(..., help="Run directory with a calibration sample partly graded (the pilot)."),
    half_width: float = typer.Option(..., "--half-width", help="Wanted 95% CI half-width, in GAMUT points."),
    correct_with: str = typer.Option("human-*", "--correct-with", help="The gold judges (a name or pattern)."),
    sample: SampleName = None,
    as_json: AsJson = False,
):
    """How many responses people must grade in full for a CI half-width, corrected and human-only
    side by side, and how many keypresses that is (one a check); needs the `correct` extra."""
    import json
    from dataclasses import asdict

    from gamut_local.stages.sample import plan_sample as plan_stage

    rows = plan_stage(run_dir, half_width, correct_with, sample, console=err)
    if as_json:
        sys.stdout.write(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
        return
    echo(out, sample_plan_lines(rows))
