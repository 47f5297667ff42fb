"""Coverage on a table small enough to score by hand: a judge whose verdicts miss one question
of a system (a failed shard) and some checks of another response (a judge that stopped
halfway). Every comparison must use only the questions both systems have complete."""

from __future__ import annotations

import numpy as np
import pytest

from gamut_local.analysis.agreement import agree_panel, panel_from_table
from gamut_local.analysis.scoring import coverage, model_rows, require_complete, score_table
from gamut_local.analysis.summary import report_tables
from gamut_local.data.verdict_table import table_from_records
from gamut_local.errors import InputError

# Two checks per question, both answer_critical, so a response score is the tier score:
# (meets + 0.5 partially_meets - 2 contradicts) / (n + 2 contradicts).
FULL = {"q1": ["meets", "missing"], "q2": ["meets", "meets"], "q3": ["missing", "missing"], "q4": ["meets", "meets"]}
# j1 graded only c0 of b's q2 (stopped halfway) and nothing of b's q4 (a failed shard).
J1_B = {"q1": ["meets", "missing"], "q2": ["meets"], "q3": ["missing", "missing"]}


def _records(judge: str, model: str, by_question: dict) -> list[dict]:
    return [{"judge": judge, "model": model, "variant": "multimodal", "question_id": q, "check_id": f"c{i}",
             "tier": "answer_critical", "verdict": v} for q, vs in by_question.items() for i, v in enumerate(vs)]


def _table(judges=("j1", "j2")):
    perfect = {q: ["meets", "meets"] for q in FULL}
    recs = []
    for judge in judges:
        recs += _records(judge, "a", perfect) + _records(judge, "b", J1_B if judge == "j1" else FULL)
    return table_from_records(recs)


def _row(rows, **key):
    (row,) = [r for r in rows if all(r[k] == v for k, v in key.items())]
    return row


def test_rows_count_what_is_missing():
    scores = score_table(_table(), n_boot=50)
    rows = model_rows(scores)
    b = _row(rows, judge="j1", model="b")
    # 4 questions x 2 checks expected; 5 verdicts given: q2's c1 and both of q4 missing.
    assert {k: b[k] for k in ("n_questions", "n_expected", "n_missing_verdicts", "n_complete_responses",
                              "complete")} == {"n_questions": 4, "n_expected": 8, "n_missing_verdicts": 3,
                                               "n_complete_responses": 2, "complete": False}
    # The system's own score is still the formula over what was graded: (0.5 + 1 + 0) / 3.
    assert b["gamut_score"] == pytest.approx(100 * 1.5 / 3)
    for judge, model in (("j1", "a"), ("j2", "a"), ("j2", "b")):
        r = _row(rows, judge=judge, model=model)
        assert (r["complete"], r["n_missing_verdicts"], r["n_expected"]) == (True, 0, 8)


def test_a_comparison_is_refused_naming_the_system_and_its_counts():
    scores = score_table(_table(), n_boot=50)
    with pytest.raises(InputError) as e:
        require_complete(scores, "verdicts.jsonl", allow=False)
    text = "\n".join(str(p) for p in e.value.problems)
    assert "judge 'j1', b (multimodal): 2 of 4 questions complete, 3 of 8 expected verdicts missing" in text
    assert "--allow-incomplete" in text and "j2" not in text.split("\n")[0]
    assert require_complete(scores, "verdicts.jsonl", allow=True) == [
        "judge 'j1', b (multimodal): 2 of 4 questions complete, 3 of 8 expected verdicts missing"]


def test_the_leaderboard_ranks_on_the_common_questions_only():
    scores = score_table(_table(), n_boot=200)
    t = report_tables(scores, agree_panel(panel_from_table(_table()), scores))
    j1 = {r["model"]: r for r in t["leaderboard"] if r["judge"] == "j1"}
    # Common to a and b under j1: q1 and q3 (q2 is partial, q4 absent). a: 1, 1; b: 0.5, 0.
    assert (j1["a"]["gamut_score"], j1["b"]["gamut_score"]) == (100.0, pytest.approx(25.0))
    assert (j1["a"]["n_questions"], j1["b"]["complete"], j1["a"]["complete"]) == (2, False, True)
    (nb,) = [n for n in t["neighbours"] if n["judge"] == "j1"]
    assert (nb["higher"], nb["lower"], nb["diff"]) == ("a", "b", pytest.approx(75.0))
    # j2 has everything: its numbers are scores.json's, over all four questions.
    j2 = {r["model"]: r for r in t["leaderboard"] if r["judge"] == "j2"}
    assert j2["b"]["gamut_score"] == pytest.approx(100 * (0.5 + 1 + 0 + 1) / 4) and j2["b"]["n_questions"] == 4
    assert t["incomplete"] == ["judge 'j1', b (multimodal): 2 of 4 questions complete, 3 of 8 expected "
                               "verdicts missing"]
    assert t["coverage_from"] == "verdicts"


def test_agreement_ranks_on_the_questions_both_judges_have_complete():
    table = _table()
    scores = score_table(table, n_boot=20)
    a = agree_panel(panel_from_table(table), scores)
    (pair,) = a["pairs"]
    (ranked,) = a["pair_scores"]
    assert pair["n_questions"] == ranked["n_questions"] == 2
    assert {(m["model"], m["a"], m["b"]) for m in ranked["models"]} == {("a", 100.0, 100.0), ("b", 25.0, 25.0)}
    assert pair["mean_diff"] == 0.0
    assert "ranked on the 2 of 4 questions" in a["notes"]["pairs[j1|j2].n_questions"]
    b = _row(a["coverage"], judge="j1", model="b")
    assert (b["n_missing_verdicts"], b["complete"]) == (3, False)
    assert a["coverage_from"] == "verdicts"


def test_the_dataset_grid_counts_questions_no_judge_reached():
    """With a dataset, a question nobody graded (q5: the last shard of every system) is expected too."""
    table = _table(("j2",))
    expected = {(q, v): 2 for q in (*FULL, "q5") for v in ("multimodal", "text_only")}
    scores = score_table(table, expected=expected, n_boot=20)
    c = coverage(scores)
    assert scores.questions == ["q1", "q2", "q3", "q4", "q5"] and scores.from_dataset
    np.testing.assert_array_equal(c["n_questions"], [[5, 5]])
    np.testing.assert_array_equal(c["n_missing_verdicts"], [[2, 2]])
    np.testing.assert_array_equal(c["complete"], [[False, False]])
    # Without the dataset the same verdicts are complete: nothing implies q5.
    assert coverage(score_table(table, n_boot=20))["complete"].all()
