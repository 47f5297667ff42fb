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
    checks = {(r["question_id"], "multimodal", r["check_id"]): "new" if r["check_hash"] == "h3" else r["check_hash"]
              for r in records[1:]}
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
