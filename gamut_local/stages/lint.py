"""The lint stage: a dataset's rubrics through the deterministic rules of `rubric.lint`.

JSON Lines findings name the record's line; for the release parquet, LINE is the row number
(1-based), since a parquet file has no lines.
"""

from __future__ import annotations

from pathlib import Path

from gamut_local.data.dataset import load_question_rows
from gamut_local.rubric.lint import ERROR, Finding, lint_questions


def lint_file(path: str | Path) -> list[Finding]:
    """Every finding for a dataset file, questions in file order; invalid records raise
    InputError first."""
    rows = [(q, line) for q, line, _ in load_question_rows(path, check_images=False)]
    return lint_questions(rows, str(path))


def count_errors(findings: list[Finding]) -> int:
    return sum(f.severity == ERROR for f in findings)
