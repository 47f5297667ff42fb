"""A dataset file, read and validated whole: our JSON Lines, or the GAMUT release's parquet
(through `gamut_release`), with every image checked before any model loads.

Our JSONL is all-or-nothing: any bad record is an error. The release parquet tolerates what
does not make a question unusable and says so in warnings (gamut_release explains which).
Warnings reach the user through `collecting_warnings`: the CLI opens one per command, every
`load_questions` inside adds its warnings there (each once, however often the file is read),
and the command prints them at the end; `strict=True` turns them into errors.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from gamut_local.data.gamut_release import Loaded, load_release_pair
from gamut_local.data.records import Question, resolve_image, validate_questions
from gamut_local.errors import InputError, Problem
from gamut_local.rundir.store import read_jsonl

TEXT_ONLY_SUFFIX = "_text_only"  # release/test.parquet is read with release/test_text_only.parquet


@dataclass
class _Collecting:
    strict: bool
    warnings: list[Problem] = field(default_factory=list)
    seen: set[Problem] = field(default_factory=set)


_collecting: ContextVar[_Collecting | None] = ContextVar("dataset_warnings", default=None)


@contextmanager
def collecting_warnings(strict: bool = False):
    """Collect the warnings of every dataset read inside, each once; yields their list.
    With `strict`, every read inside raises InputError instead of warning."""
    collector = _Collecting(strict)
    token = _collecting.set(collector)
    try:
        yield collector.warnings
    finally:
        _collecting.reset(token)


def _image_problem(ref: str, dataset_path: Path) -> str | None:
    from PIL import Image

    try:
        path = resolve_image(ref, dataset_path)
    except (OSError, ModuleNotFoundError, ValueError, RuntimeError) as e:  # RuntimeError: a symlink loop
        return str(e)
    if not path.is_file():
        return f"image file not found: {path}"
    try:
        with Image.open(path) as im:
            # A full decode: a truncated JPEG passes verify() and fails in generate. JPEGs
            # decode at 1/8 scale (draft mode still reads every byte; a third of the time).
            if im.format == "JPEG":
                im.draft("RGB", (max(1, im.width // 8), max(1, im.height // 8)))
            im.load()
    except Exception as e:  # PIL raises many types for a broken file
        return f"image cannot be opened: {path} ({type(e).__name__}: {e})"
    return None


def _read_jsonl(path: Path, check_images: bool) -> list[tuple[Question, int, dict]]:
    """(question, line, record as read) for every record."""
    problems: list[Problem] = []
    records = read_jsonl(path, problems=problems, torn_tail_ok=False)
    at = {no: obj for no, obj in records}
    questions = []
    for q, file, line in validate_questions(((str(path), no, obj) for no, obj in records), problems):
        if check_images and q.image is not None:
            msg = _image_problem(q.image, path)
            if msg:
                problems.append(Problem(file, line, "image", msg))
        questions.append((q, line, at[line]))
    if problems:
        raise InputError(problems)
    return questions


def _read_release(path: Path, strict: bool) -> Loaded:
    """The release split, merged with its text-only split where that file sits beside it."""
    sibling = path.with_name(path.stem + TEXT_ONLY_SUFFIX + path.suffix)
    if path.stem.endswith(TEXT_ONLY_SUFFIX) or not sibling.is_file():
        sibling = None
    return load_release_pair(path, sibling, strict=strict)[0]


def read_dataset(path: str | Path, *, check_images: bool = True, strict: bool = False) -> Loaded:
    """Read and validate a dataset: its questions and warnings (InputError for every problem).

    A `.parquet` file is read through the GAMUT release adapter (with its `_text_only`
    sibling, if present); anything else as our JSON Lines, which has no warnings.
    """
    path = Path(path)
    if path.suffix == ".parquet":
        return _read_release(path, strict)
    return Loaded([q for q, _, _ in _read_jsonl(path, check_images)])


def load_questions(path: str | Path, *, check_images: bool = True,
                   strict: bool | None = None) -> list[Question]:
    """The questions of a dataset; its warnings go to the open `collecting_warnings`, whose
    `strict` applies unless `strict` is given here."""
    loaded = read_dataset(path, check_images=check_images, strict=collecting_strictly() if strict is None else strict)
    collect(loaded.warnings)
    return loaded.questions


def collecting_strictly() -> bool:
    """The open `collecting_warnings`' `strict` (False where none is open): what a read made
    in another process or thread, which does not see it, is given."""
    collector = _collecting.get()
    return collector is not None and collector.strict


def collect(warnings: list[Problem]) -> None:
    """Add a read's warnings to the open `collecting_warnings`, each once (none open: they
    are dropped, as the caller asked for no warnings)."""
    collector = _collecting.get()
    for w in warnings if collector is not None else []:
        if w not in collector.seen:
            collector.seen.add(w)
            collector.warnings.append(w)


def load_question_rows(path: str | Path, *, check_images: bool = True) -> list[tuple[Question, int, dict]]:
    """(question, line, record) for each question, from one read: the JSON Lines record as
    written and its line; for the release parquet, which has neither, the question's 1-based
    position and its fields (those not at their defaults)."""
    path = Path(path)
    if path.suffix == ".parquet":
        return [(q, i, q.model_dump(exclude_defaults=True))
                for i, q in enumerate(load_questions(path, check_images=check_images), start=1)]
    return _read_jsonl(path, check_images)


def warning_lines(warnings: list[Problem], limit: int = 20) -> list[str]:
    """The warnings one per line; more than `limit`, one line per kind (field pattern and
    message head) with its count and first instance, so 1,800 alike stay readable."""
    if len(warnings) <= limit:
        return [str(w) for w in warnings]
    kinds: dict[tuple[str, str], list[Problem]] = {}
    for w in warnings:
        head = re.split(r"[:;]| \d", re.sub(r"'[^']*'", "'...'", w.message), maxsplit=1)[0]
        key = (re.sub(r"\.\d+(?=\.|$)", ".N", w.field), head)
        kinds.setdefault(key, []).append(w)
    return [f"{len(ws)} x {field_}: {head}... (first: {ws[0]})" for (field_, head), ws in kinds.items()]
