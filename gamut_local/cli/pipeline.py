"""The pipeline's commands: run (every stage), generate, judge, score-run, and the stages on
files of their own: score, agree, compare, report."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from gamut_local.cli.console import err, out
from gamut_local.cli.errors import reads_dataset, user_errors
from gamut_local.cli.options import (
    VERDICTS_HELP,
    AllowIncomplete,
    Answers,
    ChunkSize,
    CorrectWith,
    Limit,
    Model,
    RunConfig,
    SampleName,
    Seed,
    Shard,
    Strict,
    Verbose,
    Variant,
)
from gamut_local.reporting.console import agreement_lines, comparison_lines, echo, score_lines


def _run_config(config: Path):
    from gamut_local.config import load_run_config

    return load_run_config(config)


@user_errors
@reads_dataset
def run(config: RunConfig, chunk_size: ChunkSize = None, limit: Limit = None, strict: Strict = False,
        allow_incomplete: AllowIncomplete = False, verbose: Verbose = False):
    """All stages for one config: compile, generate, judge, score, report. Rerun to resume."""
    from gamut_local.stages.pipeline import run as run_all

    spec = _run_config(config)
    stages = run_all(spec, config, chunk_size=chunk_size, console=err, limit=limit,
                     allow_incomplete=allow_incomplete, verbose=verbose)
    for name, s in stages.items():
        out.print(f"{name:<9} {s.seconds:8.1f} s")
    out.print(f"run directory: {spec.output_dir}")
    _print_engine_logs([r for name in ("generate", "judge") if name in stages for r in stages[name].result])


def _print_engine_logs(summary) -> None:
    """Where the engines' own output went (once per file), when it left the console."""
    for log in dict.fromkeys(s.engine_log for s in summary if s.engine_log):
        out.print(f"engine log: {log}")


@user_errors
@reads_dataset
def generate(config: RunConfig, model: Model = None, variant: Variant = None, shard: Shard = None,
             chunk_size: ChunkSize = None, limit: Limit = None, strict: Strict = False, verbose: Verbose = False):
    """Generate the answers still missing from the run directory (resumes)."""
    from gamut_local.stages.generate import generate as generate_stage

    _resume_stage(generate_stage, config, shard, limit, chunk_size, verbose, model=model, variant=variant,
                  line=lambda s: f"{s.model}: {s.written} answers written, {s.already_done} already done "
                                 f"({', '.join(s.variants)})")


def _resume_stage(stage, config: Path, shard, limit, chunk_size, verbose: bool, *, line, **only) -> None:
    """`generate` or `judge` on the run config: the manifest written once inputs are checked,
    a line per model or judge, and where the engines' own output went."""
    from gamut_local.rundir.layout import parse_shard
    from gamut_local.rundir.manifest import ensure_manifest

    spec = _run_config(config)
    summary = stage(spec, shard=parse_shard(shard, limit), chunk_size=chunk_size, console=err,
                    on_ready=lambda judge_hashes=None: ensure_manifest(spec, config, judge_hashes), verbose=verbose, **only)
    for s in summary:
        out.print(line(s))
    _print_engine_logs(summary)


@user_errors
@reads_dataset
def judge(
    config: RunConfig,
    judge_name: Optional[str] = typer.Option(None, "--judge", help="Only this judge."),
    model: Model = None,
    variant: Variant = None,
    shard: Shard = None,
    chunk_size: ChunkSize = None,
    limit: Limit = None,
    strict: Strict = False,
    verbose: Verbose = False,
):
    """Grade every answer on each of its checks (resumes; one verdict per response and check)."""
    from gamut_local.stages.judge import judge as judge_stage

    _resume_stage(judge_stage, config, shard, limit, chunk_size, verbose, judge=judge_name, model=model,
                  variant=variant, line=lambda s: f"{s.judge}: {s.written} verdicts written ({s.invalid} invalid), "
                                                  f"{s.already_done} already done, {s.answers} answers")


@user_errors
def score_run(config: RunConfig, allow_incomplete: AllowIncomplete = False, correct_with: CorrectWith = None,
              sample: SampleName = None):
    """Score every verdict of the run directory (all judges, shards and extra_verdicts)."""
    from gamut_local.stages.score import score_run as score_run_stage

    scored = score_run_stage(_run_config(config), allow_incomplete=allow_incomplete, correct_with=correct_with,
                             sample=sample)
    echo(out, score_lines(scored.scores.models, ci=False))
    out.print(f"scores: {scored.path}")


@user_errors
def score(
    verdicts: List[Path] = typer.Argument(..., help=f"{VERDICTS_HELP} (judges and models may be mixed)."),
    out_path: Path = typer.Option(..., "--out", help="Where to write the scores JSON."),
    dataset: Optional[Path] = typer.Option(None, help=(
        "Dataset: for the per-domain breakdown, and to leave out verdicts on checks worded otherwise now.")),
    seed: Seed = 0,
    answers: Answers = [],
    allow_incomplete: AllowIncomplete = False,
    correct_with: CorrectWith = None,
    sample: Optional[Path] = typer.Option(None, "--sample", help="The calibration sample design the gold "
                                          "judges graded (RUN/samples/NAME.json, from `gamut-local sample`)."),
):
    """Turn verdicts into tier scores, response scores and GAMUT scores with 95% CIs."""
    from gamut_local.reporting.tables import responses_path
    from gamut_local.rundir.layout import check_seed
    from gamut_local.rundir.paths import check_outputs
    from gamut_local.stages.score import write_scores

    check_seed(seed)
    beside = responses_path(out_path) if out_path.name else None  # `--out .` is refused as a folder
    check_outputs({"--out": out_path, "--out (per-response file)": beside}, [*verdicts, dataset, *answers, sample])
    result = write_scores(out_path, verdicts, dataset, seed=seed, console=err, answers=list(answers) or None,
                          allow_incomplete=allow_incomplete, correct_with=correct_with, sample=sample)
    # Plain lines (`echo`): rich's rendering of one line per system cost 0.12 s at paper scale.
    echo(out, score_lines(result.models))
    if result.coverage_from == "verdicts":
        out.print("coverage judged without the dataset: the checks the verdicts show per question and variant")


@user_errors
def agree(
    verdicts: List[Path] = typer.Argument(..., help=f"{VERDICTS_HELP} of two or more judges (`gold` = human "
                                          "verdicts)."),
    out_path: Path = typer.Option(..., "--out", help="Where to write the agreement JSON."),
    gold: Optional[str] = typer.Option(None, "--gold", help="Also calibrate the model judges against these judges' "
                                       "verdicts (a name or pattern, e.g. 'human-*': their majority per cell); "
                                       "writes OUT.calibration.json and OUT.reliability.png."),
    dataset: Optional[Path] = typer.Option(None, help=(
        "Dataset: verdicts on checks worded otherwise now are stale and left out.")),
    answers: Answers = [],
    allow_incomplete: AllowIncomplete = False,
):
    """Compare judges on the same responses: rank agreement, kappa, Krippendorff's alpha, vs gold."""
    from gamut_local.reporting.calibration import beside
    from gamut_local.rundir.paths import check_outputs
    from gamut_local.stages.agree import write_agreement

    cal_json, cal_png = beside(out_path)
    extra = {"--gold (calibration JSON)": cal_json, "--gold (reliability PNG)": cal_png} if gold else {}
    check_outputs({"--out": out_path, **extra}, [*verdicts, dataset, *answers])
    result = write_agreement(out_path, verdicts, console=err, gold=gold, dataset=dataset,
                             answers=list(answers) or None, allow_incomplete=allow_incomplete)
    if gold is not None:
        out.print(f"{cal_json}: model judges against {gold!r} ({cal_png})")
    echo(out, agreement_lines(result, out_path))


@user_errors
def compare(
    scores_path: Path = typer.Argument(..., help="Scores JSON written by `gamut-local score`."),
    out_path: Optional[Path] = typer.Option(None, "--out", help="Also write the comparison JSON here."),
    allow_incomplete: AllowIncomplete = False,
):
    """Text-only vs multimodal per judge: gain per model, r(multimodal, gain), Kendall tau of rankings."""
    from gamut_local.rundir.paths import check_outputs
    from gamut_local.rundir.store import write_json
    from gamut_local.stages.compare import compare_scores_file

    check_outputs({"--out": out_path}, [scores_path])
    result = compare_scores_file(scores_path, allow_incomplete=allow_incomplete)
    if out_path is not None:
        write_json(out_path, result.as_json())
    echo(out, comparison_lines(result))


@user_errors
def report(
    run_dir: Path = typer.Argument(..., help="Run directory (needs verdicts in verdicts/JUDGE/)."),
    dataset: Optional[Path] = typer.Option(None, help="Dataset for per-domain scores (default: the manifest's)."),
    seed: Seed = 0,
    allow_missing: bool = typer.Option(False, "--allow-missing-verdicts", help="Report even if an extra "
                                       "verdict file manifest.json names is gone (its judge is left out; "
                                       "the report's first lines say so)."),
    allow_incomplete: AllowIncomplete = False,
    correct_with: CorrectWith = None,
    sample: SampleName = None,
):
    """Write report.md, figures/*.png and tables/ for a run directory."""
    from gamut_local.rundir.layout import check_seed
    from gamut_local.rundir.paths import check_outputs
    from gamut_local.stages.report import write_report

    check_outputs({"report.md": run_dir / "report.md", "figures": run_dir / "figures", "tables": run_dir / "tables",
                   "scores": run_dir / "scores"}, [dataset], folders=("figures", "tables", "scores"))
    check_seed(seed)

    def warn(line):
        err.print(f"warning: {line}", style="bold red")

    path = write_report(run_dir, dataset, seed=seed, allow_missing=allow_missing,
                        allow_incomplete=allow_incomplete, correct_with=correct_with, sample=sample, warn=warn)
    out.print(f"{path}")
