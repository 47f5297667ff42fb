"""Bias-corrected scores (PPI++ through ppi-python), proved on simulated runs whose true
verdicts are known (`testing.simulate`), and the cases without an estimate."""

import subprocess
import sys

import numpy as np
import pytest

from gamut_local.analysis.correction import estimate, estimate_on
from gamut_local.analysis.metrics import score_responses
from gamut_local.analysis.stats import cohen_kappa, confusion_matrix
from tests.support.simulate import simulate


N_QUESTIONS, N_LABELED = 400, 80


@pytest.fixture(scope="module")
def population_truth():
    """The mean true response score per system over a very large question set: the estimand
    (the population the run's questions are drawn from), to within ~0.1 points."""
    sim = simulate(10**6, n_questions=100_000, judges=[])
    truth, _ = sim.response_scores(score_responses)
    return truth.mean(axis=1)


def _replicate(seed: int, judge: str, system: int = 3):
    """One simulated run and one random sample: (estimate, the run's true score)."""
    sim = simulate(seed, n_questions=N_QUESTIONS)
    truth, _ = sim.response_scores(score_responses)
    judged, _ = sim.response_scores(score_responses, judge)
    rng = np.random.default_rng(seed + 1)
    labeled = np.zeros(N_QUESTIONS, dtype=bool)
    labeled[rng.choice(N_QUESTIONS, N_LABELED, replace=False)] = True
    return estimate_on(judged[system], truth[system], labeled), truth[system].mean()


@pytest.fixture(scope="module")
def lenient_runs():
    return [_replicate(seed, "lenient") for seed in range(200)]


def test_corrected_scores_remove_a_lenient_judges_bias(lenient_runs, population_truth):
    judge_off = np.mean([r["judge_only"] - 100 * t for r, t in lenient_runs])
    corrected_off = np.mean([r["score"] - 100 * t for r, t in lenient_runs])
    se = np.std([r["score"] - 100 * t for r, t in lenient_runs]) / np.sqrt(len(lenient_runs))
    assert 4 < judge_off < 11
    assert abs(corrected_off) < max(0.3, 3 * se), (corrected_off, se)


def test_corrected_ci_covers_the_population_score_about_95_percent(lenient_runs, population_truth):
    truth = 100 * population_truth[3]
    covered = np.mean([r["ci_low"] <= truth <= r["ci_high"] for r, _ in lenient_runs])
    # 200 seeds: the binomial SD of a 95% rate is 1.5%; 3 SDs either side.
    assert 0.90 <= covered <= 0.995, covered


def test_corrected_ci_is_narrower_than_human_only_for_a_good_judge():
    sim = simulate(0, n_questions=N_QUESTIONS)
    kappa = cohen_kappa(confusion_matrix(sim.truth[sim.mask[None].repeat(4, 0)],
                                         sim.judged["accurate"][sim.mask[None].repeat(4, 0)], 4))
    assert kappa >= 0.6
    ratios = []
    for seed in range(20):
        r, _ = _replicate(seed, "accurate")
        ratios.append((r["ci_high"] - r["ci_low"]) / (r["human_only_ci_high"] - r["human_only_ci_low"]))
    assert np.mean(ratios) <= 0.75, np.mean(ratios)


def test_the_estimates_are_what_they_say():
    r, _ = _replicate(5, "lenient")
    assert r["ci_low"] < r["score"] < r["ci_high"] and r["human_only_ci_low"] < r["human_only"] < r["human_only_ci_high"]
    assert np.isclose(r["bias"], r["judge_only"] - r["score"], rtol=0, atol=1e-12)
    assert (r["n_labeled"], r["n_total"], r["method"], r["reason"]) == (N_LABELED, N_QUESTIONS, "ppi++", None)


def test_human_only_is_the_sample_mean():
    y = np.array([0.5, 1.0, -0.5, 0.25])
    r = estimate(y, y + 0.1, np.linspace(-1, 1, 50))
    assert r["human_only"] == pytest.approx(100 * y.mean(), abs=1e-12)


def test_weights_change_the_estimate_as_inclusion_probabilities_say():
    y = np.array([1.0, 1.0, 0.0, 0.0])
    plain = estimate(y, y, np.zeros(10))
    # The first two were twice as likely to be drawn: each stands for half as many responses.
    weighted = estimate(y, y, np.zeros(10), w=np.array([1.0, 1.0, 2.0, 2.0]))
    assert plain["human_only"] == pytest.approx(50.0) and weighted["human_only"] == pytest.approx(100 / 3)


@pytest.mark.parametrize("y,reason", [([], "0 labeled"), ([0.5], "1 labeled"), ([1.0, 1.0, 1.0], "all 3 labeled")])
def test_no_estimate_without_enough_varied_labels(y, reason):
    r = estimate(np.array(y), np.array(y), np.linspace(-1, 1, 20))
    assert r["score"] is None and r["ci_low"] is None and r["human_only"] is None and r["bias"] is None
    assert reason in r["reason"] and r["n_labeled"] == len(y) and r["n_total"] == len(y) + 20


def test_a_judge_that_scores_everything_alike_gives_the_human_only_estimate():
    y = np.array([0.0, 0.5, 1.0, 0.5])
    r = estimate(y, np.full(4, 0.3), np.full(30, 0.3))
    assert r["method"] == "classical"
    assert (r["score"], r["ci_low"], r["ci_high"]) == pytest.approx(
        (r["human_only"], r["human_only_ci_low"], r["human_only_ci_high"]))


def test_not_scored_responses_are_outside_the_population():
    judge = np.array([0.1, np.nan, 0.3, 0.5, 0.7, np.nan])
    gold = np.array([0.0, 1.0, 0.5, np.nan, np.nan, np.nan])
    r = estimate_on(judge, gold, np.array([True, True, True, False, False, False]))
    assert (r["n_labeled"], r["n_total"]) == (2, 4)


def test_scoring_without_correction_does_not_import_ppi(tmp_path):
    path = tmp_path / "v.jsonl"
    path.write_text('{"question_id": "q", "model": "m", "judge": "j", "check_id": "c", "tier": "valuable", '
                    '"verdict": "meets"}\n')
    code = ("import sys; from pathlib import Path; from gamut_local.stages.score import write_scores; "
            f"write_scores(Path({str(tmp_path / 's.json')!r}), [Path({str(path)!r})], n_boot=5); "
            "assert 'ppi_py' not in sys.modules and 'crowdkit' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_no_labels_with_weights_is_null_not_a_crash():
    r = estimate_on(np.linspace(0, 1, 10), np.full(10, np.nan), np.zeros(10, dtype=bool), np.full(10, 4.0))
    assert r["score"] is None and r["n_labeled"] == 0 and r["n_total"] == 10


def test_plan_needs_fewer_labels_with_a_good_judge_and_hits_the_half_width():
    from gamut_local.analysis.correction import plan

    sim = simulate(3, n_questions=2000)
    truth, _ = sim.response_scores(score_responses)
    judged, _ = sim.response_scores(score_responses, "accurate")
    p = plan(truth[1, :60], judged[1, :60], 2000, half_width=3.0)
    assert p["reachable"] and p["corrected_n"] < p["human_only_n"] / 2
    # Grading that many of a fresh sample gives about that half-width, both ways.
    rng = np.random.default_rng(0)
    for n, key in ((p["corrected_n"], "score"), (p["human_only_n"], "human_only")):
        labeled = np.zeros(2000, dtype=bool)
        labeled[rng.choice(2000, n, replace=False)] = True
        r = estimate_on(judged[1], np.where(labeled, truth[1], np.nan), labeled)
        lo, hi = (r["ci_low"], r["ci_high"]) if key == "score" else (r["human_only_ci_low"], r["human_only_ci_high"])
        assert 2.4 < (hi - lo) / 2 < 3.6, (key, n, (hi - lo) / 2)
    assert plan(truth[1, :1], judged[1, :1], 2000, 3.0)["reason"] is not None


def test_graded_in_full_needs_a_judged_response_every_verdict_in_the_queue_and_as_many_as_judged():
    from gamut_local.analysis.correction import graded_in_full

    assert graded_in_full(5, 5, True) and graded_in_full(6, 5, True)
    assert not graded_in_full(4, 5, True)  # a check left
    assert not graded_in_full(5, 5, False)  # a verdict made in another queue
    assert not graded_in_full(3, 0, True)  # no model judge scored it: it can label nothing
    got = graded_in_full(np.array([5, 4, 3]), np.array([5, 5, 0]), np.array([True, True, True]))
    assert got.tolist() == [True, False, False]
