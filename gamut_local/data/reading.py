"""What the analysis stages read (`score`, `agree`, `report`, `sample`, `compare`): the verdict
table together with the dataset it is checked against, stale verdicts left out and counted,
and the columns of a per-response scores file. Writing the analysis files, and deciding
whether they are current, is `reporting.tables`'s.
"""

from __future__ import annotations

from collections import Counter
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
    now: `current_checks`; empty and None without a dataset), read at the same time: the
    dataset is validated and compiled in a process of its own (`rubric.workers.beside`: it is
    Python that holds the GIL) while the verdicts are read here. A bad dataset is reported
    first, as when it was read first. `probs`: read the label probabilities too (only
    calibration looks at them; scores and agreement never do).

    Stale verdicts are left out of the table and counted (`without_stale`): those whose check
    is worded otherwise in the dataset now, and (given the run's `answers` files) those that
    graded another text of their answer. With a dataset, a verdict it does not back (unknown
    question or check, another tier: `table_problems`) is an InputError, whichever command
    reads: scoring it would change the scores silently."""
    def verdicts() -> VerdictTable:
        return read_verdicts(paths, probs=probs, answer_hashes=answers is not None, check_hashes=dataset is not None)

    if dataset is None:
        table, read, checks = verdicts(), ([], None, None), None
    else:
        from gamut_local.data.dataset import collect, collecting_strictly  # the record models: only with a dataset
        from gamut_local.rubric.workers import beside

        with beside(_dataset_and_checks, Path(dataset), small_pool_max, collecting_strictly()) as job:
            try:
                table = verdicts()
            except InputError:
                job.result()
                raise
            read, checks, warnings = job.result()
        collect(warnings)
    table = without_stale(table, checks, answers, console)
    problems = table_problems(table, read[0], checks) if dataset is not None else []
    if problems:
        raise InputError(problems)
    table.compile_settings = {"small_pool_max": small_pool_max} if dataset is not None else {}
    return table, (*read, checks)


def _dataset_and_checks(dataset: Path, small_pool_max: int, strict: bool) -> tuple[tuple, dict, list]:
    """(question ids, question_id -> domain, the file's input record), the checks graded now
    (`current_checks`) and the read's warnings, as plain data: made in another process."""
    from gamut_local.data.dataset import collecting_warnings, load_questions

    with collecting_warnings(strict) as warnings:
        questions = load_questions(dataset, check_images=False)
    read = ([q.question_id for q in questions], {q.question_id: q.domain for q in questions}, file_record(dataset))
    return read, current_checks(questions, small_pool_max), warnings


def without_stale(table: VerdictTable, checks: dict | None, answers: list[Path] | None, console=None) -> VerdictTable:
    """The table less its stale verdicts (`data.consistency.stale_verdicts`), with `stale`
    and `answer_inputs` set; what was left out is said on the console."""
    answer_hashes = None
    if answers is not None:
        from gamut_local.data.records import current_answer_hashes  # the record models: only where answers are read

        answer_hashes = current_answer_hashes(answers)
    stale, reasons = stale_verdicts(table, checks, answer_hashes)
    out = take_rows(table, np.flatnonzero(~stale)) if stale.any() else table
    out.stale = reasons
    out.answer_inputs = [file_record(Path(p)) for p in answers or []]
    if console is not None:
        for line in describe_stale(reasons):
            console.print(line, style="yellow")
    return out


def read_responses(path: Path) -> dict:
    """Columns of a per-response file (`reporting.tables.write_responses`): strings as
    (codes, values) pairs (`analysis.scoring.Coded.of` takes them), NaN for null scores."""
    import json

    from gamut_local.data import arrow

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
