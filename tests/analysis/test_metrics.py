"""The scorer on hand-worked examples, hypothesis properties, and the score command."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gamut_local.analysis.metrics import bootstrap_weights, score_responses, score_responses_reference
from gamut_local.analysis.scoring import domain_rows, score_table
from gamut_local.data.verdict_table import table_from_records
from tests.support.scoring import score_records
from gamut_local.vocab import TIER_CODE, VERDICT_CODE

M, P, S, C, I = (VERDICT_CODE[v] for v in ("meets", "partially_meets", "missing", "contradicts", "invalid"))
AC, VAL, CTX = (TIER_CODE[t] for t in ("answer_critical", "valuable", "context"))


def one(verdicts, tiers, **kw):
    scores, tier_scores = score_responses(verdicts, tiers, [0] * len(verdicts), 1, **kw)
    return scores[0], tier_scores[0]


def test_all_meets_is_one_and_all_contradicts_is_minus_one():
    assert one([M, M, M], [AC, VAL, CTX])[0] == pytest.approx(1.0)
    assert one([C, C, C], [AC, VAL, CTX])[0] == pytest.approx(-1.0)


def test_hand_worked_mixed_response():
    # answer_critical: M, P, S, C -> (1 + 0.5 - 2) / (1 + 1 + 1 + 2) = -0.1
    # valuable: M, S -> 0.5; context: P -> 0.5
    score, tiers = one([M, P, S, C, M, S, P], [AC, AC, AC, AC, VAL, VAL, CTX])
    assert tiers == pytest.approx([-0.1, 0.5, 0.5])
    assert score == pytest.approx(0.6 * -0.1 + 0.3 * 0.5 + 0.1 * 0.5)


def test_only_context_checks_takes_the_whole_weight():
    score, tiers = one([M, S], [CTX, CTX])
    assert np.isnan(tiers[AC]) and np.isnan(tiers[VAL])
    assert score == pytest.approx(0.5)


def test_absent_valuable_tier_gives_its_weight_in_proportion():
    score, _ = one([M, S], [AC, CTX])  # tiers 1.0 and 0.0
    assert score == pytest.approx((0.6 * 1.0 + 0.1 * 0.0) / 0.7)


def test_invalid_counts_as_missing_by_default_or_is_excluded():
    assert one([M, I], [AC, AC])[0] == pytest.approx(0.5)
    assert one([M, I], [AC, AC], invalid_as="exclude")[0] == pytest.approx(1.0)
    assert np.isnan(one([I], [AC], invalid_as="exclude")[0])
    with pytest.raises(ValueError, match="invalid_as"):
        one([M], [AC], invalid_as="meets")


def test_formula_parameters_are_respected():
    assert one([P], [AC], partial_credit=0.25)[0] == pytest.approx(0.25)
    assert one([M, C], [AC, AC], contradiction_weight=-1.0)[0] == pytest.approx(0.0)


def test_response_without_checks_is_nan():
    scores, _ = score_responses([M], [AC], [1], 3)
    assert np.isnan(scores[0]) and scores[1] == 1.0 and np.isnan(scores[2])


verdict_arrays = st.integers(1, 300).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, 4), min_size=n, max_size=n),
    st.lists(st.integers(0, 2), min_size=n, max_size=n),
    st.lists(st.integers(0, 9), min_size=n, max_size=n)))


@settings(max_examples=200, deadline=None)
@given(verdict_arrays)
def test_vectorised_equals_reference_loop_and_lies_in_range(data):
    v, t, r = data
    fast = score_responses(v, t, r, 10)
    slow = score_responses_reference(v, t, r, 10)
    np.testing.assert_allclose(fast[0], slow[0], atol=1e-12, equal_nan=True)
    np.testing.assert_allclose(fast[1], slow[1], atol=1e-12, equal_nan=True)
    finite = fast[0][~np.isnan(fast[0])]
    assert np.all((finite >= -1 - 1e-12) & (finite <= 1 + 1e-12))


@settings(max_examples=200, deadline=None)
@given(verdict_arrays, st.data())
def test_turning_a_missing_into_meets_never_lowers_a_score(data, draw):
    v, t, r = data
    missing = [i for i, x in enumerate(v) if x == S]
    if not missing:
        return
    i = draw.draw(st.sampled_from(missing))
    better = list(v)
    better[i] = M
    before = score_responses(v, t, r, 10)[0][r[i]]
    after = score_responses(better, t, r, 10)[0][r[i]]
    assert after >= before - 1e-12


def records(model, verdicts, question="q1", judge="j", tier="answer_critical"):
    return [{"judge": judge, "model": model, "variant": "multimodal", "question_id": question,
             "check_id": f"c{i}", "tier": tier, "verdict": v} for i, v in enumerate(verdicts)]


def test_score_records_models_rates_and_domains():
    recs = (records("a", ["meets", "missing"], "q1") + records("a", ["meets", "meets"], "q2")
            + records("b", ["contradicts", "invalid"], "q1"))
    out = score_records(recs)
    by = {m["model"]: m for m in out["models"]}
    assert by["a"]["gamut_score"] == pytest.approx(100 * (0.5 + 1.0) / 2)
    assert by["a"]["tier_scores"]["valuable"] is None
    assert by["a"]["n_responses"] == 2
    assert by["b"]["verdict_rates"]["invalid"] == pytest.approx(0.5)
    lo, hi = by["a"]["ci95"]
    assert lo <= by["a"]["gamut_score"] <= hi
    domains = domain_rows(score_table(table_from_records(recs), {"q1": "food", "q2": "plants"}, n_boot=10))
    assert {(d["model"], d["domain"]) for d in domains} == {("a", "food"), ("a", "plants"), ("b", "food")}
    # b never answered q2, which the verdicts imply (a's checks): a row that says so, no score.
    assert len(out["responses"]) == 4
    gap = [r for r in out["responses"] if (r["model"], r["question_id"]) == ("b", "q2")]
    assert gap == [{**gap[0], "score": None, "n_expected": 2, "complete": False}]
    assert (by["a"]["complete"], by["b"]["complete"], by["b"]["n_missing_verdicts"]) == (True, False, 2)


def test_bootstrap_is_seeded():
    rng = np.random.default_rng(1)
    recs = [r for q in range(30) for r in records("a", list(rng.choice(["meets", "missing"], 4)), f"q{q}")]
    assert score_records(recs, seed=3)["models"] == score_records(recs, seed=3)["models"]
    assert score_records(recs, seed=3)["models"][0]["ci95"] != score_records(recs, seed=4)["models"][0]["ci95"]


def test_score_command_writes_json_and_reports_bad_files(gamut, tmp_path):
    good = tmp_path / "v.jsonl"
    good.write_text("\n".join(json.dumps(r) for r in records("a", ["meets", "partially_meets"])) + "\n")
    out = tmp_path / "scores.json"
    res = gamut("score", str(good), "--out", str(out))
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["models"][0]["gamut_score"] == pytest.approx(75.0)

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**records("a", ["meets"])[0], "verdict": "great"}) + "\n{oops\n")
    res = gamut("score", str(bad), "--out", str(tmp_path / "x.json"))
    assert res.exit_code == 1
    assert f"{bad}:2: <record>: not valid JSON" in res.output
    assert "Traceback" not in res.output
    assert not (tmp_path / "x.json").exists()


def test_bootstrap_weights_are_multinomial_rows_fixed_by_the_seed():
    """Each row counts n draws with replacement from n questions: Multinomial(n, 1/n), so each
    count is Binomial(n, 1/n) (mean 1, variance 1 - 1/n) and any two of a row covary by -1/n.
    The same seed gives the same rows (scores.json records it); another seed, others."""
    n, n_boot = 40, 20_000
    w = bootstrap_weights(n, n_boot, seed=3)
    assert w.shape == (n_boot, n) and w.dtype.kind == "i" and (w >= 0).all() and (w.sum(axis=1) == n).all()
    se = np.sqrt(2 / n_boot)  # the standard error of a sample variance of about 1
    assert abs(w.mean() - 1) < 0.01
    assert np.abs(w.var(axis=0) - (1 - 1 / n)).max() < 5 * se
    assert abs(np.cov(w[:, 0], w[:, 1])[0, 1] + 1 / n) < 5 * se
    assert np.array_equal(bootstrap_weights(n, n_boot, seed=3), w)
    assert not np.array_equal(bootstrap_weights(n, n_boot, seed=4), w)
    assert bootstrap_weights(0, 5).shape == (5, 0) and bootstrap_weights(1, 3).tolist() == [[1], [1], [1]]
