"""Deterministic rubric checks, run before any judge compute is spent (`gamut-local lint`).

Each rule is one function of a question (or of the whole dataset) that returns findings;
`RULES` lists them. The duplicate rule's near-duplicate search runs over a whole batch of
questions at once (`rubric.near_duplicates`), so `lint_batch` hands each question its share.
A finding prints as `FILE:LINE: field: severity: message [rule]`.
Errors make `lint` exit 1; warnings are the paper's guidance, worth a look.

The numbers the balance rules compare with are the paper's: about 15.2 checks per question,
5.9 answer-critical, 5.8 valuable and 3.5 context.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from itertools import accumulate

from gamut_local.rubric.compiler import checks_for
from gamut_local.rubric.near_duplicates import first_near_duplicates
from gamut_local.rubric.schema import FlexibleList, Process, Relationship, Simple, StrictList
from gamut_local.vocab import TIERS

PAPER_CHECKS = 15.2
PAPER_TIER_CHECKS = {"answer_critical": 5.9, "valuable": 5.8, "context": 3.5}
FAR = 2.5  # a question's check count outside [mean / FAR, mean * FAR] is "far" from the paper's
FAR_DATASET = 2.0  # the dataset's per-tier means, likewise
NEAR_DUPLICATE = 0.85  # content-word Jaccard at or above which two checks say the same
ERROR, WARNING = "error", "warning"
_PRONOUN_START = re.compile(r"^(it|this|that|they|these|those|he|she)\b", re.IGNORECASE)
_SENTENCES = re.compile(r"[.!?]\s+[A-Z]")


@dataclass(frozen=True)
class Finding:
    file: str
    line: int | None
    field: str
    severity: str
    rule: str
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.field or '<record>'}: {self.severity}: {self.message} [{self.rule}]"


def _check_fields(question, checks) -> dict[str, str]:
    """check_id -> the field a finding about it points at (its source item, or its place)."""
    if question.checks:
        return {c.check_id: f"checks.{i}" for i, c in enumerate(question.checks)}
    index = {item.id: i for i, item in enumerate(question.meta_rubric.items)}
    return {c.check_id: f"meta_rubric.items.{index[c.source_item]}" for c in checks}


def _normalised(texts: list[str]) -> list[str]:
    """Each text lower-cased, its runs of white space one space, none at the ends: what two
    checks must share to say the same word for word."""
    return [" ".join(t.lower().split()) for t in texts]


def duplicate_checks(question, checks, near: dict[int, int]):
    """Two checks with the same text (error), or with nearly the same words (warning): `near`,
    check j -> the first earlier check i it nearly repeats (`near_duplicates`). Checks compiled
    from one item are alike by design ("mentions X as one of ..."), so near-duplicates are only
    sought between items."""
    norms = _normalised([c.text for c in checks])
    if not near and len(set(norms)) == len(norms):  # the usual case: nothing to say (and no loop)
        return
    fields, seen = _check_fields(question, checks), {}
    for j, (c, norm) in enumerate(zip(checks, norms)):
        cid = c.check_id
        if norm in seen:
            yield fields[cid], ERROR, f"check {cid!r} repeats check {seen[norm]!r} word for word"
            continue
        seen[norm] = cid
        if j in near:
            yield fields[cid], WARNING, f"check {cid!r} nearly repeats check {checks[near[j]].check_id!r}"


def no_subject(question, checks):
    """Checks must be self-contained: an item without `subject` compiles to checks that say
    "the required elements" or "the process" and name nothing a judge can place."""
    if question.meta_rubric is not None:
        for i, item in enumerate(question.meta_rubric.items):
            if not isinstance(item, Relationship) and not (item.subject or "").strip():
                yield f"meta_rubric.items.{i}.subject", WARNING, \
                    f"item {item.id!r} has no subject, so its checks name no subject"
    for i, c in enumerate(question.checks or []):
        if _PRONOUN_START.match(c.text.strip()):
            yield f"checks.{i}.text", WARNING, f"check {c.check_id!r} starts with a pronoun and names no subject"


def _joins_facts(text: str) -> bool:
    return ";" in text or " as well as " in text or bool(_SENTENCES.search(text.strip()))


def joined_facts(question, checks):
    """One check, one fact: a fact, element or step with several sentences, a semicolon or
    "as well as" makes a judge grade two things as one."""
    if question.meta_rubric is not None:
        for i, item in enumerate(question.meta_rubric.items):
            parts = []
            if isinstance(item, Simple):
                parts = [("fact", item.fact)]
            elif isinstance(item, StrictList):
                parts = [(f"elements.{k}", e) for k, e in enumerate(item.elements)]
            elif isinstance(item, Process):
                parts = [(f"steps.{k}.text", s.text) for k, s in enumerate(item.steps)]
            for where, text in parts:
                if _joins_facts(text):
                    yield f"meta_rubric.items.{i}.{where}", WARNING, \
                        f"item {item.id!r} joins several facts in one; split them into separate items"
    for i, c in enumerate(question.checks or []):
        if c.kind == "given" and _joins_facts(c.text):
            yield f"checks.{i}.text", WARNING, f"check {c.check_id!r} joins several facts; split it"


def redundant_options(question, checks):
    """A flexible list that requires every option is a strict list: its per-option checks
    (one tier down) repeat what the coverage check already demands."""
    for i, item in enumerate(question.meta_rubric.items if question.meta_rubric else []):
        if isinstance(item, FlexibleList) and item.min_required == len(item.options):
            yield f"meta_rubric.items.{i}.min_required", WARNING, \
                (f"item {item.id!r} requires all {len(item.options)} options, so its per-option checks "
                 f"are redundant; make it a strict_list or lower min_required")


def one_step_process(question, checks):
    for i, item in enumerate(question.meta_rubric.items if question.meta_rubric else []):
        if isinstance(item, Process) and len(item.steps) == 1:
            yield f"meta_rubric.items.{i}.steps", WARNING, \
                f"item {item.id!r} is a process with one step, which orders nothing; make it a simple item"


def no_evidence(question, checks):
    """The paper grounds every item in web evidence; an uncited item cannot be audited."""
    for i, item in enumerate(question.meta_rubric.items if question.meta_rubric else []):
        if not item.evidence:
            yield f"meta_rubric.items.{i}.evidence", WARNING, f"item {item.id!r} cites no evidence"
    for i, c in enumerate(question.checks or []):
        if not c.evidence:
            yield f"checks.{i}.evidence", WARNING, f"check {c.check_id!r} cites no evidence"


def _entity_names(question) -> list[str]:
    """What the image shows, by name: the heads of the snippet titles ("Espresso" of
    "Espresso (encyclopedia article)") and the capitalised names the text-only question uses."""
    names = []
    for s in (question.meta_rubric.snippets if question.meta_rubric else []):
        head = re.split(r"\s[(\[]|:|\s[-–—]\s", s.title)[0].strip()
        if len(head) >= 4 and not head.lower().startswith("list of"):
            names.append(head)
    if question.question_text_only:
        # Capitalised runs not at the start of a sentence: proper names ("Golden Gate Bridge").
        for m in re.finditer(r"(?<![.?!]\s)(?<!^)\b([A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)*)", question.question_text_only):
            if len(m.group(1)) >= 4:
                names.append(m.group(1))
    return names


def stranger_test(question, checks):
    """The paper's stranger test: a multimodal question refers to the image generically
    ("this drink"); a question that names the entity can be answered without looking."""
    if question.image is None and question.question_text_only is None:
        return
    if question.question_text_only and question.question.strip() == question.question_text_only.strip():
        yield "question", ERROR, "question is the same as question_text_only; refer to the image generically"
        return
    for name in _entity_names(question):
        if re.search(rf"\b{re.escape(name)}\b", question.question, flags=re.IGNORECASE):
            yield "question", ERROR, (f"question names {name!r}, which the image should show (stranger test): "
                                      f"refer to it generically, e.g. 'this ...'")
            return


def check_count(question, checks):
    """Per question: a check count far from the paper's 15.2, or no answer-critical check."""
    n = len(checks)
    if not PAPER_CHECKS / FAR <= n <= PAPER_CHECKS * FAR:
        yield "", WARNING, f"{n} checks, far from the paper's mean of {PAPER_CHECKS}"
    if not any(c.tier == "answer_critical" for c in checks):
        yield "", WARNING, "no answer_critical check: the rubric names nothing an answer must have"


RULES = (duplicate_checks, no_subject, joined_facts, redundant_options, one_step_process, no_evidence,
         stranger_test, check_count)  # duplicate_checks also takes the batch's near-duplicates


def near_duplicates(checks_per_question: list[list]) -> list[dict[int, int]]:
    """Per question, check j -> the first earlier check of another item it nearly repeats: one
    search over all the questions' checks, each question its own scope."""
    flat = [c for checks in checks_per_question for c in checks]
    scopes = [q for q, checks in enumerate(checks_per_question) for _ in checks]
    found = first_near_duplicates([c.text for c in flat], [c.source_item for c in flat],
                                  NEAR_DUPLICATE, scopes)
    starts = list(accumulate((len(c) for c in checks_per_question), initial=0))
    out: list[dict[int, int]] = [{} for _ in checks_per_question]
    for j, i in found.items():
        q = scopes[j]
        out[q][j - starts[q]] = i - starts[q]
    return out


def lint_batch(entries, file: str) -> list[tuple[list[Finding], Counter]]:
    """Per (question, line) of `entries`: its findings, rule by rule, and its checks per tier
    (for `tier_balance`). Each question is compiled once; the near-duplicate search is one
    search over the batch."""
    entries = list(entries)
    checks_per_question = [checks_for(q) for q, _ in entries]
    near_per_question = near_duplicates(checks_per_question)
    by_rule = [{rule: list(rule(question, checks)) for rule in RULES if rule is not duplicate_checks}
               for (question, _), checks in zip(entries, checks_per_question)]
    out = []
    for (question, line), checks, near, found in zip(entries, checks_per_question, near_per_question, by_rule):
        found[duplicate_checks] = list(duplicate_checks(question, checks, near))
        out.append(([Finding(file, line, field, severity, rule.__name__, message)
                     for rule in RULES for field, severity, message in found[rule]],
                    Counter(c.tier for c in checks)))
    return out


def lint_question(question, file: str, line: int | None) -> list[Finding]:
    """Every rule on one question."""
    return lint_batch([(question, line)], file)[0][0]


def tier_balance(counts: dict[str, int], n_questions: int, file: str) -> list[Finding]:
    """Dataset level: mean checks per tier (`counts` over `n_questions`) far from the paper's
    5.9 / 5.8 / 3.5."""
    if not n_questions:
        return []
    out = []
    for t in TIERS:
        mean = counts.get(t, 0) / n_questions
        want = PAPER_TIER_CHECKS[t]
        if not want / FAR_DATASET <= mean <= want * FAR_DATASET:
            out.append(Finding(file, None, "<dataset>", WARNING, "tier_balance",
                               f"{mean:.1f} {t} checks per question, far from the paper's {want}"))
    return out


def with_tier_balance(per_question, file: str) -> list[Finding]:
    """Each question's findings in order, then the dataset's tier balance: `per_question`
    gives (findings, checks per tier) for each question, as `lint_batch` does."""
    findings, counts, n = [], Counter(), 0
    for found, tiers in per_question:
        findings += found
        counts.update(tiers)
        n += 1
    return findings + tier_balance(counts, n, file)


BATCH = 1000  # questions compiled and searched together: their checks are held only that long


def lint_questions(entries, file: str) -> list[Finding]:
    """`entries`: (question, line) pairs of one dataset file, linted BATCH at a time (each
    question is its own scope, so the batches find what one batch would)."""
    entries = list(entries)
    return with_tier_balance((found for k in range(0, len(entries), BATCH)
                              for found in lint_batch(entries[k:k + BATCH], file)), file)
