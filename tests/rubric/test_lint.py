"""Lint: a corpus of bad rubrics, each with the exact line it must give; the CLI's exit code;
the release parquet."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gamut_local.data.records import Question
from gamut_local.rubric.lint import lint_question, lint_questions
from gamut_local.demo.authoring import sample_records

SNIPPETS = [{"id": "s1", "title": "Espresso (encyclopedia article)", "text": "Espresso is coffee."},
            {"id": "s2", "title": "Crema", "text": "Crema is foam."}]


def _question(*items, question="What is this drink?", text_only="What is an espresso?", **extra) -> Question:
    rec = {"question_id": "q1", "domain": "food", "question": question, "question_text_only": text_only,
           "image": "cup.png", "meta_rubric": {"items": list(items), "snippets": SNIPPETS}, **extra}
    return Question.model_validate(rec)


def _simple(i, fact, tier="answer_critical", subject="the drink", evidence=("s1",)):
    return {"id": i, "type": "simple", "tier": tier, "fact": fact, "subject": subject, "evidence": list(evidence)}


GOOD = [_simple("a", "it is an espresso"), _simple("b", "the foam is crema", tier="valuable"),
        _simple("c", "it comes from Italy", tier="context")]

# (name, extra items or question changes, the exact line lint must print for it)
CORPUS = [
    ("exact duplicate", dict(items=[_simple("d", "it is an espresso")]),
     "bad.jsonl:1: meta_rubric.items.3: error: check 'd.fact' repeats check 'a.fact' word for word "
     "[duplicate_checks]"),
    ("near duplicate", dict(items=[_simple("d", "it is espresso")]),
     "bad.jsonl:1: meta_rubric.items.3: warning: check 'd.fact' nearly repeats check 'a.fact' "
     "[duplicate_checks]"),
    ("no subject", dict(items=[{"id": "d", "type": "strict_list", "tier": "valuable",
                                "elements": ["water", "coffee"], "evidence": ["s1"]}]),
     "bad.jsonl:1: meta_rubric.items.3.subject: warning: item 'd' has no subject, so its checks name no "
     "subject [no_subject]"),
    ("joined facts", dict(items=[_simple("d", "it is bitter; it is hot", tier="context")]),
     "bad.jsonl:1: meta_rubric.items.3.fact: warning: item 'd' joins several facts in one; split them "
     "into separate items [joined_facts]"),
    ("two sentences", dict(items=[_simple("d", "It is bitter. It is hot", tier="context")]),
     "bad.jsonl:1: meta_rubric.items.3.fact: warning: item 'd' joins several facts in one; split them "
     "into separate items [joined_facts]"),
    ("threshold requires every option", dict(items=[{"id": "d", "type": "flexible_list", "tier": "valuable",
                                                    "subject": "espresso drinks", "options": ["latte", "mocha"],
                                                    "min_required": 2, "evidence": ["s1"]}]),
     "bad.jsonl:1: meta_rubric.items.3.min_required: warning: item 'd' requires all 2 options, so its "
     "per-option checks are redundant; make it a strict_list or lower min_required [redundant_options]"),
    ("one-step process", dict(items=[{"id": "d", "type": "process", "tier": "valuable", "subject": "brewing",
                                      "steps": [{"text": "press the button"}], "evidence": ["s1"]}]),
     "bad.jsonl:1: meta_rubric.items.3.steps: warning: item 'd' is a process with one step, which orders "
     "nothing; make it a simple item [one_step_process]"),
    ("item without evidence", dict(items=[_simple("d", "it is served hot", tier="context", evidence=())]),
     "bad.jsonl:1: meta_rubric.items.3.evidence: warning: item 'd' cites no evidence [no_evidence]"),
    ("stranger test, snippet title", dict(question="How is this espresso made?"),
     "bad.jsonl:1: question: error: question names 'Espresso', which the image should show (stranger "
     "test): refer to it generically, e.g. 'this ...' [stranger_test]"),
    ("stranger test, proper name", dict(question="Is this drink from Italy?", text_only="Is an espresso from Italy?"),
     "bad.jsonl:1: question: error: question names 'Italy', which the image should show (stranger "
     "test): refer to it generically, e.g. 'this ...' [stranger_test]"),
    ("stranger test, same text", dict(question="What is an espresso?"),
     "bad.jsonl:1: question: error: question is the same as question_text_only; refer to the image "
     "generically [stranger_test]"),
    ("no answer-critical check", dict(replace=[_simple("b", "the foam is crema", tier="valuable"),
                                               _simple("c", "it comes from Italy", tier="context"),
                                               _simple("e", "it is strong", tier="context")]),
     "bad.jsonl:1: <record>: warning: no answer_critical check: the rubric names nothing an answer must "
     "have [check_count]"),
]


def _build(change: dict) -> Question:
    items = copy.deepcopy(change.get("replace", GOOD)) + copy.deepcopy(change.get("items", []))
    kw = {k: change[k] for k in ("question",) if k in change}
    if "text_only" in change:
        kw["text_only"] = change["text_only"]
    return _question(*items, **kw)


@pytest.mark.parametrize("name,change,line", CORPUS, ids=[c[0] for c in CORPUS])
def test_each_bad_rubric_gives_its_message(name, change, line):
    got = [str(f) for f in lint_question(_build(change), "bad.jsonl", 1)]
    assert line in got, "\n".join(got)


def test_the_good_rubric_has_no_finding_but_its_size():
    got = lint_question(_question(*GOOD), "good.jsonl", 1)
    assert [(f.rule, f.severity) for f in got] == [("check_count", "warning")]  # 3 checks, paper ~15
    assert str(got[0]) == "good.jsonl:1: <record>: warning: 3 checks, far from the paper's mean of 15.2 [check_count]"


def test_given_checks_with_pronouns_joins_and_no_evidence():
    q = Question.model_validate({"question_id": "q", "domain": "d", "question": "What is this?", "checks": [
        {"check_id": "c1", "text": "It is an espresso.", "tier": "answer_critical"},
        {"check_id": "c2", "text": "The response says the drink is hot; and bitter.", "tier": "valuable",
         "evidence": ["x"]}]})
    got = [str(f) for f in lint_question(q, "g.jsonl", 7)]
    assert "g.jsonl:7: checks.0.text: warning: check 'c1' starts with a pronoun and names no subject [no_subject]" in got
    assert "g.jsonl:7: checks.1.text: warning: check 'c2' joins several facts; split it [joined_facts]" in got
    assert "g.jsonl:7: checks.0.evidence: warning: check 'c1' cites no evidence [no_evidence]" in got
    assert not any("checks.1.evidence" in g for g in got)


def test_tier_balance_is_judged_on_the_whole_dataset():
    q = _question(*GOOD)
    got = [str(f) for f in lint_questions([(q, 1), (q.model_copy(update={"question_id": "q2"}), 2)], "d.jsonl")]
    assert "d.jsonl: <dataset>: warning: 1.0 answer_critical checks per question, far from the paper's 5.9 [tier_balance]" in got
    assert "d.jsonl: <dataset>: warning: 1.0 valuable checks per question, far from the paper's 5.8 [tier_balance]" in got
    # 1.0 context checks is within a factor 2 of 3.5? No: 3.5 / 2 = 1.75 > 1.0, so it is flagged too.
    assert sum("tier_balance" in g for g in got) == 3


def test_sample_rubric_passes_every_error_rule():
    qs = [Question.model_validate(r) for r in sample_records()]
    errors = [str(f) for i, q in enumerate(qs, 1) for f in lint_question(q, "s.jsonl", i) if f.severity == "error"]
    assert errors == []
    lawn = next(q for q in qs if q.question_id == "plants-lawn")  # once said "my lawn"
    named = lawn.model_copy(update={"question": "This is a close-up of my lawn. How should I care for it?"})
    assert [f.rule for f in lint_question(named, "s.jsonl", 7) if f.severity == "error"] == ["stranger_test"]


def test_cli_prints_findings_and_exits_1_on_errors(tmp_path, gamut):
    bad = {**_build(CORPUS[0][1]).model_dump(exclude_none=True), "question_id": "q2"}
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(_question(*GOOD).model_dump(exclude_none=True)) + "\n" + json.dumps(bad) + "\n")
    result = gamut("lint", path)
    assert result.exit_code == 1, result.output
    assert f"{path}:2: meta_rubric.items.3: error: check 'd.fact' repeats check 'a.fact' word for word" in result.output
    assert f"{path}: 1 error(s)," in result.output
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(_question(*GOOD).model_dump(exclude_none=True)) + "\n")
    assert gamut("lint", good).exit_code == 0
    assert gamut("lint", good, "--strict").exit_code == 1  # its size warning now counts


def test_cli_lints_the_release_parquet(tmp_path, gamut):
    pytest.importorskip("pyarrow")
    from tests.support.release import write_release

    path = write_release(tmp_path / "release.parquet")
    result = gamut("lint", path)
    assert result.exit_code in (0, 1), result.output
    assert f"{path}: " in result.output and "error(s)" in result.output
    assert "Traceback" not in result.output


def _pairs_of(question):
    from gamut_local.rubric.compiler import checks_for

    checks = checks_for(question)
    return [c.text for c in checks], [c.source_item for c in checks]


def test_the_indexed_near_duplicate_search_finds_what_all_pairs_find():
    """On the lint corpus, the sample and one dataset of all of them pooled (many near pairs
    across items), at the rule's threshold and others: the same pairs as comparing every one."""
    import random

    from gamut_local.rubric.lint import NEAR_DUPLICATE
    from gamut_local.rubric.near_duplicates import content_words, first_near_duplicates
    from tests.support.authoring import all_pairs_near_duplicates

    questions = [_build(change) for _, change, _ in CORPUS] + \
        [Question.model_validate(r) for r in sample_records()]
    cases = [_pairs_of(q) for q in questions]
    pooled = [pair for words, groups in cases for pair in zip(words, groups)]
    random.Random(0).shuffle(pooled)
    cases.append(([w for w, _ in pooled], [g for _, g in pooled]))
    found = 0
    for texts, groups in cases:
        for t in (NEAR_DUPLICATE, 0.5, 0.3, 1.0):
            want = all_pairs_near_duplicates([content_words(x) for x in texts], groups, t)
            assert first_near_duplicates(texts, groups, t) == want
            found += len(want)
    assert found > 50  # the corpus has near pairs to find, so the comparison means something


ODD_TEXTS = ["alpha beta gamma", "alpha beta gamma delta", "", "the of and", "Ünïcode wörds here",
             "x\x00y z", "alpha, beta!", "GAMMA beta alpha", "3 4 5", "3-4-5 6", "İstanbul KELVIN \u212a",
             "tab\tand\nnew line", "ﬁne ligature", "  spaced   out  "]


def test_the_words_split_in_c_are_the_words_split_in_python(monkeypatch):
    """pyarrow's split and numbering (ASCII texts) and the one-by-one path (any other text)
    give each text exactly `content_words`, numbered consistently: compared by where each word
    occurs (the texts that hold it), which is all the search uses of a word."""
    import random
    from collections import Counter

    from gamut_local.rubric import near_duplicates
    from gamut_local.rubric.near_duplicates import content_words, word_ids

    monkeypatch.setattr(near_duplicates, "PYARROW_FROM", 0)  # pyarrow for every ASCII batch, however small

    def shape(per_text: list[set]) -> list[Counter]:
        where: dict = {}
        for k, ws in enumerate(per_text):
            for w in ws:
                where.setdefault(w, set()).add(k)
        return [Counter(frozenset(where[w]) for w in ws) for ws in per_text]

    rng = random.Random(1)
    batches = [ODD_TEXTS, [t for t in ODD_TEXTS if t.isascii() and "\x00" not in t], [],
               *([rng.choice(ODD_TEXTS) for _ in range(rng.randint(1, 9))] for _ in range(50))]
    for texts in batches:
        owner, ids = word_ids(texts)
        assert list(zip(owner.tolist(), ids.tolist())) == sorted(set(zip(owner.tolist(), ids.tolist())))
        got = [set() for _ in texts]
        for k, i in zip(owner.tolist(), ids.tolist()):
            got[k].add(i)
        assert shape(got) == shape([content_words(t) for t in texts]), texts


@pytest.mark.parametrize("pyarrow_from", [0, 10**9], ids=["pyarrow", "python"])
def test_a_search_over_many_questions_pairs_only_within_each(monkeypatch, pyarrow_from):
    """With scopes (a chunk of questions at once, as lint does), texts of different scopes are
    never paired: the same as searching each question alone; and on random odd texts, the same
    as comparing every pair."""
    import random

    from gamut_local.rubric import near_duplicates
    from gamut_local.rubric.near_duplicates import content_words, first_near_duplicates
    from tests.support.authoring import all_pairs_near_duplicates

    monkeypatch.setattr(near_duplicates, "PYARROW_FROM", pyarrow_from)
    rng = random.Random(0)
    questions = [[rng.choice(ODD_TEXTS) for _ in range(rng.randint(0, 12))] for _ in range(60)]
    groups = [[rng.choice(["a", "b", None]) for _ in q] for q in questions]
    for t in (0.85, 0.5, 1.0):
        alone = [all_pairs_near_duplicates([content_words(x) for x in q], g, t) for q, g in zip(questions, groups)]
        assert [first_near_duplicates(q, g, t) for q, g in zip(questions, groups)] == alone
        flat = [x for q in questions for x in q]
        scopes = [k for k, q in enumerate(questions) for _ in q]
        together = first_near_duplicates(flat, [g for gs in groups for g in gs], t, scopes)
        starts = [sum(map(len, questions[:k])) for k in range(len(questions))]
        assert together == {starts[k] + j: starts[k] + i for k, found in enumerate(alone) for j, i in found.items()}
        assert sum(map(len, alone)) > 20


def test_near_duplicates_of_many_items_are_found_and_named():
    """A rubric of 2,000 items, every tenth a rewording of an earlier item: each is named, with
    the item it repeats (what all pairs finds), and nothing else is."""
    items = [_simple(f"i{k}", f"fact number {k} says alpha{k} beta{k} gamma{k} delta{k} epsilon{k} zeta{k}")
             for k in range(2000)]
    for k in range(10, 2000, 10):
        items[k] = _simple(f"i{k}", items[k - 7]["fact"] + " indeed")
    got = [str(f) for f in lint_question(_question(*items), "big.jsonl", 1) if f.rule == "duplicate_checks"]
    assert got == [f"big.jsonl:1: meta_rubric.items.{k}: warning: check 'i{k}.fact' nearly repeats check "
                   f"'i{k - 7}.fact' [duplicate_checks]" for k in range(10, 2000, 10)]


@pytest.mark.parametrize("fact", ["It is an  ESPRESSO", "it\tis an\nespresso", " it is an espresso",
                                  "it\u00a0is an espresso"])
def test_checks_that_differ_in_case_and_spaces_alone_repeat_word_for_word(fact):
    """Case, runs of white space (tabs, line breaks, no-break spaces) and spaces at the ends
    do not make two checks say different things."""
    q = _question(_simple("a", "it is an espresso"), _simple("x", fact), *GOOD[1:])
    got = [str(f) for f in lint_question(q, "f.jsonl", 1) if f.rule == "duplicate_checks"]
    assert got == ["f.jsonl:1: meta_rubric.items.1: error: check 'x.fact' repeats check 'a.fact' "
                   "word for word [duplicate_checks]"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.sampled_from([f"w{k}" for k in range(14)]), max_size=12).map(" ".join),
                min_size=2, max_size=40),
       st.lists(st.sampled_from(["a", "b", "c", None]), min_size=40, max_size=40),
       st.sampled_from([0.85, 0.3, 0.5, 0.6, 2 / 3, 0.75, 0.8, 0.9, 1.0]))
def test_the_search_with_its_filters_finds_what_all_pairs_find(texts, groups, t):
    """Sets of every size sharing words at every place (where the prefix and positional
    filters prune): the same pairs as comparing every one, at thresholds that land on and
    between the ratios of small counts."""
    from gamut_local.rubric.near_duplicates import content_words, first_near_duplicates
    from tests.support.authoring import all_pairs_near_duplicates

    groups = groups[:len(texts)]
    assert first_near_duplicates(texts, groups, t) == all_pairs_near_duplicates(
        [content_words(x) for x in texts], groups, t)


def test_linting_in_batches_finds_what_one_batch_finds(monkeypatch):
    """Questions are linted a batch at a time; each question is its own scope, so the batches'
    findings, and the tier balance over all of them, are those of one batch."""
    from gamut_local.rubric import lint

    entries = [(_build(change), k) for k, (_, change, _) in enumerate(CORPUS, start=1)]
    whole = lint.with_tier_balance(lint.lint_batch(entries, "bad.jsonl"), "bad.jsonl")
    monkeypatch.setattr(lint, "BATCH", 2)
    assert lint.lint_questions(entries, "bad.jsonl") == whole
    assert {f.rule for f in whole} >= {"duplicate_checks", "no_subject", "check_count"}
