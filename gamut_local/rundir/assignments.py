"""The team's assignment of a calibration sample, `RUN/team/assignments.json`: which annotators
grade which drawn responses (`Assignments`), read back checked (`load`: every problem names
the file and the field) and written whole (`save`: `store.atomic_file`, under the file's task
lock, so two commands that assign at once take turns and neither loses the other's file).

How the responses are shared out (balanced across strata, in the design's round order, with
an overlap graded twice) is `analysis.assignment`; this module only keeps it on disk.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from gamut_local.errors import InputError, Problem, pydantic_problems
from gamut_local.rundir.human import check_annotator

SCHEMA_VERSION = 1
KIND = "gamut-local assignments"

Response = tuple[str, str, str]  # (model, variant, question_id)


@dataclass(frozen=True)
class Assignments:
    """Who grades what of the calibration sample `sample` (its `sample_id`).

    annotators: the current team, in the order they joined; responses: each drawn response
    (design order) -> the annotators assigned to grade it, the first-assigned first (one, or
    two on the overlap; a removed annotator stays on the responses they graded in full);
    overlap: the share of responses graded by two people; seed: what chose the overlap."""

    sample: str
    sample_id: str
    overlap: float
    seed: int
    annotators: tuple[str, ...]
    responses: dict[Response, tuple[str, ...]]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class _Row(_Strict):
    model: str
    variant: str
    question_id: str
    annotators: list[str]


class _File(_Strict):
    schema_version: Literal[1]
    kind: Literal["gamut-local assignments"]
    sample: str
    sample_id: str
    overlap: float
    seed: int
    annotators: list[str]
    responses: list[_Row]


def path_of(run_dir: Path) -> Path:
    return Path(run_dir) / "team" / "assignments.json"


def to_json(a: Assignments) -> dict:
    return {"schema_version": SCHEMA_VERSION, "kind": KIND, "sample": a.sample, "sample_id": a.sample_id,
            "overlap": a.overlap, "seed": a.seed, "annotators": list(a.annotators),
            "responses": [{"model": m, "variant": v, "question_id": q, "annotators": list(who)}
                          for (m, v, q), who in a.responses.items()]}


def load(run_dir: Path) -> Assignments | None:
    """The run's assignment, None where there is none; a file that is not one (unreadable,
    not JSON, a field missing or of the wrong type, a name that is no annotator's, a response
    listed twice or with nobody) is an InputError naming the file and the field."""
    path = path_of(run_dir)
    if not path.exists():
        return None
    try:
        f = _File.model_validate_json(path.read_bytes())
    except OSError as e:
        raise InputError([Problem(str(path), None, "", f"cannot read: {e.strerror or e}")]) from None
    except ValidationError as e:
        raise InputError(pydantic_problems(e, str(path), None)) from None
    problems = _problems(f, str(path))
    if problems:
        raise InputError(problems)
    return Assignments(f.sample, f.sample_id, f.overlap, f.seed, tuple(f.annotators),
                       {(r.model, r.variant, r.question_id): tuple(r.annotators) for r in f.responses})


def _problems(f: _File, source: str) -> list[Problem]:
    out = []
    if not (math.isfinite(f.overlap) and 0 <= f.overlap < 1):
        out.append(Problem(source, None, "overlap", f"{f.overlap!r}: a share in [0, 1)"))
    out += _names(f.annotators, source, "annotators")
    if len(set(f.annotators)) != len(f.annotators):
        out.append(Problem(source, None, "annotators", "an annotator is listed twice"))
    seen = set()
    for i, r in enumerate(f.responses):
        at = f"responses.{i}"
        key = (r.model, r.variant, r.question_id)
        if key in seen:
            out.append(Problem(source, None, at, f"{r.question_id} of {r.model} ({r.variant}) is listed twice"))
        seen.add(key)
        if not r.annotators or len(set(r.annotators)) != len(r.annotators):
            out.append(Problem(source, None, f"{at}.annotators", "one or more annotators, each once"))
        out += _names(r.annotators, source, f"{at}.annotators")
    return out


def _names(names: list[str], source: str, field: str) -> list[Problem]:
    out = []
    for k, name in enumerate(names):
        try:
            check_annotator(name, source)
        except InputError as e:
            out.append(Problem(source, None, f"{field}.{k}", e.problems[0].message))
    return out


def save(run_dir: Path, a: Assignments) -> Path:
    """Write the assignment whole (the caller holds the file's task lock, `locked`)."""
    from gamut_local.rundir.store import atomic_file

    path = path_of(run_dir)
    with atomic_file(path) as f:
        f.write((json.dumps(to_json(a), indent=1, ensure_ascii=False) + "\n").encode("utf-8"))
    return path


def locked(run_dir: Path):
    """The assignment file's task lock, waiting its turn (`task_lock.WAIT`): a read, change
    and write of the assignment holds it, so two at once cannot lose one's change."""
    from gamut_local.rundir import task_lock

    path = path_of(run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    return task_lock.hold([path], wait=task_lock.WAIT)
