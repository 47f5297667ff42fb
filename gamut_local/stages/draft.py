"""The draft stage: an open model writes one meta-rubric per question from its evidence.

Every question's request goes through the engine in chunks of `chunk_size` (one `chat` call
per distinct snippet count in a chunk, since that count shapes the JSON schema the output is
held to). The schema is our meta-rubric's own (rubric.schema), less the snippets (we attach
those), with the ids a question may cite as an enum and bounds on sizes. Output is validated
against the full pydantic model; what fails is re-asked with its errors, up to
`max_retries`, then recorded as failed with its errors and raw text, never dropped.

Files: every outcome is appended to `<out>.drafts.jsonl` (the resume log: one line per
question, with its settings hash); `<out>` is rewritten from it after each run with the
questions whose draft validated, each carrying `provenance.drafted_by`. The engine's own
output goes to `logs/engine-draft.log` in `<out>`'s folder (engines/logs.py), unless verbose.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console

from gamut_local.config import DraftSpec, load_authoring_config, resolve_model_path
from gamut_local.data.evidence import QuestionToDraft, load_evidence, load_questions_to_draft
from gamut_local.engines import load_and_close, naming_the_log, route_engine_logs
from gamut_local.errors import InputError, Problem
from gamut_local.hashing import short_hash
from gamut_local.prompts.draft import (
    DRAFT_TEMPLATE_HASH,
    draft_conversation,
    retry_conversation,
    snippet_ref,
)
from gamut_local.reporting.progress import plain_console, progress_bars
from gamut_local.rubric.schema import MetaRubric, Snippet
from gamut_local.rundir.resume import done_keys_checked
from gamut_local.rundir.store import append_jsonl, read_jsonl, write_jsonl

OPTIONAL_FIELDS = ("meta_insight", "check_full_order")  # the model may leave these out
ID_MAX_CHARS = 40


def drafts_log_path(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.name.removesuffix(".jsonl") + ".drafts.jsonl")


def _bound(node, max_chars: int, max_list: int):
    """Cap every free string and array in a schema node, in place."""
    if isinstance(node, list):
        for n in node:
            _bound(n, max_chars, max_list)
        return
    if not isinstance(node, dict):
        return
    if node.get("type") == "string" and "enum" not in node and "const" not in node:
        node.setdefault("maxLength", max_chars)
    if node.get("type") == "array":
        node.setdefault("maxItems", max_list)
    for v in node.values():
        _bound(v, max_chars, max_list)


def draft_schema(n_snippets: int, spec: DraftSpec) -> dict:
    """The JSON schema a draft is constrained to: {"items": [...]}, citing S1..Sn."""
    schema = copy.deepcopy(MetaRubric.model_json_schema())
    items = schema["properties"]["items"]
    items["maxItems"] = spec.max_items
    # The item types are told apart by their `type` constant: anyOf says the same as the
    # discriminated oneOf, and the constrained decoders compile it exactly.
    union = items["items"]
    items["items"] = {"anyOf": union["oneOf"]} if "oneOf" in union else union
    schema["properties"] = {"items": items}
    schema["required"] = ["items"]
    schema["$defs"].pop("Snippet", None)
    refs = [snippet_ref(i) for i in range(n_snippets)]
    text = {"type": "string", "minLength": 1, "maxLength": spec.max_chars}
    for d in schema["$defs"].values():
        props = d["properties"]
        if "evidence" not in props:  # Step
            continue
        props.pop("extra_thresholds", None)  # derived by the compiler; the model need not choose
        props["id"] = {"type": "string", "minLength": 1, "maxLength": ID_MAX_CHARS}
        props["subject"] = dict(text)
        props["evidence"] = {"type": "array", "items": {"enum": refs}, "minItems": 1,
                             "maxItems": max(1, n_snippets)}
        if "meta_insight" in props:
            props["meta_insight"] = dict(text)
        if "min_required" in props:
            props["min_required"] = {"type": "integer", "minimum": 1, "maximum": spec.max_list}
        d["required"] = [k for k in props if k not in OPTIONAL_FIELDS]
    _bound(schema["$defs"], spec.max_chars, spec.max_list)
    return schema


def draft_settings_hash(spec: DraftSpec) -> str:
    """What determines a draft besides the question and its evidence."""
    bounds = spec.model_dump(include={"max_retries", "max_items", "max_list", "max_chars",
                                      "max_snippet_chars"})
    parts = (spec.model.settings_hash(), DRAFT_TEMPLATE_HASH, json.dumps(bounds, sort_keys=True))
    return short_hash(*parts)


def parse_draft(text: str, snippets: list[Snippet]) -> tuple[dict | None, list[str]]:
    """A model's output -> (the meta-rubric as a dict, []) or (None, the errors)."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        return None, [f"not valid JSON: {e.msg} at character {e.pos} (output cut at max_tokens?)"]
    if not isinstance(obj, dict) or not isinstance(obj.get("items"), list):
        return None, ['expected a JSON object with an "items" list']
    by_ref = {snippet_ref(i): s.id for i, s in enumerate(snippets)}
    items = []
    for item in obj["items"]:
        if isinstance(item, dict) and isinstance(item.get("evidence"), list):
            item = {**item, "evidence": [by_ref.get(e, e) for e in item["evidence"]]}
        items.append(item)
    data = {"items": items, "snippets": [s.model_dump(exclude_none=True) for s in snippets]}
    try:
        meta = MetaRubric.model_validate(data)
    except ValidationError as e:
        errors = []
        for err in e.errors():
            loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-"))
            errors.append(f"{loc or '<rubric>'}: {err['msg']}")
        return None, errors
    return meta.model_dump(exclude_none=True), []


def _chat_by_schema(engine, spec: DraftSpec, convs: list, counts: list[int]) -> list:
    """One engine call per snippet count (the schema's only variable), results in input order."""
    out = [None] * len(convs)
    for n in sorted(set(counts)):
        idx = [i for i, c in enumerate(counts) if c == n]
        sampling = spec.model.sampling.model_copy(update={"json_schema": draft_schema(n, spec)})
        for i, done in zip(idx, engine.chat([convs[i] for i in idx], sampling)):
            out[i] = done
    return out


def draft_chunk(engine, spec: DraftSpec, questions: list[QuestionToDraft],
                evidence: dict[str, list[Snippet]], settings_hash: str) -> list[dict]:
    """Draft every question of a chunk, re-asking the invalid ones with their errors."""
    snippets = [evidence[q.question_id] for q in questions]
    base = [draft_conversation(q.question, [(s.title, s.text) for s in sn], spec.max_snippet_chars,
                               spec.model.system_prompt, q.question_text_only)
            for q, sn in zip(questions, snippets)]
    convs = list(base)
    recs: list[dict | None] = [None] * len(questions)
    todo = list(range(len(questions)))
    for attempt in range(1, spec.max_retries + 2):
        outs = _chat_by_schema(engine, spec, [convs[i] for i in todo], [len(snippets[i]) for i in todo])
        again = []
        for i, done in zip(todo, outs):
            meta, errors = parse_draft(done.text, snippets[i])
            recs[i] = {"question_id": questions[i].question_id, "model": spec.model.name,
                       "settings_hash": settings_hash, "template_hash": DRAFT_TEMPLATE_HASH,
                       "valid": meta is not None, "meta_rubric": meta, "errors": errors, "raw": done.text,
                       "attempts": attempt, "finish_reason": done.finish_reason,
                       "prompt_tokens": done.prompt_tokens, "completion_tokens": done.completion_tokens}
            if errors:
                again.append(i)
                convs[i] = retry_conversation(base[i], done.text, errors)
        todo = again
        if not todo:
            break
    return recs  # type: ignore[return-value]


def drafted_question(q: QuestionToDraft, rec: dict, spec: DraftSpec) -> dict:
    """The question record `draft` writes: the input's fields, the new meta-rubric, provenance."""
    out = q.model_dump(exclude={"meta_rubric", "checks", "provenance"}, exclude_none=True)
    out["meta_rubric"] = rec["meta_rubric"]
    out["provenance"] = {"drafted_by": {"model": rec["model"], "settings_hash": rec["settings_hash"],
                                        "template_hash": rec["template_hash"]}}
    return out


def _check_inputs(questions, evidence, spec: DraftSpec, questions_path) -> None:
    problems = [Problem(str(questions_path), None, "question_id",
                        f"no evidence for question {q.question_id!r}; every question needs snippets")
                for q in questions if not evidence.get(q.question_id)]
    _, problem = resolve_model_path(spec.model)
    if problem:
        problems.append(problem)
    if problems:
        raise InputError(problems)


@dataclass(frozen=True)
class DraftSummary:
    """What `draft` did: questions in, drafted now or before, valid; the failed ids kept in the log."""

    questions: int
    drafted: int
    already_done: int
    valid: int
    failed: tuple[str, ...]
    out: Path
    log: Path
    engine_log: Path | None = None  # where the engine's own output went; None: no engine, or verbose


def draft(questions_path: str | Path, evidence_path: str | Path, config_path: str | Path,
          out: str | Path, *, chunk_size: int | None = None, console: Console | None = None,
          progress=None, open_engine=load_and_close, verbose: bool = False) -> DraftSummary:
    """Draft a meta-rubric for every question still without one in the log (resumes).
    `verbose`: the engine prints its own output on the console instead of the engine log."""
    console = console or plain_console(stderr=True)
    spec = load_authoring_config(config_path, DraftSpec)
    questions = load_questions_to_draft(questions_path)
    evidence = load_evidence(evidence_path, spec.max_snippet_chars)
    _check_inputs(questions, evidence, spec, questions_path)
    log = drafts_log_path(out)
    h = draft_settings_hash(spec)
    done = done_keys_checked([log], lambda r: (r["question_id"],), {"settings_hash": h}, "draft", own=log)
    pending = [q for q in questions if (q.question_id,) not in done]
    size, engine_log = chunk_size or spec.chunk_size, None
    if pending:
        engine_log = route_engine_logs(Path(out).parent, "draft", verbose)  # no run directory: `out`'s
        with progress_bars(console, progress) as bars, naming_the_log(spec.model.name), \
                open_engine(spec.model) as engine:
            task = bars.add_task(f"draft {spec.model.name}", total=len(pending))
            for s in range(0, len(pending), size):
                chunk = pending[s:s + size]
                append_jsonl(log, draft_chunk(engine, spec, chunk, evidence, h))
                bars.advance(task, len(chunk))
    latest = {r["question_id"]: r for _, r in read_jsonl(log, allow_empty=True)} if log.exists() else {}
    mine = [(q, latest[q.question_id]) for q in questions if q.question_id in latest]
    write_jsonl(out, [drafted_question(q, r, spec) for q, r in mine if r["valid"]])
    failed = [r["question_id"] for _, r in mine if not r["valid"]]
    return DraftSummary(questions=len(questions), drafted=len(pending), already_done=len(questions) - len(pending),
                        valid=len(mine) - len(failed), failed=tuple(failed), out=Path(out), log=log,
                        engine_log=engine_log)
