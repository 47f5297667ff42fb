"""`annotators assign`: share a run's calibration sample among a team of annotators (balanced
across strata, in the design's round order, with an overlap graded by two people), written
to `RUN/team/assignments.json` (`reporting.team.assign`)."""

from __future__ import annotations

from pathlib import Path
from typing import List

import typer

from gamut_local.cli.console import out
from gamut_local.cli.errors import user_errors
from gamut_local.cli.options import SampleName


@user_errors
def assign(
    run_dir: Path = typer.Argument(..., help="Run directory with a calibration sample (`gamut-local sample`)."),
    annotator: List[str] = typer.Option(..., "--annotator", help="A member of the team (repeatable, in the "
                                        "order they joined)."),
    sample: SampleName = None,
    overlap: float = typer.Option(0.1, "--overlap", help="Share of the responses graded by two people, for the "
                                  "agreement between people (0 to under 1)."),
):
    """Assign the calibration sample's responses to the team: each response to one annotator (two
    on the overlap), balanced across strata and in round order, so what the team has graded at any
    moment is a stratified random sample. Responses someone has graded in full stay theirs."""
    from gamut_local.analysis.assignment import check_overlap, check_team, progress
    from gamut_local.reporting.team import assign as assign_sample, design_of, graded_by
    from gamut_local.rundir.layout import find_sample

    check_overlap(overlap)  # bad input is refused before anything is read
    check_team(annotator, "--annotator")
    name = sample if sample is not None else find_sample(run_dir, None).stem
    made = assign_sample(run_dir, name, annotator, overlap)
    state = progress(made, graded_by(run_dir, design_of(run_dir, name)))
    team = state["team"]
    out.print(f"{run_dir}/team/assignments.json: sample {made.sample_id}, {team['responses']} responses, "
              f"{team['overlap']} graded by two people (overlap {overlap:g}), {team['labeled']} graded so far")
    for who, n in state["annotators"].items():
        out.print(f"  {who}: {n['assigned']} assigned, {n['graded']} graded")
