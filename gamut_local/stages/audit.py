"""The audit stage: the paper's self-refinement pass over drafted meta-rubrics.

For every item and each snippet it cites, the model decides through `classify` whether the
snippet supports the item's claim (label probabilities over supported / partially_supported
/ unsupported, summing to 1). An item none of whose snippets supports it is ungrounded, and
the config's `ungrounded` action applies: keep it, demote it a tier, or drop it.

Files, beside `--out AUDITED.jsonl`: `AUDITED.grounding.jsonl`, one record per (question,
item, snippet), appended in chunks and resumed like verdicts (settings hash, and the hash of
the claim graded, so an edited item is never judged by a stale record); `AUDITED.jsonl`,
the questions after the action, with `provenance.audited_by`; `AUDITED.report.md`, the
ungrounded items and the questions whose evidence covers little of their rubric; and
`logs/engine-audit.log`, the engine's own output (engines/logs.py), unless verbose.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from gamut_local.config import AuditSpec, load_authoring_config, resolve_model_path
from gamut_local.data.dataset import load_questions
from gamut_local.data.records import Question
from gamut_local.engines import load_and_close, naming_the_log, route_engine_logs
from gamut_local.errors import InputError
from gamut_local.hashing import short_hash
from gamut_local.prompts.audit import AUDIT_LABELS, AUDIT_TEMPLATE_HASH, audit_conversation
from gamut_local.reporting.progress import plain_console, progress_bars
from gamut_local.rubric.schema import FlexibleList, Process, Relationship, Simple, StrictList
from gamut_local.rundir.resume import done_keys_checked
from gamut_local.rundir.store import append_jsonl, read_jsonl, write_jsonl, write_text_atomic
from gamut_local.vocab import demote


def side_path(out: str | Path, what: str, suffix: str = ".jsonl") -> Path:
    out = Path(out)
    return out.with_name(out.name.removesuffix(".jsonl") + f".{what}{suffix}")


def item_claim(item) -> str:
    """What an item asserts, as one plain statement a snippet can support or not."""
    about = f"{item.subject}: " if item.subject else ""
    if isinstance(item, Simple):
        claim = f"{about}{item.fact}"
    elif isinstance(item, StrictList):
        claim = f"{about}these all belong: {'; '.join(item.elements)}"
    elif isinstance(item, FlexibleList):
        claim = f"{about}valid possibilities include {'; '.join(item.options)}"
    elif isinstance(item, Process):
        claim = f"{about}the steps are " + " ".join(f"({i}) {s.text}" for i, s in enumerate(item.steps, 1))
    elif isinstance(item, Relationship):
        claim = f"{about}{' and '.join(item.entities)} are related through {'; '.join(item.aspects)}"
    else:
        raise TypeError(f"unknown item type {type(item).__name__}")
    insight = getattr(item, "meta_insight", None)
    return f"{claim}. {insight}" if insight else claim


def claim_hash(claim: str, snippet_text: str) -> str:
    return short_hash(claim, snippet_text)


def audit_settings_hash(spec: AuditSpec) -> str:
    parts = (spec.model.settings_hash(), AUDIT_TEMPLATE_HASH, f"max_snippet_chars={spec.max_snippet_chars}")
    return short_hash(*parts)


def audit_requests(questions: list[Question], spec: AuditSpec) -> list[dict]:
    """One request per (question, item, cited snippet), snippet-major within a question so
    requests that share a snippet also share their prompt head."""
    out = []
    for q in questions:
        if q.meta_rubric is None:
            continue
        snippets = {s.id: s for s in q.meta_rubric.snippets}
        place = {sid: k for k, sid in enumerate(snippets)}  # not list(snippets).index: quadratic
        pairs = [(sid, item) for item in q.meta_rubric.items for sid in item.evidence]
        for sid, item in sorted(pairs, key=lambda p: place[p[0]]):
            s, claim = snippets[sid], item_claim(item)
            text = s.text[:spec.max_snippet_chars]
            out.append({"key": (q.question_id, item.id, sid), "claim_hash": claim_hash(claim, text),
                        "conversation": audit_conversation(s.title, text, claim, spec.model.system_prompt),
                        "tier": item.tier})
    return out


def grounding_record(req: dict, cls, settings_hash: str) -> dict:
    qid, item_id, sid = req["key"]
    return {"question_id": qid, "item_id": item_id, "snippet_id": sid, "tier": req["tier"],
            "label": cls.label, "probs": dict(cls.probs) if cls.probs else None, "raw": cls.raw,
            "method": cls.method, "prompt_tokens": cls.prompt_tokens,
            "num_cached_tokens": cls.num_cached_tokens, "settings_hash": settings_hash,
            "claim_hash": req["claim_hash"]}


def _key(r: dict) -> tuple:
    return (r["question_id"], r["item_id"], r["snippet_id"])


def run_audit(engine_spec: AuditSpec, requests: list[dict], log: Path, console, progress, open_engine,
              verbose: bool = False) -> tuple[int, Path | None]:
    """Classify every request not yet in the log; returns how many were already done, and the
    engine log (None: no engine loaded, or `verbose` kept its output on the console)."""
    h = audit_settings_hash(engine_spec)
    hashes = {r["key"]: r["claim_hash"] for r in requests}
    done = done_keys_checked([log], _key, {"settings_hash": h, "claim_hash": lambda r: hashes.get(_key(r))},
                             "grounding", own=log)
    pending = [r for r in requests if r["key"] not in done]
    if not pending:
        return len(requests), None
    size = engine_spec.chunk_size
    engine_log = route_engine_logs(log.parent, "audit", verbose)  # no run directory: `out`'s folder
    with progress_bars(console, progress) as bars, naming_the_log(engine_spec.model.name), \
            open_engine(engine_spec.model) as engine:
        task = bars.add_task(f"audit {engine_spec.model.name}", total=len(pending))
        for s in range(0, len(pending), size):
            chunk = pending[s:s + size]
            results = engine.classify([r["conversation"] for r in chunk], list(AUDIT_LABELS))
            append_jsonl(log, [grounding_record(r, c, h) for r, c in zip(chunk, results)])
            bars.advance(task, len(chunk))
    return len(requests) - len(pending), engine_log


def apply_action(q: Question, grounded: dict[str, bool], spec: AuditSpec,
                 settings_hash: str) -> tuple[dict, list[str]]:
    """The question record after the ungrounded-item action, and notes for the report."""
    rec = q.model_dump(exclude_defaults=True)
    notes = []
    if q.meta_rubric is not None:
        items = rec["meta_rubric"]["items"]
        bad = [it for it in items if not grounded.get(it["id"], False)]
        if spec.ungrounded == "drop" and len(bad) == len(items):
            notes.append("every item is ungrounded; none dropped (revise this rubric by hand)")
        elif spec.ungrounded == "drop":
            rec["meta_rubric"]["items"] = [it for it in items if grounded.get(it["id"], False)]
        elif spec.ungrounded == "demote":
            for it in bad:
                it["tier"] = demote(it["tier"])
    prov = dict(rec.get("provenance") or {})
    prov["audited_by"] = {"model": spec.model.name, "settings_hash": settings_hash,
                          "template_hash": AUDIT_TEMPLATE_HASH}
    rec["provenance"] = prov
    Question.model_validate(rec)  # the action never makes an invalid record
    return rec, notes


def grounded_items(q: Question, records: dict[tuple, dict], spec: AuditSpec) -> dict[str, bool]:
    ok = {"supported", "partially_supported"} if spec.partial_counts else {"supported"}
    return {item.id: any(records[(q.question_id, item.id, sid)]["label"] in ok for sid in item.evidence)
            for item in (q.meta_rubric.items if q.meta_rubric else [])}


def report_text(dataset: Path, spec: AuditSpec, rows: list[dict]) -> str:
    lines = [f"# Audit of {dataset}", "", f"Auditor: {spec.model.name}; ungrounded items: {spec.ungrounded}; "
             f"poorly covered below {spec.min_coverage:.0%} of items grounded.", "",
             "## Ungrounded items", "", "| question | item | tier | label per cited snippet |",
             "|---|---|---|---|"]
    for r in rows:
        for it in r["ungrounded"]:
            labels = it["labels"] or "cites no snippet"
            lines.append(f"| {r['question_id']} | {it['id']} | {it['tier']} | {labels} |")
    lines += ["", "## Poorly covered questions", "",
              "| question | items grounded | coverage |", "|---|---|---|"]
    for r in rows:
        if r["coverage"] is not None and r["coverage"] < spec.min_coverage:
            lines.append(f"| {r['question_id']} | {r['grounded']} of {r['items']} | {r['coverage']:.0%} |")
    notes = [f"- {r['question_id']}: {n}" for r in rows for n in r["notes"]]
    if notes:
        lines += ["", "## Notes", "", *notes]
    return "\n".join(lines) + "\n"


def _question_row(q: Question, grounded: dict[str, bool], records: dict, notes: list[str]) -> dict:
    bad = []
    for item in (q.meta_rubric.items if q.meta_rubric else []):
        if not grounded[item.id]:
            labels = ", ".join(f"{sid}: {records[(q.question_id, item.id, sid)]['label']}"
                               for sid in item.evidence)
            bad.append({"id": item.id, "tier": item.tier, "labels": labels})
    n = len(grounded)
    return {"question_id": q.question_id, "items": n, "grounded": n - len(bad), "ungrounded": bad,
            "coverage": (n - len(bad)) / n if n else None, "notes": notes}


@dataclass(frozen=True)
class AuditSummary:
    """What `audit` did: (item, snippet) pairs graded now or before, items ungrounded, the
    questions whose grounded share is under `min_coverage`, and the files written."""

    questions: int
    requests: int
    already_done: int
    ungrounded: int
    poorly_covered: tuple[str, ...]
    out: Path
    grounding: Path
    report: Path
    engine_log: Path | None = None  # where the engine's own output went; None: no engine, or verbose


def audit(dataset: str | Path, config_path: str | Path, out: str | Path, *, console: Console | None = None,
          progress=None, open_engine=load_and_close, verbose: bool = False) -> AuditSummary:
    """Ground every drafted item in the snippets it cites; write the audited dataset and report.
    `verbose`: the engine prints its own output on the console instead of the engine log."""
    console = console or plain_console(stderr=True)
    spec = load_authoring_config(config_path, AuditSpec)
    questions = load_questions(dataset, check_images=False)
    _, problem = resolve_model_path(spec.model)
    if problem:
        raise InputError([problem])
    log = side_path(out, "grounding")
    requests = audit_requests(questions, spec)
    already, engine_log = run_audit(spec, requests, log, console, progress, open_engine, verbose)
    records = {_key(r): r for _, r in read_jsonl(log, allow_empty=True)} if log.exists() else {}
    h = audit_settings_hash(spec)
    audited, rows = [], []
    for q in questions:
        grounded = grounded_items(q, records, spec)
        rec, notes = apply_action(q, grounded, spec, h)
        audited.append(rec)
        rows.append(_question_row(q, grounded, records, notes))
    write_jsonl(out, audited)
    report = side_path(out, "report", ".md")
    write_text_atomic(report, report_text(Path(dataset), spec, rows))
    return AuditSummary(questions=len(questions), requests=len(requests), already_done=already,
                        ungrounded=sum(len(r["ungrounded"]) for r in rows),
                        poorly_covered=tuple(r["question_id"] for r in rows
                                             if r["coverage"] is not None and r["coverage"] < spec.min_coverage),
                        out=Path(out), grounding=log, report=report, engine_log=engine_log)
