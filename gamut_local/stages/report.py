"""`gamut-local report RUN_DIR`: report.md, figures/*.png and tables/*.csv|json for a run.

Needs only the verdicts (the store, `verdicts/<judge>/*.parquet`, and any JSONL: human
verdicts, an old run's); answers are not read. This stage
only reads inputs, calls the analysis and the reporting, and writes files:

1. the run's verdict files (plus the manifest's `extra_verdicts`) and dataset;
2. `scores/scores.json` + its per-response file, as `score-run` wrote them where they are
   current (`reporting.current`: the one rule), else computed and written as `score-run`
   writes them;
3. `scores/agreement.json` likewise (two or more judges), from the same read of the verdicts;
4. the report's tables (`analysis.summary`), written by `reporting.tables`, the figures
   (`reporting.figures`) and report.md (`reporting.markdown`).

Everything is written into a staging folder inside the run directory and moved in once
whole: a report that stops half-way changes nothing there.

Every section that cannot be computed from what is there (one judge only, no model in both
variants, no dataset for domains) is listed in the report with the reason.

Coverage: an incomplete system (`analysis.scoring.require_complete`) stops the report unless
`allow_incomplete`; then every comparison is made on the questions all compared systems have,
and the report says so first and marks the systems. A `--limit` pilot (`pilot`, or the
`limit` the manifest records) is incomplete by design: its report says it is a pilot.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console

from gamut_local.analysis.outputs import ReportTablesFile, ScoresFile
from gamut_local.analysis.scoring import N_BOOT, Scores, require_complete, score_table
from gamut_local.analysis.summary import report_tables
from gamut_local.errors import InputError, Problem
from gamut_local.analysis.design import read_sample
from gamut_local.reporting.correction import section as correction_section
from gamut_local.reporting.current import agreement_document, current_agreement, current_scores
from gamut_local.reporting.jury import section as jury_section
from gamut_local.reporting.drawing import draw_all, drawing_pool
from gamut_local.reporting.markdown import render
from gamut_local.data.reading import expected_checks, read_verdicts_and_dataset
from gamut_local.reporting.tables import (
    Correction,
    with_correction,
    write_model,
    write_report_tables,
    write_scores_files,
)
from gamut_local.data.consistency import describe_stale
from gamut_local.rundir.layout import all_answer_files, find_sample, scores_path, verdict_files
from gamut_local.rundir.manifest_schema import Manifest, read_manifest
from gamut_local.rundir.store import JOURNAL, fsync_path, write_text_atomic

STAGING_PREFIX = ".report-staging-"  # where `report` writes its outputs before moving them in

# ---------------------------------------------------------------- reading the run directory

def _locate(ref: str, run_dir: Path) -> Path | None:
    # Run configs resolve paths to absolute ones; relative ones are tried from the run
    # directory, then from where the command runs.
    for cand in (Path(ref), run_dir / ref, Path.cwd() / ref):
        if cand.is_file():
            return cand
    return None


def _dataset_for(run_dir: Path, dataset: Path | None, manifest: Manifest | None) -> tuple[Path | None, str | None]:
    """The dataset to take domains from, or None and the reason there is none."""
    if dataset is not None:
        return Path(dataset), None
    if manifest is None:
        return None, "no dataset was given and the run directory has no manifest.json naming one"
    ref = manifest.config.dataset
    if ref is None:
        return None, "no dataset was given and manifest.json names none"
    path = _locate(ref, run_dir)
    if path is None:
        return None, f"manifest.json names dataset {ref}, which is not readable from here"
    return path, None


def run_answers(run_dir: Path) -> tuple[list[Path], int]:
    """The run's answer files (generated, and the extra ones manifest.json names that are
    readable from here) and the compile setting its checks are judged with: what decides
    which verdicts are stale."""
    config = (read_manifest(run_dir) or Manifest()).config
    located = [_locate(ref, run_dir) for ref in config.extra_answers]
    return all_answer_files(run_dir) + [p for p in located if p is not None], config.compile.small_pool_max


def run_name(run_dir: Path) -> str:
    """The report's title: the run config's `name` as manifest.json records it, else the
    folder's name (a run directory made by hand has no manifest)."""
    manifest = read_manifest(run_dir)
    return (manifest.config.name if manifest else None) or run_dir.name


def agreement_path(run_dir: Path) -> Path:
    return Path(run_dir) / "scores" / "agreement.json"


MISSING_VERDICTS = "Verdicts: manifest.json lists extra verdict file"


def run_inputs(run_dir: Path, dataset: Path | None = None, *,
               allow_missing: bool = False) -> tuple[list[Path], Path | None, list[str]]:
    """The run's verdict files, its dataset (or None) and notes on what is absent.

    Verdicts are the run's (`layout.verdict_files`: store units and JSONL, shards included)
    plus the run's `extra_verdicts` that manifest.json records (e.g. the sample's gold
    verdicts). One of those that is gone is an error: the report would leave its judge out.
    `allow_missing` makes it a note (which the report puts first, and the command prints).
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise InputError([Problem(str(run_dir), None, "", "run directory not found")])
    notes = []
    manifest = read_manifest(run_dir)
    files = verdict_files(run_dir)
    gone = []
    for i, ref in enumerate(manifest.config.extra_verdicts if manifest else []):
        path = _locate(ref, run_dir)
        if path is None and not allow_missing:
            gone.append(Problem(str(run_dir / "manifest.json"), None, f"config.extra_verdicts.{i}",
                                f"{ref} is not readable from here, so its judge would be left out of the "
                                "report; restore it, or give --allow-missing-verdicts to report without it"))
        elif path is None:
            notes.append(f"{MISSING_VERDICTS} {ref}, which is not "
                         "readable from here; its judge's verdicts are not in this report.")
        elif path.resolve() not in {f.resolve() for f in files}:
            files.append(path)
    if gone:
        raise InputError(gone)
    if not files:
        raise InputError([Problem(str(run_dir / "verdicts"), None, "",
                                  "no verdict files: expected verdicts/<judge>/<model>.<variant>.parquet "
                                  "(run judge first)")])
    path, why = _dataset_for(run_dir, dataset, manifest)
    if path is None:
        notes.append(f"Per-domain table: {why}.")
    return files, path, notes


def current_or_computed(run_dir: Path, files: list[Path], dataset: Path | None, *, seed: int,
                        console: Console | None = None, computing=lambda: None,
                        allow_incomplete: bool = False, out: Path | None = None) -> tuple[ScoresFile, Scores, dict | None]:
    """The run's scores and agreement: read where current (`reporting.current`), else computed
    as `score-run` and `agree` compute them, from one read of the verdicts, and written under
    `out` (default: the run directory; `write_report` gives its staging folder) as the run
    directory lays them out (`computing()` is called once the verdicts are read: the figures
    will be drawn). Stale verdicts are left out; an incomplete system stops it, before
    anything is written, unless `allow_incomplete`."""
    out = run_dir if out is None else out
    table = None
    answers, small_pool_max = run_answers(run_dir)

    def read():
        got = read_verdicts_and_dataset(files, dataset, console, answers=answers, small_pool_max=small_pool_max)
        # After the read: it forks processes for the dataset and the answers where no other
        # thread runs yet (`rubric.workers.beside`); the drawing workers bring a thread.
        computing()
        return got

    found = current_scores(scores_path(run_dir), files, dataset, seed=seed, n_boot=N_BOOT, answers=answers,
                           small_pool_max=small_pool_max)
    if found is None:
        table, (_, domains, dataset_input, checks) = read()
        scores = score_table(table, domains, expected=expected_checks(checks), seed=seed)
        require_complete(scores, str(run_dir), allow_incomplete)
        doc = write_scores_files(scores_path(out), table, scores, dataset_input)
    else:
        doc, scores = found
        require_complete(scores, str(run_dir), allow_incomplete)
    if len(scores.judges) < 2:
        return doc, scores, None
    agreement = current_agreement(agreement_path(run_dir), files)
    if agreement is None:
        table = read()[0] if table is None else table
        # The panel's full-coverage scores are the very response scores above.
        agreement = agreement_document(table, scores)
        write_model(agreement_path(out), agreement)
    return doc, scores, agreement.model_dump(mode="json", exclude={"schema_version", "kind", "inputs"})


def pilot_limit(run_dir: Path) -> int | None:
    """The `--limit` of a pilot run as manifest.json records it (`run --limit` writes it into
    the judge stage's entry: the latest judging decides what the verdicts cover), else None."""
    manifest = read_manifest(Path(run_dir)) if Path(run_dir).is_dir() else None
    entry = manifest.stages.get("judge") if manifest else None
    return entry.limit if entry and entry.limit and entry.limit > 0 else None


def _corrected(out: Path, doc: ScoresFile, scores: Scores, correct_with: str | None, design) -> ScoresFile:
    """With `correct_with`: the scores document with corrected scores, written to scores.json
    under `out`; `design`: (its path, `analysis.design.CheckedSample`)."""
    if correct_with is None:
        return doc
    doc = with_correction(doc, scores, Correction(correct_with, design[1], str(design[0])))
    write_model(scores_path(out), doc)
    return doc


def write_report(run_dir: Path, dataset: Path | None = None, *, seed: int = 0,
                 console: Console | None = None, allow_missing: bool = False, warn=None,
                 allow_incomplete: bool = False, pilot: int | None = None,
                 correct_with: str | None = None, sample: str | None = None) -> Path:
    """Write report.md, figures/ and tables/ into the run directory; return report.md's path.
    `allow_missing`: report without a missing extra verdict file (run_inputs), each such gap
    given to `warn` too and listed in the report's first lines. `allow_incomplete`: report
    incomplete systems, compared on common questions; `pilot`: the run's `--limit` (default:
    the manifest's), which allows that and says so. `correct_with`: gold judges whose verdicts
    on the run's calibration sample (`sample`: its name) correct each model judge's scores
    (scores.json gains them, the report a section)."""
    run_dir = Path(run_dir)
    design = None
    if correct_with is not None:  # a missing or bad design stops the report before any reading
        path = find_sample(run_dir, sample)
        design = (path, read_sample(path))
    files, dataset_path, notes = run_inputs(run_dir, dataset, allow_missing=allow_missing)
    if design is not None:  # the human verdicts against the design, before anything is written
        from gamut_local.reporting.correction import checked_sample

        design = (design[0], checked_sample(design[1], files, correct_with))
    _needs_matplotlib()
    pilot = pilot if pilot is not None else pilot_limit(run_dir)
    missing = [n for n in notes if n.startswith(MISSING_VERDICTS)]
    for note in missing if warn else []:
        warn(note)
    with staged(run_dir) as out:
        _write_outputs(run_dir, out, files, dataset_path, notes, missing, seed=seed, console=console, pilot=pilot,
                       allow_incomplete=allow_incomplete, correct_with=correct_with, design=design)
        commit(out, run_dir)
    return run_dir / "report.md"


def _write_outputs(run_dir: Path, out: Path, files: list[Path], dataset_path: Path | None, notes: list[str],
                   missing: list[str], *, seed: int, console, pilot, allow_incomplete: bool, correct_with, design) -> None:
    """Every output of the report (scores/, tables/, figures/, report.md) under `out`, laid out
    as in the run directory; scores and agreement that are current there are kept, not
    written again."""
    # The drawing workers start before anything is computed: they load matplotlib meanwhile.
    with drawing_pool() as workers:
        doc, scores, agreement = current_or_computed(run_dir, files, dataset_path, seed=seed, console=console,
                                                     computing=workers.start, out=out,
                                                     allow_incomplete=allow_incomplete or pilot is not None)
        doc = _corrected(out, doc, scores, correct_with, design)
        t = {**report_tables(scores, agreement), "pilot": pilot}
        write_report_tables(out / "tables", ReportTablesFile(
            inputs=doc.inputs, dataset=doc.dataset, **{**t, "missing": notes + t["missing"]}))
        figures = draw_all(t, out / "figures", workers)
    from gamut_local.reporting.calibration import report_section  # runs with verdicts/human-*/ only

    # Gaps and stale verdicts come first: a reader must see them before any number.
    warnings = missing + describe_stale(doc.stale_verdicts)
    top = "".join(f"> **Warning:** {n}\n" for n in warnings) + ("\n" if warnings else "")
    shown = {k: f"figures/{p.name}" for k, p in figures.items()}
    write_text_atomic(out / "report.md", top + render(run_name(run_dir), t, shown, notes, N_BOOT)
                      + correction_section(doc.model_dump(mode="json"), out) + jury_section(run_dir, out)
                      + report_section(run_dir, files, console=console, out_dir=out))


def _needs_matplotlib() -> None:
    """The figures need matplotlib (the `analysis` extra): said before anything is read or written."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise InputError([Problem("gamut-local report", None, "", "draws its figures with matplotlib, which this "
                                  "install lacks: pip install 'gamut_local[analysis]'")])


@contextmanager
def staged(run_dir: Path):
    """A fresh folder inside the run directory (so the moves are renames on one file system)
    where the report writes every output; removed on leaving, with whatever a failure left in
    it, so a report stopped half-way changes nothing in the run directory."""
    out = Path(tempfile.mkdtemp(dir=run_dir, prefix=STAGING_PREFIX))
    try:
        yield out
    finally:
        shutil.rmtree(out, ignore_errors=True)
        # What the failure message lists as written: only what reached the run directory.
        JOURNAL.replaced[:] = [p for p in JOURNAL.replaced if not Path(p).is_relative_to(out)]


def commit(out: Path, run_dir: Path) -> None:
    """Move every file written under `out` to its place in the run directory: renames, after
    every output was written."""
    moved = []
    for src in sorted(p for p in out.rglob("*") if p.is_file()):
        dst = run_dir / src.relative_to(out)
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dst)
        moved.append(str(dst))
    for folder in {Path(p).parent for p in moved}:
        fsync_path(folder)
    JOURNAL.replaced.extend(moved)
