"""Verdicts beyond one judge's stage: the store's edges (verdicts export, verdicts import) and
a jury, a judge made of judges."""

from __future__ import annotations

from pathlib import Path
from typing import List

import typer

from gamut_local.cli.console import out
from gamut_local.cli.errors import user_errors
from gamut_local.errors import InputError, Problem

GROUP_HELP = ("The verdict store's edges: JSON Lines (or Parquet) out for people and other tools, "
              "JSON Lines in from elsewhere.")


@user_errors
def verdicts_export(
    inputs: List[Path] = typer.Argument(..., help="Run directories, verdict folders, store units (.parquet) "
                                        "or JSONL files."),
    out_path: Path = typer.Option(..., "--out", help="FILE.jsonl, or FILE.parquet (the store's schema); "
                                  "never inside a run's answers/, verdicts/ or superseded/."),
):
    """Write every verdict of the inputs to one file (a human's newest verdict per cell)."""
    from gamut_local.data.verdict_io import export
    from gamut_local.rundir.paths import check_outputs

    check_outputs({"--out": out_path}, list(inputs))
    if out_path.suffix not in (".jsonl", ".parquet"):  # the format is the suffix: no file of the wrong kind
        raise InputError([Problem(str(out_path), None, "--out", "give FILE.jsonl or FILE.parquet")])
    n = export(list(inputs), out_path)
    out.print(f"{out_path}: {n} verdicts")


@user_errors
def verdicts_import(
    files: List[Path] = typer.Argument(..., help="Verdict JSONL files (each record checked; problems as "
                                       "FILE:LINE: field)."),
    into: Path = typer.Option(..., "--into", help="The run directory whose store receives them."),
):
    """Bring verdicts from elsewhere (or an old run's JSONL) into a run's verdict store; a verdict
    the store holds already (in any shard's unit) is skipped, so importing twice adds nothing; a
    person's verdicts by (annotator, key, revision), never reverting a later one."""
    from gamut_local.data.verdict_io import import_files
    from gamut_local.rundir.paths import check_outputs

    check_outputs({"--into": into}, [], folders=("--into",))
    added = import_files(list(files), into)
    for path, n in added.items():
        out.print(f"{path}: +{n} verdicts")
    out.print(f"{sum(added.values())} verdicts imported into {into}")


@user_errors
def jury(
    run_dir: Path = typer.Argument(..., help="Run directory with the members' verdicts."),
    judges: str = typer.Option(..., "--judges", help="The members: judge names, comma-separated (two or more)."),
    rule: str = typer.Option("majority", "--rule", help="majority, mean-probs (the members' label "
                             "probabilities averaged) or dawid-skene (each member's confusion matrix "
                             "estimated without gold; needs the `correct` extra)."),
    name: str = typer.Option(..., "--name", help="The jury's judge name: verdicts/NAME/."),
):
    """A judge made of judges: one verdict per cell from the members' verdicts, written as
    ordinary verdict records of judge NAME that every stage reads like any judge's."""
    from gamut_local.stages.jury import jury_path, run_jury

    members = [j.strip() for j in judges.split(",") if j.strip()]
    s = run_jury(run_dir, members, rule, name)
    fallback = f"; {s.by_majority} by majority, no member had probabilities there" if s.by_majority else ""
    out.print(f"{run_dir / 'verdicts' / name}: {s.cells} verdicts of jury {name!r} ({rule} of "
              f"{', '.join(members)}; {s.invalid} invalid{fallback}) in {s.files} file(s); "
              f"{jury_path(run_dir, name)}")
