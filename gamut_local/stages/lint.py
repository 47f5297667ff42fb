"""The lint stage: a dataset's rubrics through the deterministic rules of `rubric.lint`.

JSON Lines findings name the record's line; for the release parquet, LINE is the row number
(1-based), since a parquet file has no lines.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from gamut_local.data.dataset import load_question_rows
from gamut_local.rubric.lint import ERROR, Finding, lint_batch, with_tier_balance
from gamut_local.rubric.workers import in_processes, shared


def _lint_some(start: int, stop: int) -> list[tuple[list[Finding], Counter]]:
    file, rows = shared()
    return lint_batch(rows[start:stop], file)


def lint_file(path: str | Path) -> list[Finding]:
    """Every finding for a dataset file, questions in file order (in worker processes for a
    large one); invalid records raise InputError first."""
    rows = [(q, line) for q, line, _ in load_question_rows(path, check_images=False)]
    return with_tier_balance(in_processes(_lint_some, len(rows), [str(path), rows]), str(path))


def count_errors(findings: list[Finding]) -> int:
    return sum(f.severity == ERROR for f in findings)
