"""The compile stage: a dataset's meta-rubrics into the flat checks a judge grades.

The rules themselves live in `rubric.compiler`; this stage reads, validates and writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gamut_local.config import RunSpec
from gamut_local.data.dataset import load_questions
from gamut_local.rubric.compiler import compile_dataset
from gamut_local.rundir.store import write_jsonl
from gamut_local.vocab import SMALL_POOL_MAX


@dataclass(frozen=True)
class Compiled:
    """A rubric file written: its questions and their checks (both forms)."""

    questions: int
    checks: int


def compile_file(dataset: str | Path, out: str | Path, small_pool_max: int = SMALL_POOL_MAX) -> Compiled:
    """Compile a dataset file (JSONL or the release parquet) to a rubric JSONL."""
    rows = compile_dataset(load_questions(dataset, check_images=False), small_pool_max)
    write_jsonl(out, rows)
    return Compiled(len(rows), sum(len(r["checks"]) + len(r.get("checks_text_only", [])) for r in rows))


def compile_rubric(spec: RunSpec) -> Path:
    """The run's checks, compiled with its `compile` settings: the same checks the judge
    stage grades (it compiles with the same function and settings)."""
    path = Path(spec.output_dir) / "rubric.jsonl"
    compile_file(spec.dataset, path, spec.compile.small_pool_max)
    return path
