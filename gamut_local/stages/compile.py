"""The compile stage: a dataset's meta-rubrics into the flat checks a judge grades.

The rules themselves live in `rubric.compiler`; this stage reads, validates and writes. A
large dataset is compiled and written out as JSON in forked worker processes
(`rubric.workers`), a piece of at most PIECE items at a time, so that one question of
100,000 items is shared between the cores as well as 10,000 questions of 10 items are.
"""

from __future__ import annotations

from pathlib import Path

from gamut_local.config import RunSpec
from gamut_local.data.dataset import load_questions
from gamut_local.rubric.compiler import compile_dataset, item_checks
from gamut_local.rubric.workers import in_processes, shared
from gamut_local.rundir.store import dumps, write_text_atomic
from gamut_local.vocab import SMALL_POOL_MAX

PIECE = 200  # items compiled per piece of work

_HEAD = '{"checks":['  # a compiled row as `dumps` writes it (sorted keys): checks, then question_id


def _pieces(questions) -> list[tuple[int, int, int]]:
    """(question, first item, end item) for each piece of work; (question, 0, 0) for a
    question with given checks (its whole row is one piece)."""
    out = []
    for k, q in enumerate(questions):
        if q.checks or q.checks_text_only:
            out.append((k, 0, 0))
        else:
            n = len(q.meta_rubric.items)
            out += [(k, a, min(a + PIECE, n)) for a in range(0, n, PIECE)]
    return out


def _compile_some(start: int, stop: int) -> list[tuple[str, int]]:
    """Per piece: its checks as JSON (a row's whole line for given checks; else the checks
    between the list's brackets) and how many checks that is."""
    questions, pieces, small_pool_max = shared()
    out = []
    for k, a, b in pieces[start:stop]:
        q = questions[k]
        if b == 0:
            row = compile_dataset([q], small_pool_max)[0]
            out.append((dumps(row), len(row["checks"]) + len(row.get("checks_text_only", []))))
            continue
        checks = [c for item in q.meta_rubric.items[a:b] for c in item_checks(item, small_pool_max)]
        out.append((dumps(checks)[1:-1], len(checks)))  # one call: `dumps` per check took 1.6x as long
    return out


def compiled_lines(questions, small_pool_max: int = SMALL_POOL_MAX) -> tuple[list[str], int]:
    """The rubric JSONL's lines (each with its newline), the bytes `write_jsonl` writes of
    `compile_dataset`, and the number of checks in them."""
    pieces = _pieces(questions)
    lines, parts, n_checks = [], [], 0
    for (k, a, b), (text, n) in zip(pieces, in_processes(_compile_some, len(pieces), [questions, pieces,
                                                                                       small_pool_max])):
        n_checks += n
        if b == 0:
            lines.append(text + "\n")
            continue
        parts.append(text)
        if b == len(questions[k].meta_rubric.items):  # the question's last piece
            lines.append(_HEAD + ",".join(parts) + "]," + dumps({"question_id": questions[k].question_id})[1:] + "\n")
            parts = []
    return lines, n_checks


def compile_file(dataset: str | Path, out: str | Path, small_pool_max: int = SMALL_POOL_MAX) -> tuple[int, int]:
    """Compile a dataset file (JSONL or the release parquet) to a rubric JSONL; returns
    (questions, checks) written."""
    lines, n_checks = compiled_lines(load_questions(dataset, check_images=False), small_pool_max)
    write_text_atomic(out, "".join(lines))
    return len(lines), n_checks


def compile_rubric(spec: RunSpec) -> Path:
    """The run's checks, compiled with its `compile` settings: the same checks the judge
    stage grades (it compiles with the same function and settings)."""
    path = Path(spec.output_dir) / "rubric.jsonl"
    compile_file(spec.dataset, path, spec.compile.small_pool_max)
    return path
