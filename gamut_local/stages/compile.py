"""The compile stage: a dataset's meta-rubrics into the flat checks a judge grades.

The rules themselves live in `rubric.compiler`; this stage reads, validates and writes.
"""

from __future__ import annotations

from pathlib import Path

from gamut_local.config import RunSpec
from gamut_local.data.dataset import load_questions
from gamut_local.rubric.compiler import compile_dataset
from gamut_local.rundir.store import write_jsonl


def compile_file(dataset: str | Path, out: str | Path) -> int:
    """Compile a dataset file (JSONL or the release parquet) to a rubric JSONL; returns the check count."""
    records = compile_dataset(load_questions(dataset, check_images=False))
    write_jsonl(out, records)
    return len(records)


def compile_rubric(spec: RunSpec) -> Path:
    path = Path(spec.output_dir) / "rubric.jsonl"
    write_jsonl(path, compile_dataset(load_questions(spec.dataset, check_images=False)))
    return path
