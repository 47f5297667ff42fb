"""The lint stage: a dataset's rubrics through the deterministic rules of `rubric.lint`.

JSON Lines findings name the record's line; for the release parquet, LINE is the row number
(1-based), since a parquet file has no lines.
"""

from __future__ import annotations

from pathlib import Path

from gamut_local.data.dataset import load_questions
from gamut_local.rubric.lint import ERROR, Finding, lint_questions
from gamut_local.rundir.store import read_jsonl


def lint_file(path: str | Path) -> list[Finding]:
    """Every finding for a dataset file; invalid records raise InputError first."""
    path = Path(path)
    questions = load_questions(path, check_images=False)
    if path.suffix == ".parquet":
        lines = {q.question_id: i for i, q in enumerate(questions, start=1)}
    else:
        lines = {obj.get("question_id"): no for no, obj in read_jsonl(path)}
    return lint_questions([(q, lines.get(q.question_id)) for q in questions], str(path))


def count_errors(findings: list[Finding]) -> int:
    return sum(f.severity == ERROR for f in findings)
