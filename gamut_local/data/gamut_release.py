"""The public GAMUT release (Hugging Face `facebook/GAMUT`, parquet) as our question records.

The release's columns could not be inspected when this was written; the adapter follows the
shape public code reads: `session_id` (or `id`), `question`, and `rubrics`, a struct with
`Question`, `Snippets` (`{id, Title, Text}`) and one list per tier, `Answer_Critical` (also
spelled `Answer Critical`), `Valuable`, `Context`, of items `{Handle, Ingredient,
Specifics: [{Citation, ...}]}`. `Ingredient` is the check text, `Citation` a snippet id.

Each row becomes a Question whose `checks` are the release's binary rubric, judged as given,
and whose `meta_rubric` carries the same items as simple facts together with the snippets, so
evidence stays beside the question. Missing optional keys are tolerated; a row that cannot
become a question is reported as `FILE[row i]: field: message`, every such row at once.
"""

from __future__ import annotations

import json
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
UNKNOWN_DOMAIN = "unknown"  # the release has no domain column; CRAG-MM supplies it (crag_mm.py)


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
        table = pq.read_table(path)
    except Exception as e:  # pyarrow raises several types for a file that is not parquet
        raise InputError([Problem(str(path), None, "", f"cannot read as parquet: {e}")]) from None
    return list(table.column_names), table.to_pylist()


def _shape_problem(path: Path, columns: list[str]) -> Problem | None:
    missing = []
    if not any(c in columns for c in ID_COLUMNS):
        missing.append("session_id (or id)")
    if "rubrics" not in columns:
        missing.append("rubrics")
    if "question" not in columns and "rubrics" not in columns:
        missing.append("question")
    if not missing:
        return None
    return Problem(str(path), None, "", "not the GAMUT release shape: missing column(s) "
                   f"{', '.join(missing)}; columns found: {', '.join(columns) or '(none)'}")


def _text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value.strip() if isinstance(value, str) else None


def _citations(item: dict, field: str, problems: list[tuple[str, str]]) -> list[str]:
    specifics = item.get("Specifics") or []
    if not isinstance(specifics, list):
        problems.append((f"{field}.Specifics", "expected a list"))
        return []
    out: list[str] = []
    for j, spec in enumerate(specifics):
        if not isinstance(spec, dict):
            problems.append((f"{field}.Specifics.{j}", "expected a mapping"))
            continue
        cite = _text(spec.get("Citation"))
        if cite and cite not in out:
            out.append(cite)
    return out


def row_to_record(row: dict) -> tuple[dict | None, list[tuple[str, str]]]:
    """One release row -> a question dict (not yet validated) and (field, message) problems."""
    problems: list[tuple[str, str]] = []
    qid = next((_text(row.get(c)) for c in ID_COLUMNS if _text(row.get(c))), None)
    if not qid:
        problems.append(("session_id", "missing or empty (no session_id or id)"))
    rubrics = row.get("rubrics")
    if isinstance(rubrics, str):  # some exports store the struct as a JSON string
        try:
            rubrics = json.loads(rubrics)
        except json.JSONDecodeError as e:
            problems.append(("rubrics", f"not valid JSON: {e.msg}"))
            return None, problems
    if not isinstance(rubrics, dict):
        problems.append(("rubrics", f"expected a struct, got {type(rubrics).__name__}"))
        return None, problems
    question = _text(row.get("question")) or _text(rubrics.get("Question"))
    if not question:
        problems.append(("question", "missing or empty (neither question nor rubrics.Question)"))

    snippets, seen_ids = [], set()
    raw_snippets = rubrics.get("Snippets") or []
    if not isinstance(raw_snippets, list):
        problems.append(("rubrics.Snippets", "expected a list"))
        raw_snippets = []
    for j, s in enumerate(raw_snippets):
        f = f"rubrics.Snippets.{j}"
        if not isinstance(s, dict):
            problems.append((f, "expected a mapping"))
            continue
        sid, text = _text(s.get("id")), _text(s.get("Text"))
        if not sid:
            problems.append((f"{f}.id", "missing or empty"))
            continue
        if not text:
            problems.append((f"{f}.Text", "missing or empty"))
            continue
        seen_ids.add(sid)
        snippets.append({"id": sid, "title": _text(s.get("Title")) or sid, "text": text})

    checks, items = [], []
    for key, tier in TIER_KEYS.items():
        entries = rubrics.get(key)
        if entries is None:
            continue
        if not isinstance(entries, list):
            problems.append((f"rubrics.{key}", "expected a list of items"))
            continue
        for j, item in enumerate(entries):
            f = f"rubrics.{key}.{j}"
            if not isinstance(item, dict):
                problems.append((f, "expected a mapping"))
                continue
            text = _text(item.get("Ingredient"))
            if not text:
                problems.append((f"{f}.Ingredient", "missing or empty"))
                continue
            evidence = _citations(item, f, problems)
            unknown = [c for c in evidence if c not in seen_ids]
            if unknown:
                problems.append((f"{f}.Specifics", "cites snippet id(s) not in rubrics.Snippets: "
                                 + ", ".join(unknown)))
                continue
            # Ids are position-based so they are stable across loads of the same file; the
            # release's Handle (a short label, not guaranteed unique) is kept as source_item.
            check_id = f"{tier}.{len([c for c in checks if c['tier'] == tier]) + 1}"
            handle = _text(item.get("Handle")) or check_id
            checks.append({"check_id": check_id, "text": text, "tier": tier, "kind": "release",
                           "source_item": handle, "evidence": evidence})
            items.append({"id": check_id, "tier": tier, "type": "simple", "fact": text,
                          "evidence": evidence})
    if not checks and not any(f.startswith("rubrics.") for f, _ in problems):
        found = ", ".join(sorted(rubrics)) or "(none)"
        problems.append(("rubrics", f"no rubric items in any tier list "
                         f"(Answer_Critical / Valuable / Context); keys found: {found}"))
    if problems:
        return None, problems
    record = {
        "question_id": qid,
        "domain": _text(row.get("domain")) or UNKNOWN_DOMAIN,
        "question": question,
        "checks": checks,
        "meta_rubric": {"items": items, "snippets": snippets},
    }
    text_only = _text(row.get("question_text_only"))
    if text_only:
        record["question_text_only"] = text_only
    return record, []


def load_release(path: str | Path) -> list[Question]:
    """Read a GAMUT release parquet file into validated questions (InputError lists every problem)."""
    path = Path(path)
    columns, rows = read_rows(path)
    shape = _shape_problem(path, columns)
    if shape:
        raise InputError([shape])
    problems: list[Problem] = []

    def records():
        for i, row in enumerate(rows):
            where = f"{path}[row {i}]"
            record, row_problems = row_to_record(row)
            problems.extend(Problem(where, None, f, m) for f, m in row_problems)
            if not row_problems:
                yield where, None, record

    questions = [q for q, _, _ in validate_questions(records(), problems, id_field="session_id")]
    if problems:
        raise InputError(problems)
    if not questions:
        raise InputError([Problem(str(path), None, "", "file has no rows")])
    return questions
