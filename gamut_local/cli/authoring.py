"""Authoring rubrics and checking datasets: validate, compile, draft -> audit -> lint, and
export -> (edit) -> import, diff."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from gamut_local.cli.console import err, out
from gamut_local.cli.errors import print_warnings, reads_dataset, user_errors
from gamut_local.cli.options import Strict, Verbose
from gamut_local.reporting.console import echo
from gamut_local.vocab import SMALL_POOL_MAX


@user_errors
def validate(dataset: Path = typer.Argument(..., help="Question JSONL (or GAMUT parquet)."),
             strict: Strict = False):
    """Check every record of a dataset and what it references; one line per problem."""
    from gamut_local.data.dataset import read_dataset

    loaded = read_dataset(dataset, strict=strict)
    print_warnings(loaded.warnings)
    qs = loaded.questions
    state = f"{len(loaded.warnings)} warning(s)" if loaded.warnings else "all valid"
    out.print(f"{dataset}: {len(qs)} questions, {state}.")
    with_text = [q for q in qs if q.question_text_only]
    if with_text:  # the text-only variant asks the others their generic question
        lacking = [q.question_id for q in qs if not q.question_text_only]
        own = sum(1 for q in qs if q.checks_text_only)
        out.print(f"text-only form: {len(with_text)} questions ({own} with their own checks); "
                  f"none for {len(lacking)}{': ' + ', '.join(lacking[:10]) if lacking else ''}"
                  f"{' ...' if len(lacking) > 10 else ''}")


@user_errors
@reads_dataset
def compile_cmd(
    dataset: Path = typer.Argument(..., help="Question JSONL (or GAMUT parquet)."),
    out_path: Path = typer.Option(..., "--out", help="Where to write the rubric JSONL."),
    small_pool_max: int = typer.Option(SMALL_POOL_MAX, min=0, help=(
        "Flexible lists with at most this many options get one check per option. A run compiles "
        "with its config's `compile.small_pool_max` instead.")),
    strict: Strict = False,
):
    """Compile every question's meta-rubric into checks (deterministic, no model)."""
    from gamut_local.rundir.paths import check_outputs
    from gamut_local.stages.compile import compile_file

    check_outputs({"--out": out_path}, [dataset])
    compiled = compile_file(dataset, out_path, small_pool_max)
    out.print(f"{out_path}: {compiled.checks} checks for {compiled.questions} questions.")


@user_errors
def draft(
    questions: Path = typer.Argument(..., help="Question JSONL (rubrics, if any, are redrafted)."),
    evidence: Path = typer.Option(..., "--evidence", help="Snippet JSONL, or a folder with one subfolder of .txt/.md files per question id."),
    config: Path = typer.Option(..., "--config", help="DRAFT.yaml (model, retries, size bounds)."),
    out_path: Path = typer.Option(..., "--out", help="Where to write the drafted question JSONL."),
    chunk_size: Optional[int] = typer.Option(None, help="Questions per engine call and atomic append."),
    verbose: Verbose = False,
):
    """Draft a meta-rubric per question from its evidence with an open model (resumes)."""
    from gamut_local.rundir.layout import check_chunk_size
    from gamut_local.rundir.paths import check_outputs
    from gamut_local.stages.draft import draft as draft_stage, drafts_log_path

    check_chunk_size(chunk_size)
    check_outputs({"--out": out_path, "--out (its drafts log)": drafts_log_path(out_path)},
                  [questions, evidence, config])
    s = draft_stage(questions, evidence, config, out_path, chunk_size=chunk_size, console=err, verbose=verbose)
    out.print(f"{s.out}: {s.valid} of {s.questions} questions drafted and valid "
              f"({s.drafted} drafted now, {s.already_done} already done); every draft in {s.log}")
    if s.failed:
        out.print(f"{len(s.failed)} failed validation, kept with their errors in the log: "
                  f"{', '.join(s.failed[:10])}")
    if s.engine_log:
        out.print(f"engine log: {s.engine_log}")


@user_errors
def audit(
    dataset: Path = typer.Argument(..., help="Drafted question JSONL."),
    config: Path = typer.Option(..., "--config", help="AUDIT.yaml (model, ungrounded: keep|demote|drop)."),
    out_path: Path = typer.Option(..., "--out", help="Where to write the audited question JSONL."),
    verbose: Verbose = False,
):
    """Check every item against each snippet it cites; act on ungrounded items; write a report."""
    from gamut_local.rundir.paths import check_outputs
    from gamut_local.stages.audit import audit as audit_stage, side_path

    check_outputs({"--out": out_path, "--out (its grounding log)": side_path(out_path, "grounding"),
                   "--out (its report)": side_path(out_path, "report", ".md")}, [dataset, config])
    s = audit_stage(dataset, config, out_path, console=err, verbose=verbose)
    out.print(f"{s.out}: {s.questions} questions, {s.requests} (item, snippet) pairs graded "
              f"({s.already_done} already done), {s.ungrounded} ungrounded items, "
              f"{len(s.poorly_covered)} poorly covered questions; report {s.report}")
    if s.engine_log:
        out.print(f"engine log: {s.engine_log}")


@user_errors
def lint(
    dataset: Path = typer.Argument(..., help="Question JSONL or GAMUT parquet."),
    strict: bool = typer.Option(False, "--strict", help="Warnings count as errors too."),
):
    """Deterministic rubric checks before any judge runs; exit 1 on errors."""
    from gamut_local.stages.lint import count_errors, lint_file

    findings = lint_file(dataset)
    echo(out, map(str, findings))
    errors = count_errors(findings)
    warnings = len(findings) - errors
    out.print(f"{dataset}: {errors} error(s), {warnings} warning(s)")
    if errors or (strict and warnings):
        raise SystemExit(1)  # findings printed above are the message; not an internal error


@user_errors
def export_cmd(
    dataset: Path = typer.Argument(..., help="Question JSONL or GAMUT parquet."),
    out_dir: Path = typer.Option(..., "--out", help="A new folder for one YAML per question."),
):
    """Write one editable, commented YAML per question (meta-rubric and the checks it compiles to)."""
    from gamut_local.rundir.paths import check_outputs
    from gamut_local.stages.revise import export_dataset

    check_outputs({"--out": out_dir}, [dataset], folders=("--out",))
    paths = export_dataset(dataset, out_dir)
    out.print(f"{out_dir}: {len(paths)} question files")


@user_errors
def import_cmd(
    folder: Path = typer.Argument(..., help="A folder written by `export` (and edited)."),
    out_path: Path = typer.Option(..., "--out", help="Where to write the revised question JSONL."),
    by: Optional[str] = typer.Option(None, "--by", help="Who revised them (provenance.revised_by)."),
):
    """Validate the YAML files and read them back; edited records get provenance.revised_on."""
    from gamut_local.rundir.paths import check_outputs
    from gamut_local.stages.revise import import_dir

    check_outputs({"--out": out_path}, [folder])
    s = import_dir(folder, out_path, revised_by=by)
    out.print(f"{s.out}: {s.questions} questions, {len(s.revised)} revised")


@user_errors
def diff(
    a: Path = typer.Argument(..., help="The earlier dataset."),
    b: Path = typer.Argument(..., help="The later dataset."),
):
    """Per question: items and checks added, removed, re-tiered and reworded from A to B."""
    from gamut_local.stages.revise import diff_files

    changes, lines = diff_files(a, b)
    echo(out, lines)
    out.print(f"{len(changes)} question(s) differ")
