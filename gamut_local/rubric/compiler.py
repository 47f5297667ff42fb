"""The deterministic compiler: meta-rubric -> flat list of self-contained checks.

Fixed rules, no model. T is the item's tier, D one tier lower (context stays context):

=============  ==============================================================================
item           checks
=============  ==============================================================================
simple         1 at T
strict_list    1 per element at T
flexible_list  1 coverage check at T ("covers at least N of: ..."); then, with P options,
               1 per option at D if P <= small_pool_max, else 1 coverage check at D per
               threshold (``extra_thresholds``, or each distinct min(2N, P), min(3N, P) > N)
process        1 per required step at T, 1 per optional step at D; 1 order check over the
               required steps at T if there are >= 2; 1 full-order check over all steps at D
               if ``check_full_order`` and there is >= 1 optional step
relationship   1 at T that the entities are identified and related, 1 per aspect at T
meta_insight   1 at T, on any list or process that carries one
=============  ==============================================================================

Each check is one sentence whose frame is fixed and whose item text (a fact, element, option,
step, aspect or insight) comes after a colon, so it reads well whatever form that text has (a
noun phrase, a clause, an instruction); subjects and entities are noun phrases, and a list's
subject gets "the" where it has no determiner ("one of the practical tips ...").

A check's id is ``<item id>.<rule>[.<n>]``, built from the item alone (n is a 1-based
position, or the threshold value), so adding or editing one item never renames the checks of
another. Same input, same checks, byte for byte.
"""

from __future__ import annotations

from gamut_local.rubric.schema import (
    Check,
    FlexibleList,
    MetaRubric,
    Process,
    Relationship,
    Simple,
    StrictList,
)
from gamut_local.vocab import SMALL_POOL_MAX, demote


def _listing(values: list[str]) -> str:
    return "; ".join(v.rstrip(". ") for v in values)


def _numbered(values: list[str]) -> str:
    return " ".join(f"({i}) {v.rstrip('. ')}" for i, v in enumerate(values, start=1))


# Words that already make a noun phrase definite or counted: no "the" before them.
_DETERMINERS = frozenset("the a an this that these those its their his her our your my each every all some any "
                         "both no".split())


def _definite(phrase: str) -> str:
    """`phrase` with "the" in front unless it starts with a determiner or a possessive
    ("Hubble's images", "Eileen Collins's firsts"): "one of the practical tips", never "one
    of practical tips" or "one of the the tips"."""
    words = phrase.split()
    if words[0] != words[0].lower() and words[0].lower() in _DETERMINERS:  # "one of the main parts"
        return words[0].lower() + phrase[len(words[0]):]
    if words[0].lower() in _DETERMINERS or any(w.endswith(("'s", "s'", "’s")) for w in words[:3]):
        return phrase
    return f"the {phrase}"


def _check(item, rule: str, text: str, tier: str, n: int | None = None) -> Check:
    suffix = rule if n is None else f"{rule}.{n}"
    return Check(check_id=f"{item.id}.{suffix}", text=text, tier=tier, kind=rule, source_item=item.id,
                 evidence=list(item.evidence))


def _simple(item: Simple, about: str) -> list[Check]:
    return [_check(item, "fact", f"The response states the following{about}: {item.fact.rstrip('. ')}.",
                   item.tier)]


def _strict_list(item: StrictList) -> list[Check]:
    what = _definite(item.subject or "required elements")
    return [_check(item, "element", f"The response mentions the following as one of {what}: {e.rstrip('. ')}.",
                   item.tier, i) for i, e in enumerate(item.elements, start=1)]


def _coverage(item: FlexibleList, n: int) -> str:
    what = item.subject or "the valid options"
    return (f"The response covers at least {n} of the following {len(item.options)} "
            f"possibilities for {what}: {_listing(item.options)}.")


def _flexible_list(item: FlexibleList, small_pool_max: int) -> list[Check]:
    low = demote(item.tier)
    checks = [_check(item, "coverage", _coverage(item, item.min_required), item.tier)]
    p, n = len(item.options), item.min_required
    if p <= small_pool_max:
        what = _definite(item.subject or "valid options")
        checks += [_check(item, "option", f"The response mentions the following as one of {what}: "
                          f"{o.rstrip('. ')}.", low, i) for i, o in enumerate(item.options, start=1)]
    else:
        thresholds = item.extra_thresholds or sorted({t for t in (min(2 * n, p), min(3 * n, p)) if t > n})
        checks += [_check(item, "coverage", _coverage(item, t), low, t) for t in thresholds]
    return checks


def _process(item: Process) -> list[Check]:
    low = demote(item.tier)
    what = item.subject or "the process"
    checks = [_check(item, "step", f"In describing {what}, the response includes this step: "
                     f"{s.text.rstrip('. ')}.", item.tier if s.required else low, i)
              for i, s in enumerate(item.steps, start=1)]
    required = [s.text for s in item.steps if s.required]
    if len(required) >= 2:
        checks.append(_check(item, "order", f"In describing {what}, the response presents these steps "
                             f"in this order: {_numbered(required)}.", item.tier))
    if item.check_full_order and len(required) < len(item.steps):
        checks.append(_check(item, "full_order", f"In describing {what}, the response presents all of "
                             f"these steps in this order: {_numbered([s.text for s in item.steps])}.", low))
    return checks


def _relationship(item: Relationship) -> list[Check]:
    names = _and(item.entities)
    regarding = f" with respect to {item.subject}" if item.subject else ""
    checks = [_check(item, "relation", f"The response identifies {names} and explains how they relate{regarding}.",
                     item.tier)]
    checks += [_check(item, "aspect", f"In relating {names}, the response addresses this point: {a.rstrip('. ')}.",
                      item.tier, i) for i, a in enumerate(item.aspects, start=1)]
    return checks


def _and(values: list[str]) -> str:
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " and " + values[-1]


def compile_item(item, small_pool_max: int = SMALL_POOL_MAX) -> list[Check]:
    """An item's checks, in the order of the table above."""
    about = f" about {item.subject}" if item.subject else ""
    if isinstance(item, Simple):
        checks = _simple(item, about)
    elif isinstance(item, StrictList):
        checks = _strict_list(item)
    elif isinstance(item, FlexibleList):
        checks = _flexible_list(item, small_pool_max)
    elif isinstance(item, Process):
        checks = _process(item)
    elif isinstance(item, Relationship):
        checks = _relationship(item)
    else:  # the schema's discriminated union makes this unreachable for validated input
        raise TypeError(f"unknown item type {type(item).__name__}")
    insight = getattr(item, "meta_insight", None)
    if insight:
        checks.append(_check(item, "meta_insight", f"The response conveys this overall insight{about}: "
                             f"{insight.rstrip('. ')}.", item.tier))
    return checks


def compile_meta_rubric(meta_rubric: MetaRubric, small_pool_max: int = SMALL_POOL_MAX) -> list[Check]:
    """Every item's checks, in item order."""
    return [c for item in meta_rubric.items for c in compile_item(item, small_pool_max)]


def checks_for(question, small_pool_max: int = SMALL_POOL_MAX) -> list[Check]:
    """What gets judged: the question's given `checks` if present, else its compiled meta-rubric."""
    if question.checks:
        return list(question.checks)
    return compile_meta_rubric(question.meta_rubric, small_pool_max)


def compile_dataset(questions, small_pool_max: int = SMALL_POOL_MAX) -> list[dict]:
    """One row per question: `question_id` and its checks as plain dicts (with evidence), and
    `checks_text_only` where the question's text-only variant is graded on its own checks."""
    rows = []
    for q in questions:
        checks = checks_for(q, small_pool_max)
        row = {"question_id": q.question_id, "checks": [c.model_dump() for c in checks]}
        if getattr(q, "checks_text_only", None):
            row["checks_text_only"] = [c.model_dump() for c in q.checks_text_only]
        rows.append(row)
    return rows
