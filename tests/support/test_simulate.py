"""The simulator behind the bias-correction proofs: seeded, its judges biased as designed, and
its arrays meaning what its verdict records mean to the real scorer."""

import numpy as np

from gamut_local.analysis.metrics import score_responses
from gamut_local.analysis.stats import cohen_kappa, confusion_matrix
from tests.support.scoring import score_records
from tests.support.simulate import ACCURATE, LENIENT, SimJudge, simulate


def _points(sim, judge=None):
    scores, _ = sim.response_scores(score_responses, judge)
    return 100 * scores.mean(axis=1)


def test_same_seed_same_run_and_another_seed_another():
    a, b, c = simulate(3, n_questions=50), simulate(3, n_questions=50), simulate(4, n_questions=50)
    assert np.array_equal(a.truth, b.truth) and all(np.array_equal(a.judged[j], b.judged[j]) for j in a.judged)
    assert not np.array_equal(a.truth, c.truth)


def test_the_lenient_judge_inflates_every_system_by_4_to_11_points():
    for seed in range(3):
        sim = simulate(seed, n_questions=2000)
        bias = _points(sim, "lenient") - _points(sim)
        assert np.all((bias > 4) & (bias < 11)), bias


def test_a_judge_partial_to_one_system_is_biased_on_that_system_only():
    sim = simulate(0, n_questions=2000)
    bias = _points(sim, "partial-to-first") - _points(sim)
    assert bias[0] > 4 and np.all(np.abs(bias[1:]) < 2), bias


def test_confusion_matrices_are_what_the_judges_apply():
    sim = simulate(1, n_questions=3000, judges=[SimJudge("x", LENIENT, {1: ACCURATE})])
    for s, want in ((0, LENIENT), (1, ACCURATE), (2, LENIENT)):
        truth, got = sim.truth[s][sim.mask], sim.judged["x"][s][sim.mask]
        counts = confusion_matrix(truth, got, 4).astype(float)
        assert np.allclose(counts / counts.sum(axis=1, keepdims=True), want, atol=0.03)
    kappa = cohen_kappa(confusion_matrix(sim.truth[1][sim.mask], sim.judged["x"][1][sim.mask], 4))
    assert kappa > 0.6


def test_records_score_as_the_arrays_do():
    """The records go through the score stage's real reader and table; the arrays straight
    to the scorer: the same GAMUT scores, so tests on either describe the same run."""
    sim = simulate(2, n_questions=30)
    doc = score_records(sim.records(None, "human-sim") + sim.records("lenient"), n_boot=10)
    got = {(m["judge"], m["model"]): m["gamut_score"] for m in doc["models"]}
    for judge, name in ((None, "human-sim"), ("lenient", "lenient")):
        want = _points(sim, judge)
        assert np.allclose([got[(name, s)] for s in sim.systems], want, rtol=0, atol=1e-9)
