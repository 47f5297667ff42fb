"""Stale verdicts are visible and never scored as current (issue: every record knows what
produced it). The bundled sample's gold verdicts carry the hashes of the checks and reference
answers they were made on; rewording a check, editing an answer or stripping the hashes must
each change what `score`, `agree`, `report` and `view` count, and say so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gamut_local.config import JudgeSpec
from gamut_local.errors import InputError
from gamut_local.data.dataset import load_questions
from gamut_local.rubric.compiler import checks_for
from gamut_local.stages.score import write_scores
from tests.support.sample_run import SAMPLE

GOLD = SAMPLE / "verdicts" / "gold.jsonl"
QUESTIONS = SAMPLE / "questions.jsonl"
ANSWERS = SAMPLE / "answers" / "reference.jsonl"


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _reworded(tmp_path: Path) -> tuple[Path, str, str]:
    """A copy of the sample with one check of one meta-rubric reworded (its item's fact)."""
    rows = _rows(QUESTIONS)
    q = next(r for r in rows if r.get("meta_rubric"))
    item = next(i for i in q["meta_rubric"]["items"] if i["type"] == "simple")
    item["fact"] += " (reworded)"
    for r in rows:  # the copy lives elsewhere: keep image references resolvable
        if r.get("image") and not r["image"].startswith("pkg:"):
            r["image"] = str((SAMPLE / r["image"]).resolve())
    return _write(tmp_path / "questions.jsonl", rows), q["question_id"], f"{item['id']}.fact"


def test_the_sample_gold_is_current(tmp_path):
    doc = write_scores(tmp_path / "s.json", [GOLD], QUESTIONS, answers=[ANSWERS])
    assert doc.stale_verdicts == {}
    assert sum(sum(m.verdict_counts.values()) for m in doc.models) == len(_rows(GOLD))


def test_a_reworded_check_makes_its_verdicts_stale_and_they_are_left_out(tmp_path):
    dataset, qid, check_id = _reworded(tmp_path)
    with pytest.raises(InputError, match="incomplete|missing"):  # a stale verdict is a missing one
        write_scores(tmp_path / "s.json", [GOLD], dataset)
    doc = write_scores(tmp_path / "s.json", [GOLD], dataset, allow_incomplete=True)
    on_it = [r for r in _rows(GOLD) if (r["question_id"], r["check_id"]) == (qid, check_id)]
    assert len(on_it) == 3  # one per reference answer
    assert doc.stale_verdicts == {"gold": {"check_hash": 3}}
    assert sum(sum(m.verdict_counts.values()) for m in doc.models) == len(_rows(GOLD)) - 3


def test_an_edited_answer_makes_its_verdicts_stale_given_the_answers(tmp_path):
    answers = _rows(ANSWERS)
    answers[0]["response"] += " One more sentence."
    edited = _write(tmp_path / "answers.jsonl", answers)
    key = (answers[0]["question_id"], answers[0]["model"])
    n = sum((r["question_id"], r["model"]) == key for r in _rows(GOLD))
    doc = write_scores(tmp_path / "s.json", [GOLD], QUESTIONS, answers=[edited], allow_incomplete=True)
    assert doc.stale_verdicts == {"gold": {"answer_hash": n}}
    # Without the answers nothing can be said about them: all scored.
    assert write_scores(tmp_path / "t.json", [GOLD], QUESTIONS).stale_verdicts == {}


def test_verdicts_without_hashes_are_scored_and_counted_as_such(tmp_path):
    legacy = _write(tmp_path / "gold.jsonl", [{k: v for k, v in r.items() if k not in ("check_hash", "answer_hash")}
                                              for r in _rows(GOLD)])
    doc = write_scores(tmp_path / "s.json", [legacy], QUESTIONS)
    assert doc.stale_verdicts == {"gold": {"no identity": len(_rows(GOLD))}}
    assert sum(sum(m.verdict_counts.values()) for m in doc.models) == len(_rows(GOLD))


def test_score_and_agree_say_how_many_are_stale_on_the_command_line(tmp_path, gamut):
    dataset, _, _ = _reworded(tmp_path)
    other = _write(tmp_path / "other.jsonl", [{**r, "judge": "other"} for r in _rows(GOLD)])
    res = gamut("score", str(GOLD), str(other), "--out", str(tmp_path / "s.json"), "--dataset", str(dataset),
                "--allow-incomplete")
    assert res.exit_code == 0, res.output
    assert "gold: 3 stale verdicts left out (check_hash differs: 3)" in res.output
    assert "other: 3 stale verdicts left out" in res.output
    res = gamut("agree", str(GOLD), str(other), "--out", str(tmp_path / "a.json"), "--dataset", str(dataset),
                "--allow-incomplete")
    assert res.exit_code == 0, res.output
    assert "gold: 3 stale verdicts left out" in res.output


def test_a_human_verdict_on_a_reworded_check_is_stale_in_the_viewer_and_not_gold(tmp_path, sample_run_for_stale):
    from gamut_local.viewer.adjudicate import record_verdict
    from gamut_local.viewer.index import open_run
    from gamut_local.viewer.pages import human_agreement, overview

    run = sample_run_for_stale
    index = open_run(run)
    gold = next(r for r in _rows(GOLD))
    body = {k: gold[k] for k in ("question_id", "model", "variant", "check_id")}
    rec = record_verdict(index, "ann", {**body, "verdict": "meets"})
    check = next(c for c in checks_for(next(q for q in load_questions(QUESTIONS) if q.question_id == gold["question_id"]))
                 if c.check_id == gold["check_id"])
    assert rec["check_hash"] == gold["check_hash"] and rec["answer_hash"] == gold["answer_hash"]
    assert not index.is_stale(rec) and human_agreement(index) is not None
    # The check is reworded afterwards: the human verdict was made on the old text.
    dataset, _, _ = _reworded(tmp_path)
    rows = _rows(dataset)
    q = next(r for r in rows if r["question_id"] == gold["question_id"])
    for item in q.get("meta_rubric", {}).get("items", []):
        if check.source_item == item["id"] and "fact" in item:
            item["fact"] += " (reworded too)"
    _write(dataset, rows)
    index = open_run(run, dataset)
    stale = index.humans["human-ann"][tuple(body.values())]
    assert index.is_stale(stale)
    assert overview(index)["humans_stale"] == {"human-ann": 1}
    assert human_agreement(index) is None  # its only verdict is not gold any more
    assert any("stale verdicts left out" in n for n in index.notes)


@pytest.fixture
def sample_run_for_stale(tmp_path):
    from tests.support.sample_run import build_sample_run

    return build_sample_run(tmp_path / "run", seed=0)


def test_a_model_judge_may_not_take_a_human_name():
    with pytest.raises(ValueError, match="reserved for people"):
        JudgeSpec(name="human-x", path="somewhere")
    assert JudgeSpec(name="humane-judge", path="somewhere").name == "humane-judge"
