"""Compiler rules per item type, edge cases, determinism and check-id stability."""

import json

import pytest

from gamut_local.rubric import compile_meta_rubric
from gamut_local.rubric.schema import MetaRubric
from gamut_local.rundir.store import dumps


def rubric(*items, snippets=()):
    return MetaRubric.model_validate({"items": list(items), "snippets": list(snippets)})


def flexible(p, n, tier="answer_critical", **kw):
    return {"id": "pool", "type": "flexible_list", "tier": tier, "subject": "uses of the plant",
            "options": [f"option {i}" for i in range(1, p + 1)], "min_required": n, **kw}


def summary(checks):
    return [(c.check_id, c.tier, c.kind) for c in checks]


def test_simple_is_one_check_at_its_tier_naming_the_subject():
    checks = compile_meta_rubric(rubric({"id": "origin", "type": "simple", "tier": "valuable",
                                         "subject": "the cappuccino", "fact": "It comes from Italy."}))
    assert summary(checks) == [("origin.fact", "valuable", "fact")]
    assert "the cappuccino" in checks[0].text and "It comes from Italy" in checks[0].text


def test_strict_list_one_check_per_element():
    checks = compile_meta_rubric(rubric({"id": "parts", "type": "strict_list", "tier": "answer_critical",
                                         "subject": "the parts of a bicycle", "elements": ["frame", "wheels"]}))
    assert summary(checks) == [("parts.element.1", "answer_critical", "element"),
                               ("parts.element.2", "answer_critical", "element")]
    assert "frame" in checks[0].text and "the parts of a bicycle" in checks[0].text


def test_flexible_small_pool_gets_per_option_checks_one_tier_lower():
    checks = compile_meta_rubric(rubric(flexible(6, 2)))
    assert summary(checks)[0] == ("pool.coverage", "answer_critical", "coverage")
    assert [c.tier for c in checks[1:]] == ["valuable"] * 6
    assert [c.check_id for c in checks[1:]] == [f"pool.option.{i}" for i in range(1, 7)]
    assert all(f"option {i}" in checks[0].text for i in range(1, 7))


def test_flexible_large_pool_gets_threshold_checks():
    checks = compile_meta_rubric(rubric(flexible(7, 2)))
    assert summary(checks) == [("pool.coverage", "answer_critical", "coverage"),
                               ("pool.coverage.4", "valuable", "coverage"),
                               ("pool.coverage.6", "valuable", "coverage")]
    assert "at least 4 of" in checks[1].text


def test_flexible_thresholds_are_distinct_and_capped_at_pool_size():
    # N=3, P=7: min(6, 7)=6 and min(9, 7)=7.
    assert [c.check_id for c in compile_meta_rubric(rubric(flexible(7, 3)))][1:] == ["pool.coverage.6", "pool.coverage.7"]
    # N=4, P=7: both thresholds collapse to 7.
    assert [c.check_id for c in compile_meta_rubric(rubric(flexible(7, 4)))][1:] == ["pool.coverage.7"]


def test_flexible_n_equals_p():
    small = compile_meta_rubric(rubric(flexible(3, 3)))
    assert len(small) == 1 + 3
    large = compile_meta_rubric(rubric(flexible(8, 8)))
    assert summary(large) == [("pool.coverage", "answer_critical", "coverage")]  # no threshold > N


def test_flexible_explicit_thresholds():
    checks = compile_meta_rubric(rubric(flexible(9, 2, extra_thresholds=[3, 9])))
    assert [c.check_id for c in checks] == ["pool.coverage", "pool.coverage.3", "pool.coverage.9"]


def test_small_pool_max_is_configurable():
    checks = compile_meta_rubric(rubric(flexible(7, 2)), small_pool_max=7)
    assert [c.kind for c in checks].count("option") == 7


def process(steps, **kw):
    return {"id": "brew", "type": "process", "tier": "answer_critical", "subject": "brewing",
            "steps": steps, **kw}


def test_process_required_optional_order_and_full_order():
    checks = compile_meta_rubric(rubric(process(
        [{"text": "grind"}, {"text": "warm the cup", "required": False}, {"text": "extract"}],
        check_full_order=True)))
    assert summary(checks) == [("brew.step.1", "answer_critical", "step"),
                               ("brew.step.2", "valuable", "step"),
                               ("brew.step.3", "answer_critical", "step"),
                               ("brew.order", "answer_critical", "order"),
                               ("brew.full_order", "valuable", "full_order")]
    assert "(1) grind (2) extract" in checks[3].text
    assert "(1) grind (2) warm the cup (3) extract" in checks[4].text


def test_process_without_optional_steps_has_no_full_order_check():
    checks = compile_meta_rubric(rubric(process([{"text": "a"}, {"text": "b"}], check_full_order=True)))
    assert [c.kind for c in checks] == ["step", "step", "order"]


def test_process_with_one_required_step_has_no_order_check():
    checks = compile_meta_rubric(rubric(process([{"text": "a"}, {"text": "b", "required": False}])))
    assert [c.kind for c in checks] == ["step", "step"]


def test_relationship_and_meta_insight():
    checks = compile_meta_rubric(rubric(
        {"id": "vs", "type": "relationship", "tier": "valuable", "entities": ["latte", "cappuccino"],
         "aspects": ["milk ratio", "foam"]},
        {"id": "l", "type": "strict_list", "tier": "context", "elements": ["x"], "meta_insight": "x is rare"}))
    assert summary(checks) == [("vs.relation", "valuable", "relation"), ("vs.aspect.1", "valuable", "aspect"),
                               ("vs.aspect.2", "valuable", "aspect"), ("l.element.1", "context", "element"),
                               ("l.meta_insight", "context", "meta_insight")]
    assert "latte and cappuccino" in checks[0].text


def test_context_items_demote_to_context():
    checks = compile_meta_rubric(rubric(flexible(4, 1, tier="context"),
                                        {**process([{"text": "a"}, {"text": "b", "required": False}]),
                                         "tier": "context"}))
    assert {c.tier for c in checks} == {"context"}


def test_evidence_and_source_item_are_carried():
    checks = compile_meta_rubric(rubric(
        {"id": "f", "type": "simple", "tier": "context", "fact": "x", "evidence": ["s1"]},
        snippets=[{"id": "s1", "title": "Source", "text": "x"}]))
    assert checks[0].evidence == ["s1"] and checks[0].source_item == "f"


def test_deterministic_byte_identical():
    items = [flexible(9, 2), process([{"text": "a"}, {"text": "b"}]),
             {"id": "s", "type": "simple", "tier": "valuable", "fact": "ü and ñ"}]
    a = "\n".join(dumps(c.model_dump()) for c in compile_meta_rubric(rubric(*items)))
    b = "\n".join(dumps(c.model_dump()) for c in compile_meta_rubric(rubric(*json.loads(json.dumps(items)))))
    assert a == b


def test_check_ids_stable_when_unrelated_item_added_or_edited():
    base = [flexible(7, 2), process([{"text": "a"}, {"text": "b"}])]
    before = {c.check_id: c.text for c in compile_meta_rubric(rubric(*base))}
    edited = [{**base[0], "subject": "something else"}, base[1],
              {"id": "new", "type": "simple", "tier": "context", "fact": "y"}]
    after = {c.check_id: c.text for c in compile_meta_rubric(rubric(*edited))}
    assert {k: v for k, v in after.items() if k.startswith("brew.")} == \
           {k: v for k, v in before.items() if k.startswith("brew.")}
    assert set(before) <= set(after)


@pytest.mark.parametrize("bad, message", [
    (flexible(3, 4), "min_required"),
    (flexible(3, 0), "min_required"),
    (flexible(9, 2, extra_thresholds=[5, 4]), "strictly increasing"),
    (flexible(9, 2, extra_thresholds=[2]), "extra_thresholds"),
    ({"id": "r", "type": "relationship", "tier": "valuable", "entities": ["one"], "aspects": ["a"]}, "entities"),
    ({"id": "s", "type": "simple", "tier": "valuable", "fact": "x", "evidence": ["nope"]}, "unknown snippet"),
    ({"id": "s", "type": "opinion", "tier": "valuable"}, "type"),
])
def test_schema_rejects_bad_items(bad, message):
    with pytest.raises(ValueError, match=message):
        rubric(bad)


# -- every compiled check is one well-formed sentence -------------------------------------------

DETERMINERS = ("the", "a", "an", "this", "that", "these", "those", "its", "their", "his", "her", "our",
               "your", "my", "each", "every", "all", "some", "any", "both", "no")


def fragments(item) -> list[str]:
    """The item's free texts (facts, elements, options, steps, aspects, insight): any form."""
    texts = [getattr(item, "fact", None), getattr(item, "meta_insight", None),
             *getattr(item, "elements", []), *getattr(item, "options", []), *getattr(item, "aspects", []),
             *[s.text for s in getattr(item, "steps", [])]]
    return [t.rstrip(". ") for t in texts if t]


def bad_forms(text: str, item_fragments: list[str]) -> list[str]:
    """What is wrong with one check's sentence; [] when it is well formed."""
    import re

    wrong = []
    frame = text.split(": ", 1)[0]
    for f in item_fragments:
        if f and f in frame:  # a free text inside the frame: "addresses <a clause>", "mentions <an order>"
            wrong.append(f"item text before the colon: {f!r}")
    if re.search(r"\b(the|a|an) (the|a|an)\b", text, re.IGNORECASE):
        wrong.append("doubled article")
    if re.search(r"\s{2,}|\s[:.,;]|\b(of|for|about|describing|relating|to|with respect to)[:.,]", text):
        wrong.append("an empty subject or stray space")
    one_of = re.search(r"\bone of (\S+(?: \S+){0,2})", frame)
    if one_of:
        words = one_of.group(1).split()
        if words[0].lower() not in DETERMINERS and not any(w.endswith("'s") for w in words):
            wrong.append(f"no determiner after 'one of': {one_of.group(1)!r}")
    if not (text[0].isupper() and text.endswith(".")) or re.search(r"\b(The|A|An)\b", frame[1:]):
        wrong.append("not one sentence (a capital or no full stop)")
    return wrong


def test_the_well_formedness_check_catches_the_known_bad_forms():
    clause = "region-based segmentation grows regions from markers"
    assert bad_forms(f"In relating a and b, the response addresses {clause}.", [clause])
    assert bad_forms("The response mentions the the walk.", [])
    assert bad_forms("The response mentions the following as one of The parts: x.", ["x"])
    assert bad_forms("The response states the following about : x.", ["x"])
    assert bad_forms("The response mentions the following as one of practical tips for a launch: go early.",
                     ["go early"])
    assert not bad_forms("The response mentions the following as one of Hubble's images: the Deep Field.",
                         ["the Deep Field"])


def _sample_items():
    from gamut_local.config import PROJECT_ROOT
    from gamut_local.data.dataset import load_questions

    questions = load_questions(PROJECT_ROOT / "gamut_local" / "data" / "sample" / "questions.jsonl",
                               check_images=False)
    return [item for q in questions if q.meta_rubric for item in q.meta_rubric.items]


def test_every_compiled_check_of_the_sample_is_a_well_formed_sentence():
    from gamut_local.rubric.compiler import compile_item

    items = _sample_items()
    checks = [(c, fragments(item)) for item in items for c in compile_item(item)]
    assert len(checks) > 150
    wrong = {c.check_id: bad_forms(c.text, f) for c, f in checks if bad_forms(c.text, f)}
    assert wrong == {}


def test_templates_read_well_whatever_form_the_item_text_has():
    """Clauses, instructions and noun phrases as elements, options and aspects; subjects with
    and without a determiner or a possessive."""
    items = rubric(
        {"id": "tips", "type": "flexible_list", "tier": "valuable", "subject": "practical tips for a launch",
         "options": ["arrive early, since roads fill up", "binoculars"], "min_required": 1},
        {"id": "firsts", "type": "strict_list", "tier": "valuable", "subject": "Eileen Collins's firsts",
         "elements": ["she was the first woman to pilot a Shuttle"]},
        {"id": "parts", "type": "strict_list", "tier": "valuable", "subject": "The main parts",
         "elements": ["a first stage"]},
        {"id": "vs", "type": "relationship", "tier": "valuable", "entities": ["regions", "edges"],
         "aspects": ["region growing copes better with gaps", "the cost"]},
        {"id": "anon", "type": "strict_list", "tier": "context", "elements": ["x"]})
    checks = compile_meta_rubric(items)
    by_item = {i.id: fragments(i) for i in items.items}
    assert {c.check_id: bad_forms(c.text, by_item[c.source_item]) for c in checks
            if bad_forms(c.text, by_item[c.source_item])} == {}
    texts = {c.check_id: c.text for c in checks}
    assert texts["tips.option.1"] == ("The response mentions the following as one of the practical tips for a "
                                      "launch: arrive early, since roads fill up.")
    assert texts["vs.aspect.1"] == ("In relating regions and edges, the response addresses this point: "
                                    "region growing copes better with gaps.")
    assert "one of Eileen Collins's firsts:" in texts["firsts.element.1"]
    assert "one of the main parts:" in texts["parts.element.1"]
    assert "one of the required elements: x." in texts["anon.element.1"]
