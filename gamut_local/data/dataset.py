"""A dataset file, read and validated whole: our JSON Lines, or the GAMUT release's parquet
(through `gamut_release`), with every image checked before any model loads."""

from __future__ import annotations

from pathlib import Path

from gamut_local.data.gamut_release import load_release
from gamut_local.data.records import Question, resolve_image, validate_questions
from gamut_local.errors import InputError, Problem
from gamut_local.rundir.store import read_jsonl


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
            im.load()  # a full decode: a truncated JPEG passes verify() and fails in generate
    except Exception as e:  # PIL raises many types for a broken file
        return f"image cannot be opened: {path} ({type(e).__name__}: {e})"
    return None


def load_questions(path: str | Path, *, check_images: bool = True) -> list[Question]:
    """Read and validate a dataset; raise InputError listing every problem.

    A `.parquet` file is read through the GAMUT release adapter.
    """
    path = Path(path)
    if path.suffix == ".parquet":
        return load_release(path)
    problems: list[Problem] = []
    rows = ((str(path), no, obj) for no, obj in read_jsonl(path, problems=problems, torn_tail_ok=False))
    questions = []
    for q, file, line in validate_questions(rows, problems):
        if check_images and q.image is not None:
            msg = _image_problem(q.image, path)
            if msg:
                problems.append(Problem(file, line, "image", msg))
        questions.append(q)
    if problems:
        raise InputError(problems)
    return questions
