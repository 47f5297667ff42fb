"""The public GAMUT release (Hugging Face `facebook/GAMUT`, parquet) as our question records.

A row is `session_id` (a UUID string; `id` where that column is absent), `question` (else
`rubrics.Question`) and `rubrics`, a struct with `Question`, `Snippets` (`{id, Title, Text}`;
`id` may be an integer) and one list per tier, `Answer_Critical` (also `Answer Critical`),
`Valuable` and `Context`, of items `{Handle, Ingredient, Specifics: [{Citation, ...}]}`.
`Ingredient` is the check text, often long and instruction-laden ("Evaluate the relative order
of ... Missing steps ... do not fail this element."), kept verbatim; `Citation` a snippet id.
The split `test` is asked with the image; `test_text_only` is its own split with its own
`question` and possibly its own rubric (`merge_text_only`).

Each row becomes a Question with the release's binary rubric as `checks` (judged as given,
kind `release`) and its snippets as `snippets`. No meta-rubric is made up: the release has none.

One bad part of a row does not cost the other rows. Warnings keep what they concern: a citation
of an unknown snippet (dropped from the check's evidence), a snippet without text or id (left
out), snippet ids and citations of different types (a number vs text; matched as text, one
warning per file). A row that cannot become a usable question (no id, no question, no checks, a check
without text) is left out and named `FILE[row i]: field: message`; the other rows load. With
`strict=True` every warning and every such row is an error instead. Two rows with one
`session_id`, or a `Citation` that is not one id (a list), are errors always: which row is the
question, or what the file's columns mean, would be a guess.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from gamut_local.data.records import Question, validate_questions
from gamut_local.errors import InputError, Problem

# Release tier key (both spellings seen in public code) -> our tier name.
TIER_KEYS = {
    "Answer_Critical": "answer_critical",
    "Answer Critical": "answer_critical",
    "AnswerCritical": "answer_critical",
    "Valuable": "valuable",
    "Context": "context",
}
ID_COLUMNS = ("session_id", "id")
# The file scripts/fetch_data.py writes the release to, and the release's shape: what `plan`
# counts on before that file is downloaded (the test split's rows; checks per question as in
# the paper, rubric.lint.PAPER_CHECKS; every question has an image and a text-only form).
RELEASE_FILE = "gamut.jsonl"
RELEASE_QUESTIONS = 1813
UNKNOWN_DOMAIN = "unknown"  # the release has no domain column; CRAG-MM supplies it (crag_mm.py)
LEFT_OUT = "; this question is left out"


@dataclass
class Loaded:
    """Questions read from a dataset and the warnings about what was kept or left out."""

    questions: list[Question]
    warnings: list[Problem] = field(default_factory=list)


@dataclass
class RowNotes:
    """What reading one row found: `errors` make the question unusable, `warnings` do not."""

    errors: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    # Not the release's shape (a parquet column has one type in every row): the file is refused.
    shape: list[tuple[str, str]] = field(default_factory=list)
    snippet_id_types: set[str] = field(default_factory=set)
    citation_types: set[str] = field(default_factory=set)

    def mixed_id_types(self) -> bool:
        return bool(self.snippet_id_types and self.citation_types
                    and self.snippet_id_types != self.citation_types)


def read_rows(path: str | Path) -> tuple[list[str], list[dict]]:
    """The parquet file's column names and rows (nested structs as dicts)."""
    path = Path(path)
    if not path.is_file():
        raise InputError([Problem(str(path), None, "", "file not found")])
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - depends on the environment
        raise InputError([Problem(str(path), None, "", "reading parquet needs pyarrow: "
                                  "pip install 'gamut_local[parquet]'")]) from None
    try:
        # ParquetFile, not read_table: read_table goes through pyarrow.dataset, which imports
        # pandas (0.3 s on every load of a release).
        table = pq.ParquetFile(path).read()
    except Exception as e:  # pyarrow raises several types for a file that is not parquet
        raise InputError([Problem(str(path), None, "", f"cannot read as parquet: {e}")]) from None
    return list(table.column_names), table.to_pylist()


def _shape_problem(path: Path, columns: list[str]) -> Problem | None:
    missing = []
    if not any(c in columns for c in ID_COLUMNS):
        missing.append("session_id (or id)")
    if "rubrics" not in columns:
        missing.append("rubrics")
    if not missing:
        return None
    return Problem(str(path), None, "", "not the GAMUT release shape: missing column(s) "
                   f"{', '.join(missing)}; columns found: {', '.join(columns) or '(none)'}")


def _text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():  # an int column with nulls, read as float
        return str(int(value))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value.strip() if isinstance(value, str) else None


def _type_name(value) -> str:
    return "number" if isinstance(value, (int, float)) and not isinstance(value, bool) else "text"


def _rubrics(row: dict, notes: RowNotes) -> dict | None:
    rubrics = row.get("rubrics")
    if isinstance(rubrics, str):  # some exports store the struct as a JSON string
        try:
            rubrics = json.loads(rubrics)
        except json.JSONDecodeError as e:
            notes.errors.append(("rubrics", f"not valid JSON: {e.msg}"))
            return None
    if not isinstance(rubrics, dict):
        notes.errors.append(("rubrics", f"expected a struct, got {type(rubrics).__name__}"))
        return None
    return rubrics


def _snippets(rubrics: dict, notes: RowNotes) -> list[dict]:
    """The row's snippets with an id and a text; the others are warned about and left out."""
    raw = rubrics.get("Snippets") or []
    if not isinstance(raw, list):
        notes.warnings.append(("rubrics.Snippets", "expected a list; snippets left out"))
        return []
    out = []
    for j, s in enumerate(raw):
        where = f"rubrics.Snippets.{j}"
        if not isinstance(s, dict):
            notes.warnings.append((where, "expected a mapping; snippet left out"))
            continue
        sid, text = _text(s.get("id")), _text(s.get("Text"))
        if not sid:
            notes.warnings.append((f"{where}.id", "missing or empty; snippet left out"))
            continue
        notes.snippet_id_types.add(_type_name(s.get("id")))
        if not text:
            notes.warnings.append((f"{where}.Text", f"snippet {sid} has no text; snippet left out"))
            continue
        if any(o["id"] == sid for o in out):
            notes.warnings.append((f"{where}.id", f"repeats snippet id {sid}; the first is kept"))
            continue
        out.append({"id": sid, "title": _text(s.get("Title")) or sid, "text": text})
    return out


def _citations(item: dict, where: str, known: set[str], notes: RowNotes) -> list[str]:
    """The snippet ids an item cites; citations of unknown snippets are warned about and dropped."""
    specifics = item.get("Specifics") or []
    if not isinstance(specifics, list):
        notes.warnings.append((f"{where}.Specifics", "expected a list; citations ignored"))
        return []
    out: list[str] = []
    for j, spec in enumerate(specifics):
        if not isinstance(spec, dict):
            notes.warnings.append((f"{where}.Specifics.{j}", "expected a mapping; ignored"))
            continue
        raw = spec.get("Citation")
        if isinstance(raw, (list, dict, bool)):
            notes.shape.append((f"{where}.Specifics.{j}.Citation", f"expected one snippet id, got "
                                f"{type(raw).__name__} {raw!r}"))
            continue
        cite = _text(raw)
        if not cite:
            continue
        notes.citation_types.add(_type_name(spec.get("Citation")))
        if cite not in known:
            notes.warnings.append((f"{where}.Specifics.{j}.Citation", f"cites snippet {cite}, which is not "
                                   "among the row's snippets with text; citation dropped, check kept"))
        elif cite not in out:
            out.append(cite)
    return out


def _checks(rubrics: dict, known: set[str], notes: RowNotes) -> list[dict]:
    """The release's rubric items as checks, tier by tier, in the release's order."""
    checks: list[dict] = []
    for key, tier in TIER_KEYS.items():
        entries = rubrics.get(key)
        if entries is None:
            continue
        if not isinstance(entries, list):
            notes.errors.append((f"rubrics.{key}", "expected a list of items"))
            continue
        for j, item in enumerate(entries):
            where = f"rubrics.{key}.{j}"
            if not isinstance(item, dict):
                notes.errors.append((where, "expected a mapping"))
                continue
            text = _text(item.get("Ingredient"))
            if not text:  # judging the rest would score the question on part of its rubric
                notes.errors.append((f"{where}.Ingredient", "missing or empty"))
                continue
            # Ids are position-based so they are stable across loads of the same file; the
            # release's Handle (a short label, not guaranteed unique) is kept as source_item.
            check_id = f"{tier}.{sum(c['tier'] == tier for c in checks) + 1}"
            checks.append({"check_id": check_id, "text": text, "tier": tier, "kind": "release",
                           "source_item": _text(item.get("Handle")) or check_id,
                           "evidence": _citations(item, where, known, notes)})
    if not checks and not notes.errors:
        found = ", ".join(sorted(rubrics)) or "(none)"
        notes.errors.append(("rubrics", "no rubric items in any tier list "
                             f"(Answer_Critical / Valuable / Context); keys found: {found}"))
    return checks


def row_to_record(row: dict) -> tuple[dict | None, RowNotes]:
    """One release row -> a question dict (not yet validated; None if unusable) and its notes."""
    notes = RowNotes()
    qid = next((_text(row.get(c)) for c in ID_COLUMNS if _text(row.get(c))), None)
    if not qid:
        notes.errors.append(("session_id", "missing or empty (no session_id or id)"))
    rubrics = _rubrics(row, notes)
    if rubrics is None:
        return None, notes
    question = _text(row.get("question")) or _text(rubrics.get("Question"))
    if not question:
        notes.errors.append(("question", "missing or empty (neither question nor rubrics.Question)"))
    snippets = _snippets(rubrics, notes)
    checks = _checks(rubrics, {s["id"] for s in snippets}, notes)
    if notes.errors:
        return None, notes
    record = {"question_id": qid, "domain": _text(row.get("domain")) or UNKNOWN_DOMAIN,
              "question": question, "checks": checks, "snippets": snippets}
    text_only = _text(row.get("question_text_only"))
    if text_only:
        record["question_text_only"] = text_only
    return record, notes


def _id_type_warning(path: Path, rows: list[int]) -> Problem:
    return Problem(str(path), None, "rubrics.Snippets.id",
                   f"{len(rows)} row(s) give snippet ids and citations as different types (number vs "
                   f"text), first at row {rows[0]}; matched as text, checks kept")


def _read_records(path: Path, rows: list[dict], errors: list[Problem], warnings: list[Problem],
                  fatal: list[Problem]):
    """(where, None, record) for each usable row; every row's notes go to errors / warnings
    (and to `fatal`, what makes the file unusable)."""
    mixed = []
    for i, row in enumerate(rows):
        where = f"{path}[row {i}]"
        record, notes = row_to_record(row)
        fatal.extend(Problem(where, None, f, m) for f, m in notes.shape)
        errors.extend(Problem(where, None, f, m) for f, m in notes.errors)
        warnings.extend(Problem(where, None, f, m) for f, m in notes.warnings)
        mixed += [i] if notes.mixed_id_types() else []
        if record is not None:
            yield where, None, record
    if mixed:
        warnings.append(_id_type_warning(path, mixed))


def load_release(path: str | Path, *, strict: bool = False) -> Loaded:
    """Read a GAMUT release parquet file into validated questions and warnings.

    Unusable rows are left out with a warning each (`strict`: InputError listing every warning
    and every bad row). A file that is not the release, or has no usable row, is an InputError.
    """
    path = Path(path)
    columns, rows = read_rows(path)
    shape = _shape_problem(path, columns)
    if shape:
        raise InputError([shape])
    if not rows:
        raise InputError([Problem(str(path), None, "", "file has no rows")])
    errors: list[Problem] = []
    warnings: list[Problem] = []
    fatal: list[Problem] = []
    records = _read_records(path, rows, errors, warnings, fatal)
    questions = [q for q, _, _ in validate_questions(records, errors, id_field="session_id", duplicates=fatal)]
    if fatal:  # two rows for one session_id, or a column of another type: no row is to be trusted
        raise InputError(fatal)
    if strict and (errors or warnings):
        raise InputError(errors + warnings)
    if not questions:
        none = Problem(str(path), None, "", f"none of its {len(rows)} rows is a usable question")
        raise InputError(errors + [none])
    left_out = [Problem(p.file, p.line, p.field, p.message + LEFT_OUT) for p in errors]
    return Loaded(questions, left_out + warnings)


def merge_text_only(questions: list[Question], text_only: list[Question]) -> tuple[list[Question], dict]:
    """Give each question its text-only split's wording and, where that split grades it on
    other checks (texts or tiers differ), those checks as `checks_text_only`, with the
    snippets they cite. Returns the questions and what did not line up (ids, sorted)."""
    by_id = {q.question_id: q for q in text_only}
    merged, differs = [], []
    for q in questions:
        t = by_id.get(q.question_id)
        if t is None:
            merged.append(q)
            continue
        update: dict = {"question_text_only": t.question}
        if [(c.text, c.tier) for c in q.checks or []] != [(c.text, c.tier) for c in t.checks or []]:
            differs.append(q.question_id)
            own = {s.id: s for s in q.snippets or []}
            update["checks_text_only"] = t.checks
            update["snippets"] = [*own.values(), *(s for s in t.snippets or [] if s.id not in own)]
        merged.append(Question.model_validate({**q.model_dump(), **_dumped(update)}))
    main = {q.question_id for q in questions}
    return merged, {"text_only_without_main_question": sorted(set(by_id) - main),
                    "text_only_rubric_differs": sorted(differs),
                    "no_text_only_form": sorted(main - set(by_id))}


def load_release_pair(path: str | Path, text_only: str | Path | None, *,
                      strict: bool = False) -> tuple[Loaded, dict]:
    """The release split merged with its text-only split (None: there is none), and what did
    not line up between them (merge_text_only's report)."""
    main = load_release(path, strict=strict)
    if text_only is None:
        return main, {"text_only_without_main_question": [], "text_only_rubric_differs": [],
                      "no_text_only_form": sorted(q.question_id for q in main.questions)}
    other = load_release(text_only, strict=strict)
    questions, mismatch = merge_text_only(main.questions, other.questions)
    return Loaded(questions, main.warnings + other.warnings), mismatch


def _dumped(update: dict) -> dict:
    return {k: [x.model_dump() for x in v] if isinstance(v, list) else v for k, v in update.items()}
