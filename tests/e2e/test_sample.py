"""The bundled sample benchmark: valid, covering the rubric method, fully graded, and ordered."""

import collections
import json
import re
from pathlib import Path

import pytest

import gamut_local
from gamut_local.data.dataset import load_questions
from gamut_local.data.records import (
    Answer,
    Verdict,
    answer_key,
    load_image,
    load_records,
    resolve_image,
    verdict_key,
)
from gamut_local.errors import InputError
from gamut_local.rubric import compile_dataset
from tests.support.scoring import score_files

SAMPLE = Path(gamut_local.__file__).parent / "data" / "sample"
QUESTIONS = SAMPLE / "questions.jsonl"
ANSWERS = SAMPLE / "answers" / "reference.jsonl"
GOLD = SAMPLE / "verdicts" / "gold.jsonl"
MODELS = ("reference-complete", "reference-omissive", "reference-contradicting")
ITEM_TYPES = ("simple", "strict_list", "flexible_list", "process", "relationship")


@pytest.fixture(scope="module")
def questions():
    return load_questions(QUESTIONS)


@pytest.fixture(scope="module")
def rubric(questions):
    return {row["question_id"]: row["checks"] for row in compile_dataset(questions)}


@pytest.fixture(scope="module")
def items(questions):
    return [item for q in questions if q.meta_rubric for item in q.meta_rubric.items]


def test_sample_validates_through_the_cli(gamut):
    result = gamut("validate", QUESTIONS)
    assert result.exit_code == 0, result.output
    assert "all valid" in result.output


def test_size_and_domains(questions):
    assert len(questions) >= 12
    assert len({q.domain for q in questions}) >= 8


def test_every_image_is_a_packaged_photograph_that_opens(questions):
    for q in questions:
        assert q.image and q.image.startswith("pkg:skimage/data/"), q.question_id
        assert resolve_image(q.image, QUESTIONS).is_file()
        im = load_image(q.image, QUESTIONS)
        assert im.mode == "RGB" and min(im.size) >= 100, (q.question_id, im.size)


def test_questions_name_the_subject_only_in_the_text_only_variant(questions):
    for q in questions:
        assert q.question_text_only and q.question_text_only != q.question, q.question_id


def test_every_item_type_and_meta_insight_appear_at_least_twice(items):
    types = collections.Counter(item.type for item in items)
    for t in ITEM_TYPES:
        assert types[t] >= 2, (t, types)
    assert sum(1 for item in items if getattr(item, "meta_insight", None)) >= 2


def test_the_rubric_exercises_every_compiler_rule(items, questions):
    flex = [i for i in items if i.type == "flexible_list"]
    assert any(len(i.options) > 6 for i in flex) and any(len(i.options) <= 6 for i in flex)
    assert any(i.extra_thresholds for i in flex)
    assert any(i.check_full_order and any(not s.required for s in i.steps) for i in items if i.type == "process")
    assert {i.tier for i in items} == {"answer_critical", "valuable", "context"}
    assert any(q.checks and q.meta_rubric is None for q in questions), "a question with a human-revised rubric"


def test_items_name_their_subject_so_checks_are_self_contained(items):
    for item in items:
        if item.type != "relationship":  # a relationship's check names its entities
            assert item.subject, item.id
            assert not re.match(r"(it|they|this|these)\b", item.subject, re.I), item.subject


def test_compiled_check_ids_follow_the_item_kind_n_form(rubric):
    for qid, checks in rubric.items():
        ids = [c["check_id"] for c in checks]
        assert len(ids) == len(set(ids)), qid
        for c in checks:
            assert re.fullmatch(r"[a-z0-9_]+\.[a-z_]+(\.\d+)?", c["check_id"]), (qid, c["check_id"])
            assert c["check_id"].split(".")[0] == c["source_item"], (qid, c["check_id"])


def test_three_reference_answers_per_question(questions):
    answers = load_records([ANSWERS], Answer, answer_key)
    got = collections.Counter((a["question_id"], a["model"]) for a in answers)
    want = {(q.question_id, m) for q in questions for m in MODELS}
    assert set(got) == want and set(got.values()) == {1}
    for a in answers:
        assert a["variant"] == "multimodal" and a["finish_reason"] == "stop" and a["settings_hash"] == "reference"
        assert len(a["response"].split()) >= 10, (a["question_id"], a["model"])


def test_gold_verdicts_cover_exactly_the_compiled_checks(rubric):
    gold = load_records([GOLD], Verdict, verdict_key)
    have = {(v["question_id"], v["model"], v["check_id"]): v for v in gold}
    assert len(have) == len(gold)
    want = {(qid, m, c["check_id"]): c["tier"] for qid, checks in rubric.items() for c in checks for m in MODELS}
    assert sorted(set(want) - set(have)) == [], "checks without a gold verdict"
    assert sorted(set(have) - set(want)) == [], "gold verdicts for checks the rubric does not have"
    for key, tier in want.items():
        v = have[key]
        assert v["tier"] == tier and v["judge"] == "gold" and v["variant"] == "multimodal", key
    # A hand-graded set uses the whole scale, not only the two ends.
    assert {v["verdict"] for v in gold} == {"meets", "partially_meets", "missing", "contradicts"}


def test_gold_scores_order_complete_omissive_contradicting(tmp_path):
    result = score_files([GOLD], dataset=QUESTIONS)
    by_model = {m["model"]: m for m in result["models"]}
    assert set(by_model) == set(MODELS)
    complete, omissive, contradicting = (by_model[m]["gamut_score"] for m in MODELS)
    assert complete > omissive > contradicting
    assert contradicting < 0 < omissive
    per_q = collections.defaultdict(dict)
    for r in result["responses"]:
        per_q[r["question_id"]][r["model"]] = r["score"]
    for qid, s in per_q.items():
        assert s["reference-complete"] >= s["reference-omissive"] > s["reference-contradicting"], (qid, s)
    assert {d["domain"] for d in result["domains"]} == {q.domain for q in load_questions(QUESTIONS)}


def test_the_cli_scores_the_sample(gamut, tmp_path):
    out = tmp_path / "scores.json"
    result = gamut("score", GOLD, "--out", out, "--dataset", QUESTIONS)
    assert result.exit_code == 0, result.output
    models = {m["model"]: m["gamut_score"] for m in json.loads(out.read_text())["models"]}
    assert models["reference-complete"] > models["reference-omissive"] > models["reference-contradicting"]


def test_score_files_refuses_verdicts_the_dataset_does_not_back(tmp_path):
    # The Python API holds verdicts to the dataset as `gamut-local score --dataset` does.
    record = json.loads(GOLD.read_text().splitlines()[0])
    bad = tmp_path / "bad.jsonl"
    bad.write_text(GOLD.read_text() + json.dumps({**record, "question_id": "no-such-question"}) + "\n")
    with pytest.raises(InputError, match="no-such-question"):
        score_files([bad], dataset=QUESTIONS)
    assert score_files([bad])["models"]  # without a dataset there is nothing to hold them to
