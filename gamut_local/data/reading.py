"""What the analysis stages read (`score`, `agree`, `report`, `sample`, `compare`): the verdict
table together with the dataset it is checked against, stale verdicts left out and counted,
and the columns of a per-response scores file. Writing the analysis files, and deciding
whether they are current, is `reporting.tables`'s.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path

import numpy as np

from gamut_local.data.consistency import current_checks, describe_stale, stale_verdicts, table_problems
from gamut_local.data.verdict_table import VerdictTable, read_verdicts, take_rows
from gamut_local.errors import InputError
from gamut_local.rundir.identity import file_record
from gamut_local.vocab import SMALL_POOL_MAX


def expected_checks(checks: dict[tuple, tuple] | None) -> dict[tuple[str, str], int] | None:
    """{(question_id, variant): number of checks} the dataset expects a response to be graded
    on (`checks`: `current_checks`, the checks the judge stage grades, compiled with the run's
    settings), for scoring's expected grid; None without a dataset (the grid then comes from
    the verdicts)."""
    if not checks:
        return None
    return dict(Counter(map(itemgetter(0, 1), checks)))  # C-level: a generator cost 0.03 s at paper scale


def read_verdicts_and_dataset(paths, dataset: Path | None, console=None, *, answers: list[Path] | None = None,
                              small_pool_max: int = SMALL_POOL_MAX, probs: bool = False) -> tuple[VerdictTable, tuple]:
    """The verdict table and (question ids, domains, dataset input record, the checks graded
    now: `current_checks`; empty and None without a dataset). What the verdicts are checked
    against (the dataset, validated and compiled; the run's `answers`, read and hashed) is
    read in processes of their own (`rubric.workers.beside`: it is Python that holds the GIL;
    at paper scale the answers are 128 MB of JSON) while the verdicts are read here.
    A bad dataset or answers file is reported first, as when it was read first. `probs`: read
    the label probabilities too (only calibration looks at them; scores and agreement never do).

    Stale verdicts are left out of the table and counted (`without_stale`): those whose check
    is worded otherwise in the dataset now, and (given the run's `answers` files) those that
    graded another text of their answer. With a dataset, a verdict it does not back (unknown
    question or check, another tier: `table_problems`) is an InputError, whichever command
    reads: scoring it would change the scores silently."""
    def verdicts() -> VerdictTable:
        return read_verdicts(paths, probs=probs, answer_hashes=answers is not None, check_hashes=dataset is not None)

    if dataset is None and answers is None:
        table, now = verdicts(), Current()
    else:
        from gamut_local.data.dataset import collect, collecting_strictly  # the record models: only with inputs
        from gamut_local.rubric.workers import beside

        calls = [(current_dataset, Path(dataset), small_pool_max, collecting_strictly())] if dataset is not None else []
        calls += [(current_answers, part) for part in _halves(answers)] if answers is not None else []
        with beside(*calls) as jobs:
            try:
                table = verdicts()
            except InputError:
                _current(jobs, dataset is not None, answers)  # a bad dataset or answers file is reported first
                raise
            now = _current(jobs, dataset is not None, answers)
        collect(now.warnings)
    table = without_stale(table, now, console)
    problems = table_problems(table, now.question_ids, now.checks) if dataset is not None else []
    if problems:
        raise InputError(problems)
    table.compile_settings = {"small_pool_max": small_pool_max} if dataset is not None else {}
    return table, (now.question_ids, now.domains, now.dataset_input, now.checks)


@dataclass
class Current:
    """What verdicts are checked against now, as plain data (made in another process): the
    dataset's question ids, domains and input record, and the checks graded now
    (`current_checks`), None without a dataset; the answers' hashes ((question, model,
    variant) -> `answer_hash`) and input records, None without answers; the reads' warnings."""

    question_ids: list[str] = field(default_factory=list)
    domains: dict[str, str] | None = None
    dataset_input: dict | None = None
    checks: dict[tuple, tuple] | None = None
    answer_hashes: dict[tuple, str] | None = None
    answer_inputs: list[dict] = field(default_factory=list)
    warnings: list = field(default_factory=list)


def current_dataset(dataset: Path, small_pool_max: int, strict: bool) -> Current:
    """The dataset read, validated and compiled, as `Current` (run by `beside`)."""
    from gamut_local.data.dataset import collecting_warnings, load_questions

    now = Current()
    with collecting_warnings(strict) as now.warnings:
        questions = load_questions(dataset, check_images=False)
    now.question_ids = [q.question_id for q in questions]
    now.domains = {q.question_id: q.domain for q in questions}
    now.dataset_input, now.checks = file_record(dataset), current_checks(questions, small_pool_max)
    return now


def current_answers(answers: list[Path]) -> tuple[dict[tuple, str], list[dict]]:
    """The answers' hashes (`records.current_answer_hashes`) and input records (run by `beside`)."""
    from gamut_local.data.records import current_answer_hashes

    return current_answer_hashes(answers), [file_record(Path(p)) for p in answers]


def _halves(answers: list[Path]) -> list[list[Path]]:
    """The answers files in two runs of about equal size, each read by a process of its own
    (one run where there is one file; a file that cannot be read counts 0: its reader names it)."""
    if len(answers) < 2:
        return [answers]
    sizes = np.cumsum([_size(Path(p)) for p in answers])
    k = min(int(np.searchsorted(sizes, sizes[-1] / 2)) + 1, len(answers) - 1)  # the first run: half or more
    return [answers[:k], answers[k:]]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # not there, a name too long, a loop: the answers reader says so, by file
        return 0


def _current(jobs, with_dataset: bool, answers: list[Path] | None) -> Current:
    """The `beside` jobs' results as one `Current`: the dataset's job (if any), then the
    answers' runs. Where a run is refused, or a key is in both runs, the one answers reader
    reads every file again here, so the problems are named as one read names them (every
    problem of every file; a duplicate with where it was first)."""
    now = jobs[0].result() if with_dataset else Current()
    if answers is None:
        return now
    try:
        parts = [job.result() for job in jobs[with_dataset:]]
    except InputError:
        parts = [current_answers(answers)]
    now.answer_hashes = {k: v for hashes, _ in parts for k, v in hashes.items()}
    if len(now.answer_hashes) < sum(len(hashes) for hashes, _ in parts):
        current_answers(answers)  # raises: a key in both runs is a duplicate
    now.answer_inputs = [record for _, records in parts for record in records]
    return now


def without_stale(table: VerdictTable, now: Current, console=None) -> VerdictTable:
    """The table less its stale verdicts (`data.consistency.stale_verdicts`, against `now`),
    with `stale` and `answer_inputs` set; what was left out is said on the console."""
    stale, reasons = stale_verdicts(table, now.checks, now.answer_hashes)
    out = take_rows(table, np.flatnonzero(~stale)) if stale.any() else table
    out.stale = reasons
    out.answer_inputs = now.answer_inputs
    if console is not None:
        for line in describe_stale(reasons):
            console.print(line, style="yellow")
    return out


def read_responses(path: Path) -> dict:
    """Columns of a per-response file (`reporting.tables.write_responses`): strings as
    (codes, values) pairs (`analysis.scoring.Coded.of` takes them), NaN for null scores."""
    import json

    from gamut_local import arrow

    if path.suffix == ".parquet":
        cols = arrow.read_columns(path)
    else:
        from gamut_local.vocab import TIERS

        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
        names = list(rows[0]) if rows else []
        cols = {k: [r[k] for r in rows] for k in names}
        for k in ("score", *TIERS):
            cols[k] = np.array([np.nan if v is None else v for v in cols[k]], dtype=float)
    cols.setdefault("domain", None)
    return cols
