"""Records that flow between stages (question, answer, verdict) and dataset loading.

Question records carry a meta-rubric and/or an already-compiled `checks` list. Images are
either a path relative to the dataset file or `pkg:<package>/<file>`, a file shipped inside
an installed Python package (the bundled sample uses scikit-image's photographs this way).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, ValidationError, create_model, model_validator

from gamut_local.errors import InputError, Problem, pydantic_problems
from gamut_local.hashing import file_sha256
from gamut_local.rubric.compiler import checks_for
from gamut_local.rubric.schema import Check, MetaRubric, Snippet, repeated
from gamut_local.rundir import verdict_schema, verdict_store
from gamut_local.rundir.human import revises
from gamut_local.rundir.store import read_jsonl
from gamut_local.vocab import DEFAULT_VARIANT, NAME_PATTERN, Variant

NonEmpty = Annotated[str, Field(min_length=1)]
PKG_PREFIX = "pkg:"
# Model and judge names in records become result file names (rundir.layout): same rule as configs.
SafeName = Annotated[str, Field(min_length=1, pattern=f"^{NAME_PATTERN}$")]


class _Record(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class Authorship(_Record):
    """Which model wrote (or audited) a rubric, under which settings and prompt template."""

    model: NonEmpty
    settings_hash: NonEmpty
    template_hash: NonEmpty


class Provenance(_Record):
    """How a rubric was made (`draft`, `audit`, `import` of human edits), so a benchmark
    built that way stays auditable. Absent on hand-written records."""

    drafted_by: Authorship | None = None
    audited_by: Authorship | None = None
    revised_on: str | None = None  # ISO date of the last `import` that found human edits
    revised_by: str | None = None


class Question(_Record):
    question_id: NonEmpty
    domain: NonEmpty
    question: NonEmpty
    question_text_only: str | None = None
    image: str | None = None
    meta_rubric: MetaRubric | None = None
    checks: list[Check] | None = None
    # The GAMUT release's evidence (its checks cite these ids) and, where the release's
    # text-only split grades a question on other checks, those checks (see checks_for_variant).
    snippets: list[Snippet] | None = None
    checks_text_only: list[Check] | None = None
    provenance: Provenance | None = None

    @model_validator(mode="after")
    def _rubric(self):
        if self.meta_rubric is None and not self.checks:
            raise ValueError("a question needs a meta_rubric or a non-empty checks list")
        for checks in (self.checks, self.checks_text_only):
            dupes = repeated(c.check_id for c in checks or [])
            if dupes:
                raise ValueError(f"check ids must be unique; repeated: {', '.join(dupes)}")
        if self.snippets is not None:
            _check_citations(self.snippets, [*(self.checks or []), *(self.checks_text_only or [])])
        return self

    def checks_for_variant(self, variant: str, compiled: list[Check] | None = None) -> list[Check]:
        """The checks a `variant` answer is judged on: for text_only the text-only split's own
        checks where the release gives ones that differ, else the question's checks (`compiled`
        when the caller has them already). The judge stage and the cost plan ask here."""
        if variant == "text_only" and self.checks_text_only:
            return list(self.checks_text_only)
        return list(compiled) if compiled is not None else checks_for(self)

    def text_for(self, variant: str) -> tuple[str, str]:
        """What a candidate is asked in `variant`, and the field it came from.

        `text_only` sends `question_text_only` (which names the subject, as there is no image)
        and falls back to the generic `question` for records without one; every stage that
        shows the question (generate, judge, the cost plan) asks here.
        """
        if variant == "text_only" and self.question_text_only:
            return self.question_text_only, "question_text_only"
        return self.question, "question"


def _check_citations(snippets: list[Snippet], checks: list[Check]) -> None:
    ids = {s.id for s in snippets}
    dupes = repeated(s.id for s in snippets)
    if dupes:
        raise ValueError(f"snippet ids must be unique; repeated: {', '.join(dupes)}")
    for c in checks:
        unknown = [e for e in c.evidence if e not in ids]
        if unknown:
            raise ValueError(f"check {c.check_id!r} cites unknown snippet ids: {', '.join(unknown)}")


class Answer(_Record):
    model_config = ConfigDict(strict=True, extra="allow", frozen=True)
    question_id: NonEmpty
    model: SafeName
    variant: Variant
    response: str
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # Identity (rundir.identity); absent on answers made before it or written by hand.
    settings_hash: str | None = None
    prompt_hash: str | None = None


def _verdict_type(f: verdict_schema.VerdictField):
    """A verdict field's pydantic type and default, from its declaration (`rundir.verdict_schema`)."""
    lo, hi = verdict_schema.PROBABILITY
    kind = {"id": NonEmpty, "name": SafeName, "choice": Literal[f.choices] if f.choices else str, "text": str | None,
            "probs": dict[Literal[f.choices], Annotated[FiniteFloat, Field(ge=lo, le=hi)]] | None}[f.kind]
    return kind, (f.default if f.default is not None else ... if f.required else None)


class _VerdictRecord(_Record):
    model_config = ConfigDict(strict=True, extra="allow", frozen=True)


# The strict reader's verdict, made from the one declaration of a verdict's fields: its loose
# fields (method, token counts) stay extra fields of any JSON, kept by the store in `extra`.
Verdict = create_model("Verdict", __base__=_VerdictRecord,
                       **{f.name: _verdict_type(f) for f in verdict_schema.FIELDS if not f.loose})


def verdict_key(v: dict) -> tuple:
    return (v["question_id"], v["model"], v.get("variant", DEFAULT_VARIANT), v["judge"], v["check_id"])


def answer_key(a: dict) -> tuple:
    return (a["question_id"], a["model"], a["variant"])


def resolve_image(ref: str, dataset_path: Path) -> Path:
    """Where an `image` reference points (the file may not exist; callers check)."""
    if ref.startswith(PKG_PREFIX):
        package, _, rel = ref[len(PKG_PREFIX):].partition("/")
        spec = importlib.util.find_spec(package) if package else None
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(f"package {package!r} is not installed")
        return Path(list(spec.submodule_search_locations)[0]) / rel
    return (dataset_path.parent / ref).resolve()


def image_sha256(ref: str, dataset_path: Path) -> str:
    """The image file's content hash: part of a multimodal answer's `prompt_hash`, so a
    replaced image (same file name, other picture) re-does the answers that saw it."""
    return file_sha256(resolve_image(ref, dataset_path))


def load_image(ref: str, dataset_path: Path):
    """The image as an RGB PIL image."""
    from PIL import Image

    with Image.open(resolve_image(ref, dataset_path)) as im:
        return im.convert("RGB")


def validate_questions(rows, problems: list[Problem], id_field: str = "question_id",
                       duplicates: list[Problem] | None = None):
    """Validate (file, line, dict) rows as questions; yield (question, file, line) for the good
    ones and add a Problem for each bad one or repeated id (to `duplicates`, where given: the
    release tolerates bad rows but not two rows that claim one question). Shared by every
    dataset reader."""
    duplicates = problems if duplicates is None else duplicates
    first_seen: dict[str, str] = {}
    for file, line, obj in rows:
        try:
            q = Question.model_validate(obj)
        except ValidationError as e:
            problems.extend(pydantic_problems(e, file, line))
            continue
        where = file if line is None else f"{file}:{line}"
        if q.question_id in first_seen:
            duplicates.append(Problem(file, line, id_field,
                                      f"duplicate id {q.question_id!r} (first at {first_seen[q.question_id]})"))
            continue
        first_seen[q.question_id] = where
        yield q, file, line


def load_records(paths: list[str | Path], model: type[BaseModel], key, where: list | None = None) -> list[dict]:
    """Read answer or verdict JSONL files (or verdict store units: `rundir.verdict_store`),
    validate each record, refuse duplicate keys (except a human's later verdict on the same
    cell, which replaces the earlier: rundir.human). `where`, if given, gets (index of the
    file in `paths`, line) for each record returned."""
    out, problems, seen, at = [], [], {}, {}
    where = [] if where is None else where
    for k_path, path in enumerate(paths):
        name = str(path)
        rows = verdict_store.records(path) if verdict_store.is_store(path) else read_jsonl(path, problems=problems)
        for no, obj in rows:
            try:
                rec = model.model_validate(obj).model_dump()
            except ValidationError as e:
                problems.extend(pydantic_problems(e, name, no))
                continue
            k = key(rec)
            if k in seen and revises(rec):
                out[at[k]] = rec
                where[at[k]] = (k_path, no)
                continue
            if k in seen:
                problems.append(Problem(name, no, "", f"duplicate record {k} (first at {seen[k]})"))
                continue
            seen[k] = f"{name}:{no}"
            at[k] = len(out)
            out.append(rec)
            where.append((k_path, no))
    if problems:
        raise InputError(problems)
    return out


def load_answers(paths: list[str | Path]) -> list[dict]:
    """Answer files (generated or given as `extra_answers`), validated, duplicate keys refused.

    The one reader for answers: the judge stage, the cost plan and the SLURM graph all use it.
    """
    return load_records(list(paths), Answer, answer_key)


def current_answer_hashes(paths: list[str | Path]) -> dict[tuple, str]:
    """(question, model, variant) -> the `answer_hash` a verdict on that answer must carry now."""
    from gamut_local.rundir.identity import answer_hash

    return {answer_key(a): answer_hash(a["response"]) for a in load_answers(paths)}


def answered_systems(answers: list[dict]) -> list[tuple[str, str]]:
    """The (model, variant) pairs of some answers, in first-seen order."""
    return list(dict.fromkeys((a["model"], a["variant"]) for a in answers))
