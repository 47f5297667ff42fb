"""Human revision of rubrics: `export` to one YAML per question, `import` back, `diff`.

Export keeps each JSONL record exactly as written (the parquet's are dumped from the
validated question), so `import` of an unedited folder writes the same records, byte for
byte, in canonical JSON Lines. A record whose YAML was edited gets `provenance.revised_on`
(and `revised_by`, when given): the benchmark says which rubrics a human touched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from gamut_local.data.dataset import load_question_rows
from gamut_local.data.records import Question
from gamut_local.errors import InputError, Problem
from gamut_local.rubric.revision import (
    diff_lines,
    diff_records,
    export_text,
    import_text,
    line_of,
    text_hash,
)
from gamut_local.rundir.store import dumps, write_folder_atomic, write_text_atomic

YAML_SUFFIXES = (".yaml", ".yml")


def _file_name(i: int, question_id: str) -> str:
    return f"{i:04d}-{re.sub(r'[^A-Za-z0-9._-]', '_', question_id)}.yaml"


def export_dataset(dataset: str | Path, out_dir: str | Path) -> list[Path]:
    """One commented YAML per question, numbered in dataset order; the folder must hold none yet."""
    dataset, out_dir = Path(dataset), Path(out_dir)
    rows = load_question_rows(dataset, check_images=False)
    if out_dir.is_dir() and any(p.suffix in YAML_SUFFIXES for p in out_dir.iterdir()):
        raise InputError([Problem(str(out_dir), None, "", "already holds YAML files; export into a new folder "
                                  "(import reads every YAML file there)")])
    names = [_file_name(i, q.question_id) for i, (q, _, _) in enumerate(rows, start=1)]
    return write_folder_atomic(out_dir, ((name, export_text(rec, q, dataset.name).encode("utf-8"))
                                         for name, (q, _, rec) in zip(names, rows)))


def _read_one(path: Path, problems: list[Problem]) -> tuple[str, str, dict | None] | None:
    """(question id, the record as its JSON line, the record if it was edited) for one YAML
    file, or None with its problems added. The line is what `import` writes and what the
    header's hash is of."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        problems.append(Problem(str(path), None, "", f"not valid UTF-8 (byte {e.start})"))
        return None
    rec, source_hash, node, found = import_text(text, str(path))
    problems.extend(found)
    if rec is None:
        return None
    try:
        Question.model_validate(rec)
    except ValidationError as e:
        for err in e.errors():
            loc = tuple(p for p in err["loc"] if not str(p).startswith("function-"))
            problems.append(Problem(str(path), line_of(node, loc), ".".join(map(str, loc)), err["msg"]))
        return None
    line = dumps(rec)
    return rec["question_id"], line, None if text_hash(line) == source_hash else rec


@dataclass(frozen=True)
class Imported:
    """What `import_dir` wrote: how many questions, the ids edited since export, where."""

    questions: int
    revised: tuple[str, ...]
    out: Path


def import_dir(folder: str | Path, out: str | Path, *, revised_by: str | None = None,
               revised_on: str | None = None) -> Imported:
    """Validate every YAML of a folder and write them, in file-name order, as one JSONL."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError([Problem(str(folder), None, "", "not a folder")])
    files = sorted(p for p in folder.iterdir() if p.suffix in YAML_SUFFIXES)
    if not files:
        raise InputError([Problem(str(folder), None, "", "no .yaml files")])
    problems: list[Problem] = []
    lines, revised, seen = [], [], {}
    today = revised_on or datetime.now(UTC).date().isoformat()
    for path in files:
        got = _read_one(path, problems)
        if got is None:
            continue
        qid, line, edited = got
        if qid in seen:
            problems.append(Problem(str(path), None, "question_id", f"duplicate id {qid!r} (also in {seen[qid]})"))
            continue
        seen[qid] = path.name
        if edited is not None:
            stamp = {"revised_on": today, **({"revised_by": revised_by} if revised_by else {})}
            line = dumps({**edited, "provenance": {**(edited.get("provenance") or {}), **stamp}})
            revised.append(qid)
        lines.append(line + "\n")
    if problems:
        raise InputError(problems)
    write_text_atomic(out, "".join(lines))
    return Imported(questions=len(lines), revised=tuple(revised), out=Path(out))


def diff_files(a: str | Path, b: str | Path) -> tuple[dict, list[str]]:
    """`diff_records` of two dataset files, and its lines."""
    qa, ra, qb, rb = {}, {}, {}, {}
    for questions, records, path in ((qa, ra, a), (qb, rb, b)):
        for q, _, rec in load_question_rows(path, check_images=False):
            questions[q.question_id], records[q.question_id] = q, rec
    d = diff_records(qa, qb, ra, rb)
    return d, diff_lines(d)
