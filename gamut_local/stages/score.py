"""The score stage: read and validate verdict files into one columnar table
(`data.verdict_table`), score it once (`analysis.scoring`, the formula in `analysis.metrics`)
and write `scores.json` plus the per-response file beside it (`reporting.tables`).

`score_run` scores every judge's verdicts of a run plus its `extra_verdicts` (e.g. the
sample's gold verdicts) together into `scores/scores.json`, one entry per (judge, model,
variant), and `scores/scores.responses.parquet`, one row per (judge, model, variant,
question). docs/outputs.md documents both.

Coverage: every (judge, system) row says how much of its expected grid (the dataset's
questions and checks, or without a dataset what the verdicts imply) it covers. A scores
file of incomplete systems is what `compare`, `report` and the viewer rank, so writing one is
refused, naming the gaps, unless `allow_incomplete` (`--allow-incomplete`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from gamut_local.analysis.design import read_sample
from gamut_local.analysis.outputs import ScoresFile
from gamut_local.analysis.scoring import N_BOOT, require_complete, score_table
from gamut_local.errors import InputError, Problem
from gamut_local.data.reading import expected_checks, read_verdicts_and_dataset
from gamut_local.reporting.tables import Correction, write_scores_files
from gamut_local.rundir.layout import all_answer_files, find_sample, scores_path, verdict_files
from gamut_local.vocab import SMALL_POOL_MAX

if TYPE_CHECKING:  # `score` reads no config: their models cost 0.05 s to import
    from gamut_local.config import RunSpec


def write_scores(out: Path, paths, dataset: Path | None = None, *, seed: int = 0, n_boot: int = N_BOOT,
                 console: Console | None = None, answers: list[Path] | None = None,
                 small_pool_max: int = SMALL_POOL_MAX, allow_incomplete: bool = False,
                 correct_with: str | None = None, sample: Path | None = None) -> ScoresFile:
    """Read, validate and score verdict files; write `out` and the per-response file beside it.

    With a dataset, every verdict must be for a question, check and tier the dataset has
    (`data.consistency`): scoring others would change the scores silently; and a verdict on
    a check worded otherwise now (or, given `answers`, on another text of its answer) is
    stale: left out and counted. An incomplete system is refused before anything is written
    unless `allow_incomplete`. With `correct_with` (a pattern naming gold judges, e.g.
    `human-*`) and the `sample` design they graded, every model judge's rows also get their
    corrected scores (`analysis.correction`)."""
    design = _sample_for(correct_with, sample)  # a bad design file stops us before any reading
    table, domains, dataset_input, expected = _read_checked(paths, dataset, console, answers, small_pool_max)
    scores = score_table(table, domains, expected=expected, seed=seed, n_boot=n_boot)
    require_complete(scores, ", ".join(str(p) for p in paths), allow_incomplete)
    correction = None
    if design is not None:
        from gamut_local.reporting.correction import checked_sample

        correction = Correction(correct_with, checked_sample(design, paths, correct_with, table), str(sample))
    doc = write_scores_files(Path(out), table, scores, dataset_input, correction)
    for note in doc.correction.notes if doc.correction is not None and console is not None else []:
        console.print(f"note: {note}", markup=False)
    return doc


def _sample_for(correct_with: str | None, sample: Path | None):
    if correct_with is None and sample is None:
        return None
    if correct_with is None or sample is None:
        raise InputError([Problem("--correct-with/--sample", None, "", "give both: the gold judges (e.g. "
                                  "'human-*') and the calibration sample they graded")])
    return read_sample(sample)


def _read_checked(paths, dataset: Path | None, console: Console | None = None, answers: list[Path] | None = None,
                  small_pool_max: int = SMALL_POOL_MAX):
    """(verdict table, domains, dataset input record, expected checks), the verdicts checked
    against the dataset, stale ones left out."""
    table, (_, domains, dataset_input, checks) = read_verdicts_and_dataset(
        paths, dataset, console, answers=answers, small_pool_max=small_pool_max)
    return table, domains, dataset_input, expected_checks(checks)


@dataclass(frozen=True)
class ScoredRun:
    """What `score_run` wrote: scores.json's path and its content."""

    path: Path
    scores: ScoresFile


def score_run(spec: RunSpec, console: Console | None = None, allow_incomplete: bool = False,
              correct_with: str | None = None, sample: str | None = None) -> ScoredRun:
    """Score every verdict file of the run and its extra_verdicts together; with `correct_with`,
    corrected by those gold judges over the run's calibration sample (`sample`: its name)."""
    paths = verdict_files(Path(spec.output_dir)) + [Path(p) for p in spec.extra_verdicts]
    if not paths:
        raise InputError([Problem(str(Path(spec.output_dir) / "verdicts"), None, "",
                                  "no verdict files and no extra_verdicts: run judge first")])
    out = scores_path(Path(spec.output_dir))
    answers = all_answer_files(Path(spec.output_dir)) + [Path(p) for p in spec.extra_answers]
    design = None if correct_with is None else find_sample(Path(spec.output_dir), sample)
    doc = write_scores(out, paths, Path(spec.dataset), seed=spec.seed, console=console, answers=answers,
                       small_pool_max=spec.compile.small_pool_max, allow_incomplete=allow_incomplete,
                       correct_with=correct_with, sample=design)
    return ScoredRun(out, doc)
