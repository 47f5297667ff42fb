"""Evidence for drafting: snippets per question, and the questions still to be given a rubric.

Evidence comes either as one JSON Lines file of snippets (`question_id`, `id`, `title`, `url`,
`text`), or as a folder with one subfolder per question id holding text or Markdown files,
each file a snippet (id = file name without suffix; title = its first Markdown heading, taken
out of the text, else the file name). Long files are split at paragraph breaks into parts of at most `max_chars`,
ids `<name>-1`, `<name>-2`, ..., so every snippet fits a prompt and is cited on its own.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gamut_local.errors import InputError, Problem, pydantic_problems
from gamut_local.rubric.schema import Snippet, repeated
from gamut_local.rundir.store import read_jsonl

NonEmpty = Annotated[str, Field(min_length=1)]
TEXT_SUFFIXES = (".txt", ".md", ".markdown")
MAX_SNIPPET_CHARS = 2000


class EvidenceRow(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)
    question_id: NonEmpty
    id: NonEmpty
    title: NonEmpty
    url: str | None = None
    text: NonEmpty


class QuestionToDraft(BaseModel):
    """A question record as `draft` takes it: a rubric, if present, is ignored (redrafted)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)
    question_id: NonEmpty
    domain: NonEmpty
    question: NonEmpty
    question_text_only: str | None = None
    image: str | None = None
    meta_rubric: dict | None = None
    checks: list | None = None
    checks_text_only: list | None = None  # a release question's text-only split's own checks
    snippets: list | None = None  # a release question's evidence (the drafter takes --evidence)
    provenance: dict | None = None


def load_questions_to_draft(path: str | Path) -> list[QuestionToDraft]:
    problems: list[Problem] = []
    out, seen = [], {}
    for no, obj in read_jsonl(path, problems=problems, torn_tail_ok=False):
        try:
            q = QuestionToDraft.model_validate(obj)
        except ValidationError as e:
            problems.extend(pydantic_problems(e, str(path), no))
            continue
        if q.question_id in seen:
            problems.append(Problem(str(path), no, "question_id",
                                    f"duplicate id {q.question_id!r} (first at line {seen[q.question_id]})"))
            continue
        seen[q.question_id] = no
        out.append(q)
    if problems:
        raise InputError(problems)
    return out


def split_text(text: str, max_chars: int = MAX_SNIPPET_CHARS) -> list[str]:
    """Paragraph-aligned parts of at most `max_chars` (a longer paragraph is cut at sentence
    ends, then hard); whitespace inside paragraphs kept as written."""
    paras = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    pieces: list[str] = []
    for p in paras:
        while len(p) > max_chars:
            cut = p.rfind(". ", 0, max_chars)
            cut = cut + 1 if cut > max_chars // 2 else max_chars
            pieces.append(p[:cut].strip())
            p = p[cut:].strip()
        if p:
            pieces.append(p)
    parts, current = [], ""
    for piece in pieces:
        if current and len(current) + 2 + len(piece) > max_chars:
            parts.append(current)
            current = piece
        else:
            current = f"{current}\n\n{piece}" if current else piece
    if current:
        parts.append(current)
    return parts


def _file_snippets(path: Path, max_chars: int) -> list[Snippet]:
    text = path.read_text(encoding="utf-8")
    heading = re.search(r"^#+\s+(.+?)\s*$", text, flags=re.MULTILINE)
    title = heading.group(1) if heading else path.stem
    if heading:  # the heading is the title, not evidence
        text = text[:heading.start()] + text[heading.end():]
    parts = split_text(text, max_chars)
    if len(parts) == 1:
        return [Snippet(id=path.stem, title=title, text=parts[0])]
    return [Snippet(id=f"{path.stem}-{i}", title=f"{title} (part {i} of {len(parts)})", text=t)
            for i, t in enumerate(parts, start=1)]


def _from_folder(folder: Path, max_chars: int, problems: list[Problem]) -> dict[str, list[Snippet]]:
    out: dict[str, list[Snippet]] = {}
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        snippets = []
        for f in sorted(p for p in sub.iterdir() if p.suffix.lower() in TEXT_SUFFIXES):
            try:
                snippets += _file_snippets(f, max_chars)
            except UnicodeDecodeError as e:
                problems.append(Problem(str(f), None, "", f"not valid UTF-8 (byte {e.start})"))
            except ValidationError as e:
                problems.extend(pydantic_problems(e, str(f), None))
        if snippets:
            out[sub.name] = snippets
    return out


def _from_jsonl(path: Path, problems: list[Problem]) -> dict[str, list[Snippet]]:
    out: dict[str, list[Snippet]] = {}
    for no, obj in read_jsonl(path, problems=problems, torn_tail_ok=False):
        try:
            row = EvidenceRow.model_validate(obj)
        except ValidationError as e:
            problems.extend(pydantic_problems(e, str(path), no))
            continue
        out.setdefault(row.question_id, []).append(
            Snippet(id=row.id, title=row.title, url=row.url, text=row.text))
    return out


def load_evidence(path: str | Path, max_chars: int = MAX_SNIPPET_CHARS) -> dict[str, list[Snippet]]:
    """question_id -> its snippets, from a JSONL file or a folder; every problem at once."""
    path = Path(path)
    problems: list[Problem] = []
    if path.is_dir():
        evidence = _from_folder(path, max_chars, problems)
    else:
        evidence = _from_jsonl(path, problems)
    for qid, snippets in evidence.items():
        for dup in repeated(s.id for s in snippets):
            problems.append(Problem(str(path), None, "id", f"question {qid!r}: snippet id {dup!r} is repeated"))
    if problems:
        raise InputError(problems)
    return evidence
