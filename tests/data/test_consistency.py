"""Stale verdicts found column-wise: a full grid of keys (one index per row) and a sparse one
(the distinct keys numbered) give the rows a record-by-record comparison gives."""

import numpy as np
import pytest

from gamut_local.data.consistency import NO_IDENTITY, stale_verdicts
from gamut_local.data.verdict_table import table_from_records


def _records(n_questions: int, n_checks: int, every: int):
    """Verdicts on (question, check) pairs: all of them (a grid) or every `every`-th."""
    out = []
    for i in range(0, n_questions * n_checks, every):
        q, c = divmod(i, n_checks)
        out.append({"question_id": f"q{q:04d}", "model": "m", "variant": "multimodal", "judge": "j",
                    "check_id": f"c{c:04d}", "tier": "valuable", "verdict": "meets",
                    "check_hash": None if i % 11 == 0 else f"h{i % 7}", "answer_hash": f"a{q % 5}"})
    return out


@pytest.mark.parametrize("shape", [(40, 6, 1), (300, 300, 157)], ids=["grid", "sparse"])
def test_stale_rows_are_the_ones_whose_hash_differs(shape):
    records = _records(*shape)
    table = table_from_records(records)
    # What the dataset says now: a check with hash h3 was reworded; one key is not in it at all.
    checks = {(r["question_id"], "multimodal", r["check_id"]):
              ("valuable", "new" if r["check_hash"] == "h3" else r["check_hash"]) for r in records[1:]}
    answers = {(f"q{q:04d}", "m", "multimodal"): "a1" for q in range(shape[0])}
    stale, reasons = stale_verdicts(table, checks, answers)
    key = {(table.questions[q], table.checks[c]): i
           for i, (q, c) in enumerate(zip(table.question.tolist(), table.check.tolist()))}
    want = np.zeros(len(records), dtype=bool)
    for k, r in enumerate(records):
        known = k > 0
        reworded = known and r["check_hash"] == "h3"
        other_answer = r["answer_hash"] != "a1"
        want[key[r["question_id"], r["check_id"]]] = reworded or other_answer
    assert stale.tolist() == want.tolist()
    assert reasons["j"][NO_IDENTITY] == sum(r["check_hash"] is None for r in records)
    assert reasons["j"]["check_hash"] == sum(k > 0 and r["check_hash"] == "h3" for k, r in enumerate(records))


def _pool_question():
    """A question whose flexible list of 7 options compiles to 7 option checks under
    small_pool_max 7, and to coverage checks under the default (6)."""
    from gamut_local.data.records import Question

    return Question.model_validate({
        "question_id": "q1", "domain": "plants", "question": "What is it used for?",
        "meta_rubric": {"items": [
            {"id": "name", "type": "simple", "tier": "answer_critical", "subject": "the plant", "fact": "It is mint."},
            {"id": "pool", "type": "flexible_list", "tier": "valuable", "subject": "uses of the plant",
             "options": [f"use {i}" for i in range(1, 8)], "min_required": 2}]}})


def _verdicts_on(checks: dict, extra=()):
    return [{"question_id": q, "model": "m", "variant": v, "judge": "j", "check_id": c, "tier": tier,
             "verdict": "meets"} for (q, v, c), (tier, _) in checks.items()] + list(extra)


def test_table_problems_use_the_runs_compile_settings():
    from gamut_local.data.consistency import current_checks, table_problems

    question = _pool_question()
    checks = current_checks([question], small_pool_max=7)
    table = table_from_records(_verdicts_on(checks))
    assert sum(".option." in c for _, _, c in checks) == 14  # 7 per variant: the run's setting, not the default
    assert table_problems(table, [question.question_id], checks) == []
    # The same verdicts against the default setting's checks: the option checks are not there.
    problems = table_problems(table, [question.question_id], current_checks([question]))
    assert {p.field for p in problems} == {"check_id"}
    assert all("has no check" in p.message and ".option." in p.message for p in problems)


def test_table_problems_name_each_bad_kind_once_at_its_first_row_in_file_order():
    from gamut_local.data.consistency import MAX_SHOWN, current_checks, table_problems

    question = _pool_question()
    checks = current_checks([question])
    bad = [{"question_id": "q9", "model": "m", "variant": "multimodal", "judge": "j", "check_id": "name.fact",
            "tier": "answer_critical", "verdict": "meets"},
           {"question_id": "q1", "model": "m", "variant": "multimodal", "judge": "j", "check_id": "name.fact",
            "tier": "context", "verdict": "meets"}]
    records = _verdicts_on(checks, bad)
    records.append({**bad[0], "model": "m2"})  # the same bad kind again: named once, at its first row
    table = table_from_records(records)
    problems = table_problems(table, [question.question_id], checks)
    assert [(p.field, p.message) for p in problems] == [
        ("question_id", "question 'q9' is not in the dataset"),
        ("tier", "check 'name.fact' of 'q1' is 'answer_critical' in the dataset, not 'context'")]
    many = [{**bad[0], "check_id": f"x{i}"} for i in range(MAX_SHOWN + 3)]
    problems = table_problems(table_from_records(many), [question.question_id], checks)
    assert len(problems) == MAX_SHOWN + 1 and problems[-1].message.startswith("and 3 more kinds")
