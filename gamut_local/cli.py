"""The `gamut-local` command line: each command is a thin call into one stage.

Heavy modules (engines, stages that load models, plotting) are imported inside the command
that needs them, so `gamut-local score` starts without torch.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from gamut_local.errors import InputError, Problem
from gamut_local.reporting.progress import plain_console
from gamut_local.vocab import SMALL_POOL_MAX

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="GAMUT factual-completeness benchmark, offline, on open models.")
err = plain_console(stderr=True, soft_wrap=True)
out = plain_console(soft_wrap=True)


_OPTIONS = {"debug": False}


@app.callback()
def _global_options(debug: bool = typer.Option(False, "--debug", help="On an internal error, print the "
                                               "full traceback (give it before the command).")):
    _OPTIONS["debug"] = debug
    import gc

    # Records are trees, not cycles: the collector's default pace (every 700 allocations)
    # rescans the ever larger heap of a big dataset, and took half the time of `validate`
    # and `lint` at 100,000 items (scripts/bench_authoring.py). Cycles are still collected.
    gc.set_threshold(100_000, 50, 1000)
    # Arrow's own allocator (mimalloc) gave memory back and faulted it in again erratically on
    # a 2-core VM: `score` at paper scale took 0.96-1.49 s with it, 0.94-1.05 s with the
    # system allocator (scripts/bench_analysis.py). Read when pyarrow is first imported, which
    # no command does before this; a pool the user chose is kept.
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    # pydantic looks for plugins in every installed package's entry points when the first
    # model is built: 16 ms of each command in an environment with vLLM, for plugins that
    # nothing here uses. A user's own setting is kept.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def _os_problem(e: OSError) -> str:
    where = e.filename or "<file system>"
    extra = f" -> {e.filename2}" if getattr(e, "filename2", None) else ""
    return f"{where}{extra}: <file>: {e.strerror or e}"


def _echo(console: Console, lines) -> None:
    """Many plain lines at once: through rich one by one, 60,000 lines of a `diff` took longer
    than the diff. Plain text needs none of its rendering (no markup, no highlighting)."""
    text = "".join(f"{line}\n" for line in lines)
    if text:
        console.file.write(text)
        console.file.flush()


def _fail(lines: list[str], footer: str, code: int):
    from gamut_local.rundir.store import JOURNAL

    from gamut_local.errors import redact

    _echo(err, [redact(line) for line in lines])  # an internal error's text may quote a URL or a key
    err.print(f"{footer}; {JOURNAL.summary()}.", style="red")
    raise typer.Exit(code)


class _Terminated(BaseException):
    """SIGTERM (the scheduler's kill, `timeout`) as an exception, so every write in flight is
    cut back or cleaned up (rundir.store) and the message says what was written."""


def _on_sigterm(signum, frame):
    raise _Terminated()


def _cli_framework_exceptions() -> tuple[type[BaseException], ...]:
    """What typer itself raises to exit, abort or report a usage error: passed through to it.
    Typer up to 0.2x re-exports click's classes; from 0.29 it vendors click and has its own, and
    click may not be installed at all."""
    names = ("Exit", "Abort", "TyperException", "BadParameter")
    found = [getattr(typer, n) for n in names if isinstance(getattr(typer, n, None), type)]
    try:
        import click
    except ImportError:
        return tuple(found)
    return (*found, click.exceptions.Exit, click.exceptions.ClickException, click.exceptions.Abort)


def user_errors(fn):
    """Every command's error handling: bad input (InputError), file-system and resource
    errors are one line per problem and exit 1; Ctrl-C exits 130, SIGTERM 143; an unexpected internal
    error is one line and exit 2 (`--debug` prints the traceback). Each failure says what
    was written before it (rundir.store.JOURNAL) and that nothing else was changed."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from gamut_local.rundir.store import JOURNAL

        JOURNAL.reset()
        import signal
        import threading

        main = threading.current_thread() is threading.main_thread()
        old = signal.signal(signal.SIGTERM, _on_sigterm) if main else None
        try:
            return fn(*args, **kwargs)
        except InputError as e:
            _fail([str(p) for p in e.problems], f"{len(e.problems)} problem(s)", 1)
        except KeyboardInterrupt:
            _fail([], "interrupted; rerun the same command to resume", 130)
        except _Terminated:
            _fail([], "terminated (SIGTERM); rerun the same command to resume", 143)
        except OSError as e:
            _fail([_os_problem(e)], "1 problem", 1)
        except RecursionError:
            _fail(["<input>: <record>: nested too deeply to read"], "1 problem", 1)
        except MemoryError:
            _fail(["<input>: <record>: out of memory reading the input"], "1 problem", 1)
        except _cli_framework_exceptions():
            raise
        except Exception as e:  # a bug, not bad input: short message, traceback on request
            if _OPTIONS["debug"]:
                import traceback

                err.print(traceback.format_exc())
            hint = "" if _OPTIONS["debug"] else " (run `gamut-local --debug ...` to print the full traceback)"
            _fail([f"internal error: {type(e).__name__}: {e}{hint}"], "this is a bug, please report it", 2)
        finally:
            if old is not None:
                signal.signal(signal.SIGTERM, old)
            for note in JOURNAL.notices:
                err.print(f"note: {note}", style="yellow")

    return wrapper


STRICT_HELP = ("Treat every warning about the dataset (the GAMUT release tolerates bad parts of rows "
               "and leaves unusable rows out) as an error.")
CORRECT_HELP = ("Also give each model judge's scores corrected by these gold judges' verdicts on a random "
                "sample (PPI++; a name or pattern, e.g. 'human-*'); needs the `correct` extra.")


LIMIT_HELP = ("Pilot: only the first N questions by sorted question_id, to try a config before the "
              "full array; a later run without it resumes from what the pilot wrote.")
ALLOW_INCOMPLETE_HELP = ("Go on when a system lacks verdicts on some expected questions or checks (a failed "
                         "shard, a judge that stopped): it is marked incomplete and systems are compared "
                         "only on the questions all of them have (see docs/outputs.md, coverage).")


def _print_warnings(warnings) -> None:
    from gamut_local.data.dataset import warning_lines

    for line in warning_lines(warnings):
        err.print(f"warning: {line}", style="yellow")
    if warnings:
        err.print(f"{len(warnings)} warning(s) about the dataset: each says what was kept or left out; "
                  "--strict makes them errors.", style="yellow")


def reads_dataset(fn):
    """For commands that read a dataset (they take `strict`): print the dataset's warnings at
    the end, each once however often it was read; with --strict every warning is an error."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from gamut_local.data.dataset import collecting_warnings

        with collecting_warnings(strict=kwargs.get("strict", False)) as warnings:
            try:
                return fn(*args, **kwargs)
            finally:
                _print_warnings(warnings)

    return wrapper


@app.command()
@user_errors
def validate(dataset: Path = typer.Argument(..., help="Question JSONL (or GAMUT parquet)."),
             strict: bool = typer.Option(False, "--strict", help=STRICT_HELP)):
    """Check every record of a dataset and what it references; one line per problem."""
    from gamut_local.data.dataset import read_dataset

    loaded = read_dataset(dataset, strict=strict)
    _print_warnings(loaded.warnings)
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


@app.command("compile")
@user_errors
@reads_dataset
def compile_cmd(
    dataset: Path = typer.Argument(..., help="Question JSONL (or GAMUT parquet)."),
    out_path: Path = typer.Option(..., "--out", help="Where to write the rubric JSONL."),
    small_pool_max: int = typer.Option(SMALL_POOL_MAX, min=0, help=(
        "Flexible lists with at most this many options get one check per option. A run compiles "
        "with its config's `compile.small_pool_max` instead.")),
    strict: bool = typer.Option(False, "--strict", help=STRICT_HELP),
):
    """Compile every question's meta-rubric into checks (deterministic, no model)."""
    from gamut_local.rundir.paths import check_outputs
    from gamut_local.stages.compile import compile_file

    check_outputs({"--out": out_path}, [dataset])
    n_questions, n_checks = compile_file(dataset, out_path, small_pool_max)
    out.print(f"{out_path}: {n_checks} checks for {n_questions} questions.")


@app.command()
@user_errors
def score(
    verdicts: List[Path] = typer.Argument(..., help="Verdict JSONL files (judges and models may be mixed)."),
    out_path: Path = typer.Option(..., "--out", help="Where to write the scores JSON."),
    dataset: Optional[Path] = typer.Option(None, help=(
        "Dataset: for the per-domain breakdown, and to leave out verdicts on checks worded otherwise now.")),
    seed: int = typer.Option(0, help="Bootstrap seed."),
    answers: List[Path] = typer.Option([], "--answers", help=(
        "Answer files the verdicts graded (repeatable): a verdict whose answer_hash differs from "
        "its answer's is stale and left out.")),
    allow_incomplete: bool = typer.Option(False, "--allow-incomplete", help=ALLOW_INCOMPLETE_HELP),
    correct_with: Optional[str] = typer.Option(None, "--correct-with", help=CORRECT_HELP),
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
                          allow_incomplete=allow_incomplete, correct_with=correct_with, sample=sample).model_dump()
    # Plain lines (`_echo`): rich's rendering of one line per system cost 0.12 s at paper scale.
    _echo(out, [f"{m['judge']:>20}  {m['model']:<28} {m['variant']:<10} "
                f"GAMUT {m['gamut_score']:6.1f}  [{m['ci95'][0]:.1f}, {m['ci95'][1]:.1f}]{_coverage_mark(m)}"
                f"{_corrected(m)}" for m in result["models"]])
    if result["coverage_from"] == "verdicts":
        out.print("coverage judged without the dataset: the checks the verdicts show per question and variant")


def _coverage_mark(m: dict) -> str:
    return "" if m["complete"] else (f"  INCOMPLETE: {m['n_complete_responses']}/{m['n_questions']} questions, "
                                     f"{m['n_missing_verdicts']} verdicts missing")


def _corrected(row: dict) -> str:
    c = row.get("corrected")
    if c is None:
        return ""
    if c["score"] is None:
        return f"  corrected: none ({c['reason']})"
    return (f"  corrected {c['score']:6.1f} [{c['ci_low']:.1f}, {c['ci_high']:.1f}]  human-only "
            f"{c['human_only']:.1f} [{c['human_only_ci_low']:.1f}, {c['human_only_ci_high']:.1f}]  "
            f"n {c['n_labeled']}/{c['n_total']}  bias {c['bias']:+.1f}")


@app.command()
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
    path, design, written = draw_sample(run_dir, responses, per="shared" if shared else "model", seed=seed,
                                        name=name, console=err)
    state = "drawn" if written else "already drawn, unchanged"
    out.print(f"{path}: sample {design.sample_id} {state}: {len(design.responses)} responses "
              f"({'shared questions' if shared else 'per system'}, seed {seed})")
    for st in design.strata:
        out.print(f"  {st.model:<28} {st.variant:<10} {st.sampled} of {st.population} "
                  f"(inclusion probability {st.inclusion_probability:.4g})")
    out.print(f"Grade it in full: gamut-local view {run_dir} --annotator NAME, then \"Calibration sample\".")


def _run_config(config: Path):
    from gamut_local.config import load_run_config

    return load_run_config(config)


@app.command()
@user_errors
@reads_dataset
def run(
    config: Path = typer.Option(..., "--config", help="Run YAML (e.g. configs/runs/sample.yaml)."),
    chunk_size: Optional[int] = typer.Option(None, help="Requests per engine call and atomic append (default: the config's chunk_size)."),
    limit: Optional[int] = typer.Option(None, help=LIMIT_HELP),
    strict: bool = typer.Option(False, "--strict", help=STRICT_HELP),
    allow_incomplete: bool = typer.Option(False, "--allow-incomplete", help=ALLOW_INCOMPLETE_HELP),
):
    """All stages for one config: compile, generate, judge, score, report. Rerun to resume."""
    from gamut_local.stages.pipeline import run as run_all

    stages = run_all(config, chunk_size=chunk_size, console=err, limit=limit, allow_incomplete=allow_incomplete)
    for name, s in stages.items():
        out.print(f"{name:<9} {s['seconds']:8.1f} s")
    spec = _run_config(config)
    out.print(f"run directory: {spec.output_dir}")


@app.command()
@user_errors
@reads_dataset
def generate(
    config: Path = typer.Option(..., "--config", help="Run YAML."),
    model: Optional[str] = typer.Option(None, help="Only this model (its name in the config)."),
    variant: Optional[str] = typer.Option(None, help="Only this variant: multimodal or text_only."),
    shard: Optional[str] = typer.Option(None, help="i/n: only questions whose index in sorted(question_id) % n == i."),
    chunk_size: Optional[int] = typer.Option(None, help="Requests per engine call and atomic append."),
    limit: Optional[int] = typer.Option(None, help=LIMIT_HELP),
    strict: bool = typer.Option(False, "--strict", help=STRICT_HELP),
):
    """Generate the answers still missing from the run directory (resumes)."""
    from gamut_local.rundir.layout import parse_shard
    from gamut_local.rundir.manifest import ensure_manifest
    from gamut_local.stages.generate import generate as generate_stage

    spec = _run_config(config)
    for s in generate_stage(spec, model=model, variant=variant, shard=parse_shard(shard, limit),
                            chunk_size=chunk_size, console=err, on_ready=lambda: ensure_manifest(spec, config)):
        out.print(f"{s['model']}: {s['written']} answers written, {s['already_done']} already done "
                  f"({', '.join(s['variants'])})")


@app.command()
@user_errors
@reads_dataset
def judge(
    config: Path = typer.Option(..., "--config", help="Run YAML."),
    judge_name: Optional[str] = typer.Option(None, "--judge", help="Only this judge."),
    model: Optional[str] = typer.Option(None, help="Only answers of this model."),
    variant: Optional[str] = typer.Option(None, help="Only this variant: multimodal or text_only."),
    shard: Optional[str] = typer.Option(None, help="i/n: only questions whose index in sorted(question_id) % n == i."),
    chunk_size: Optional[int] = typer.Option(None, help="Requests per engine call and atomic append."),
    limit: Optional[int] = typer.Option(None, help=LIMIT_HELP),
    strict: bool = typer.Option(False, "--strict", help=STRICT_HELP),
):
    """Grade every answer on each of its checks (resumes; one verdict per response and check)."""
    from gamut_local.rundir.layout import parse_shard
    from gamut_local.rundir.manifest import ensure_manifest
    from gamut_local.stages.judge import judge as judge_stage

    spec = _run_config(config)
    for s in judge_stage(spec, judge=judge_name, model=model, variant=variant, shard=parse_shard(shard, limit),
                         chunk_size=chunk_size, console=err, on_ready=lambda: ensure_manifest(spec, config)):
        out.print(f"{s['judge']}: {s['written']} verdicts written ({s['invalid']} invalid), "
                  f"{s['already_done']} already done, {s['answers']} answers")


@app.command()
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
    fallback = f"; {s['by_majority']} by majority, no member had probabilities there" if s["by_majority"] else ""
    out.print(f"{run_dir / 'verdicts' / name}: {s['cells']} verdicts of jury {name!r} ({rule} of "
              f"{', '.join(members)}; {s['invalid']} invalid{fallback}) in {s['files']} file(s); "
              f"{jury_path(run_dir, name)}")


@app.command("plan-sample")
@user_errors
def plan_sample(
    run_dir: Path = typer.Argument(..., help="Run directory with a calibration sample partly graded (the pilot)."),
    half_width: float = typer.Option(..., "--half-width", help="Wanted 95% CI half-width, in GAMUT points."),
    correct_with: str = typer.Option("human-*", "--correct-with", help="The gold judges (a name or pattern)."),
    sample: Optional[str] = typer.Option(None, "--sample", help="Name of the run's calibration sample "
                                         "(default: the only one in RUN/samples/)."),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
):
    """How many responses people must grade in full for a CI half-width, corrected and human-only
    side by side, and how many keypresses that is (one a check); needs the `correct` extra."""
    import json

    from gamut_local.stages.sample import plan_sample as plan_stage

    rows = plan_stage(run_dir, half_width, correct_with, sample, console=err)
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    for r in rows:
        head = f"{r['judge']:>20}  {r['model']:<28} {r['variant']:<10} pilot {r['pilot_n']:>4} of {r['n_total']}"
        if r["reason"]:
            out.print(f"{head}  {r['reason']}")
            continue
        short = "" if r["reachable"] else " (not reachable: fewer responses than that)"
        out.print(f"{head}  corrected {r['corrected_n']} ({r['corrected_keypresses']} keypresses){short}  "
                  f"human-only {r['human_only_n']} ({r['human_only_keypresses']} keypresses)")


@app.command("score-run")
@user_errors
def score_run(config: Path = typer.Option(..., "--config", help="Run YAML."),
              allow_incomplete: bool = typer.Option(False, "--allow-incomplete", help=ALLOW_INCOMPLETE_HELP),
              correct_with: Optional[str] = typer.Option(None, "--correct-with", help=CORRECT_HELP),
              sample: Optional[str] = typer.Option(None, "--sample", help="Name of the run's calibration "
                                                   "sample (default: the only one in RUN/samples/).")):
    """Score every verdict file in the run directory (all judges, shards and extra_verdicts)."""
    from gamut_local.stages.score import score_run as score_run_stage

    scored = score_run_stage(_run_config(config), allow_incomplete=allow_incomplete, correct_with=correct_with,
                             sample=sample)
    for m in scored.scores.model_dump()["models"]:
        out.print(f"{m['judge']:>20}  {m['model']:<28} {m['variant']:<10} GAMUT {m['gamut_score']:6.1f}"
                  f"{_coverage_mark(m)}{_corrected(m)}")
    out.print(f"scores: {scored.path}")


@app.command()
@user_errors
def agree(
    verdicts: List[Path] = typer.Argument(..., help="Verdict JSONL files of two or more judges (`gold` = human verdicts)."),
    out_path: Path = typer.Option(..., "--out", help="Where to write the agreement JSON."),
    gold: Optional[str] = typer.Option(None, "--gold", help="Also calibrate the model judges against these judges' "
                                       "verdicts (a name or pattern, e.g. 'human-*': their majority per cell); "
                                       "writes OUT.calibration.json and OUT.reliability.png."),
    dataset: Optional[Path] = typer.Option(None, help=(
        "Dataset: verdicts on checks worded otherwise now are stale and left out.")),
    answers: List[Path] = typer.Option([], "--answers", help=(
        "Answer files the verdicts graded (repeatable): a verdict whose answer_hash differs from "
        "its answer's is stale and left out.")),
    allow_incomplete: bool = typer.Option(False, "--allow-incomplete", help=ALLOW_INCOMPLETE_HELP),
):
    """Compare judges on the same responses: rank agreement, kappa, Krippendorff's alpha, vs gold."""
    from gamut_local.reporting.calibration import beside
    from gamut_local.rundir.paths import check_outputs
    from gamut_local.stages.agree import write_agreement

    cal_json, cal_png = beside(out_path)
    extra = {"--gold (calibration JSON)": cal_json, "--gold (reliability PNG)": cal_png} if gold else {}
    check_outputs({"--out": out_path, **extra}, [*verdicts, dataset, *answers])
    result = write_agreement(out_path, verdicts, console=err, gold=gold, dataset=dataset,
                             answers=list(answers) or None, allow_incomplete=allow_incomplete).model_dump()
    if gold is not None:
        out.print(f"{cal_json}: model judges against {gold!r} ({cal_png})")
    missing = ", ".join(f"{j} {n}" for j, n in result["keys"]["missing"].items())
    out.print(f"{out_path}: {len(result['judges'])} judges on {result['keys']['total']} keys "
              f"(keys each judge lacks: {missing})")
    for p in result["pairs"]:
        tau = "—" if p["kendall_tau_b"] is None else f"{p['kendall_tau_b']:.3f}"
        kappa = "—" if p["cohen_kappa"] is None else f"{p['cohen_kappa']:.3f}"
        out.print(f"  {p['judge_a']} vs {p['judge_b']}: Kendall tau-b {tau} (on {p['n_questions']} questions), "
                  f"Cohen kappa {kappa}")
    for where, why in result["notes"].items():
        out.print(f"  null {where}: {why}")


@app.command()
@user_errors
def report(
    run_dir: Path = typer.Argument(..., help="Run directory (needs verdicts/<judge>/*.jsonl)."),
    dataset: Optional[Path] = typer.Option(None, help="Dataset for per-domain scores (default: the manifest's)."),
    seed: int = typer.Option(0, help="Bootstrap seed."),
    allow_missing: bool = typer.Option(False, "--allow-missing-verdicts", help="Report even if an extra "
                                       "verdict file manifest.json names is gone (its judge is left out; "
                                       "the report's first lines say so)."),
    allow_incomplete: bool = typer.Option(False, "--allow-incomplete", help=ALLOW_INCOMPLETE_HELP),
    correct_with: Optional[str] = typer.Option(None, "--correct-with", help=CORRECT_HELP),
    sample: Optional[str] = typer.Option(None, "--sample", help="Name of the run's calibration sample "
                                         "(default: the only one in RUN/samples/)."),
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


@app.command()
@user_errors
def view(
    run_dir: Path = typer.Argument(..., help="Run directory to look inside."),
    port: int = typer.Option(8765, help="Port on 127.0.0.1 (the app never listens on other addresses)."),
    annotator: Optional[str] = typer.Option(None, help="Adjudicate as judge human-NAME (lower-case letters, digits, _ -)."),
    read_only: bool = typer.Option(False, "--read-only", help="Write nothing, even with --annotator."),
    dataset: Optional[Path] = typer.Option(None, help="Dataset (default: the one manifest.json names)."),
):
    """Local web app over a run: leaderboard, questions, rubric trees, responses, verdicts, and an
    adjudication queue that writes human verdicts to verdicts/human-NAME/ (needs the `view` extra)."""
    try:
        from gamut_local.viewer.app import serve
    except ImportError as e:
        raise InputError([Problem("gamut-local view", None, "", f"needs the `view` extra ({e.name} is "
                                  "missing): pip install -e '.[view]'")])
    serve(run_dir, port=port, annotator=annotator, read_only=read_only, dataset=dataset,
          echo=lambda line: out.print(line), debug=_OPTIONS["debug"])


@app.command()
@user_errors
def compare(
    scores_path: Path = typer.Argument(..., help="Scores JSON written by `gamut-local score`."),
    out_path: Optional[Path] = typer.Option(None, "--out", help="Also write the comparison JSON here."),
    allow_incomplete: bool = typer.Option(False, "--allow-incomplete", help=ALLOW_INCOMPLETE_HELP),
):
    """Text-only vs multimodal per judge: gain per model, r(multimodal, gain), Kendall tau of rankings."""
    from gamut_local.rundir.paths import check_outputs
    from gamut_local.rundir.store import write_json
    from gamut_local.stages.compare import compare_scores_file

    check_outputs({"--out": out_path}, [scores_path])
    result = compare_scores_file(scores_path, allow_incomplete=allow_incomplete)
    if out_path is not None:
        write_json(out_path, result)
    for judge, c in result.items():
        if not c["n_models"]:
            out.print(f"{judge}: {c['notes']['models']}")
            continue
        r = c["pearson_r_multimodal_gain"]
        tau = c["kendall_tau_b_rankings"]
        out.print(f"{judge}: {c['n_models']} models, mean gain {c['mean_gain']:+.2f}, "
                  f"r(multimodal, gain) {'—' if r is None else f'{r:.3f}'}, "
                  f"Kendall tau-b {'—' if tau is None else f'{tau:.3f}'}")
        for m in c["models"]:
            out.print(f"  {m['model']:<28} multimodal {m['multimodal']:6.1f}  text_only {m['text_only']:6.1f}  "
                      f"gain {m['gain']:+6.1f}")


@app.command("slurm")
@user_errors
@reads_dataset
def slurm_cmd(
    config: Path = typer.Argument(..., help="Run YAML."),
    submit_: bool = typer.Option(False, "--submit", help="Submit the jobs; without it nothing is submitted."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print every job script and sbatch command and "
                                 "submit nothing (the default; kept for scripts that say so)."),
    force: bool = typer.Option(False, "--force", help="Submit even if jobs of an earlier submission are still queued."),
    strict: bool = typer.Option(False, "--strict", help=STRICT_HELP),
):
    """Print the run's SLURM job graph (generate -> judge -> score -> report); --submit submits
    it, and rerunning with --submit resubmits only what is not done. Both check the dataset, its
    images and every model folder first."""
    from gamut_local.cluster.slurm import dry_run_text, prepare, submit
    from gamut_local.errors import Problem

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


@app.command("status")
@user_errors
def status_cmd(
    run: Path = typer.Argument(..., help="Run YAML, or the run directory of a submitted run."),
    as_json: bool = typer.Option(False, "--json", help="Print the status as JSON."),
):
    """Per stage, model, variant and judge: how much is done (from the files), which SLURM tasks
    are queued, running or ended without finishing (with their logs), and what to do next."""
    import json

    from gamut_local.cluster.status import render, run_status

    result = run_status(run)
    if as_json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        render(result, out)


@app.command("plan")
@user_errors
@reads_dataset
def plan_cmd(
    config: Path = typer.Argument(..., help="Run YAML."),
    as_json: bool = typer.Option(False, "--json", help="Print the estimate as JSON instead of a table."),
    strict: bool = typer.Option(False, "--strict", help=STRICT_HELP),
):
    """Requests, prompt tokens (with and without prefix sharing) and GPU-hours per stage."""
    import json

    from gamut_local.cluster.plan import plan_run, render_table

    result = plan_run(config)
    if as_json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        render_table(result, out)


# -- authoring rubrics: draft -> audit -> lint -> export / import / diff -----------------------


@app.command()
@user_errors
def draft(
    questions: Path = typer.Argument(..., help="Question JSONL (rubrics, if any, are redrafted)."),
    evidence: Path = typer.Option(..., "--evidence", help="Snippet JSONL, or a folder with one subfolder of .txt/.md files per question id."),
    config: Path = typer.Option(..., "--config", help="DRAFT.yaml (model, retries, size bounds)."),
    out_path: Path = typer.Option(..., "--out", help="Where to write the drafted question JSONL."),
    chunk_size: Optional[int] = typer.Option(None, help="Questions per engine call and atomic append."),
):
    """Draft a meta-rubric per question from its evidence with an open model (resumes)."""
    from gamut_local.rundir.layout import check_chunk_size
    from gamut_local.rundir.paths import check_outputs
    from gamut_local.stages.draft import draft as draft_stage, drafts_log_path

    check_chunk_size(chunk_size)
    check_outputs({"--out": out_path, "--out (its drafts log)": drafts_log_path(out_path)},
                  [questions, evidence, config])
    s = draft_stage(questions, evidence, config, out_path, chunk_size=chunk_size, console=err)
    out.print(f"{s['out']}: {s['valid']} of {s['questions']} questions drafted and valid "
              f"({s['drafted']} drafted now, {s['already_done']} already done); every draft in {s['log']}")
    if s["failed"]:
        out.print(f"{len(s['failed'])} failed validation, kept with their errors in the log: "
                  f"{', '.join(s['failed'][:10])}")


@app.command()
@user_errors
def audit(
    dataset: Path = typer.Argument(..., help="Drafted question JSONL."),
    config: Path = typer.Option(..., "--config", help="AUDIT.yaml (model, ungrounded: keep|demote|drop)."),
    out_path: Path = typer.Option(..., "--out", help="Where to write the audited question JSONL."),
):
    """Check every item against each snippet it cites; act on ungrounded items; write a report."""
    from gamut_local.rundir.paths import check_outputs
    from gamut_local.stages.audit import audit as audit_stage, side_path

    check_outputs({"--out": out_path, "--out (its grounding log)": side_path(out_path, "grounding"),
                   "--out (its report)": side_path(out_path, "report", ".md")}, [dataset, config])
    s = audit_stage(dataset, config, out_path, console=err)
    out.print(f"{s['out']}: {s['questions']} questions, {s['requests']} (item, snippet) pairs graded "
              f"({s['already_done']} already done), {s['ungrounded']} ungrounded items, "
              f"{len(s['poorly_covered'])} poorly covered questions; report {s['report']}")


@app.command()
@user_errors
def lint(
    dataset: Path = typer.Argument(..., help="Question JSONL or GAMUT parquet."),
    strict: bool = typer.Option(False, "--strict", help="Warnings count as errors too."),
):
    """Deterministic rubric checks before any judge runs; exit 1 on errors."""
    from gamut_local.stages.lint import count_errors, lint_file

    findings = lint_file(dataset)
    _echo(out, map(str, findings))
    errors = count_errors(findings)
    warnings = len(findings) - errors
    out.print(f"{dataset}: {errors} error(s), {warnings} warning(s)")
    if errors or (strict and warnings):
        raise SystemExit(1)  # findings printed above are the message; not an internal error


@app.command("export")
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


@app.command("import")
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
    out.print(f"{s['out']}: {s['questions']} questions, {len(s['revised'])} revised")


@app.command()
@user_errors
def diff(
    a: Path = typer.Argument(..., help="The earlier dataset."),
    b: Path = typer.Argument(..., help="The later dataset."),
):
    """Per question: items and checks added, removed, re-tiered and reworded from A to B."""
    from gamut_local.stages.revise import diff_files

    changes, lines = diff_files(a, b)
    _echo(out, lines)
    out.print(f"{len(changes)} question(s) differ")


verdicts_app = typer.Typer(no_args_is_help=True, help="The verdict store's edges: JSON Lines (or Parquet) "
                           "out for people and other tools, JSON Lines in from elsewhere.")
app.add_typer(verdicts_app, name="verdicts")


@verdicts_app.command("export")
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


@verdicts_app.command("import")
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


def main():
    """The `gamut-local` executable (and `python -m gamut_local.cli`). (Tests call `app`.)"""
    app()


if __name__ == "__main__":
    sys.exit(main())
