"""gamut_local.analysis.stats against scipy.stats and the krippendorff package on random data."""

import krippendorff
import numpy as np
import pytest
from scipy import stats as sps

from gamut_local.analysis import stats


@pytest.mark.parametrize("seed", range(8))
def test_rank_statistics_match_scipy(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 40))
    x = rng.normal(size=n)
    # Coarse rounding on half the seeds so ties are exercised.
    y = x + rng.normal(scale=0.7, size=n)
    if seed % 2:
        x, y = np.round(x, 1), np.round(y, 0)
    assert stats.kendall_tau_b(x, y) == pytest.approx(sps.kendalltau(x, y, variant="b").statistic, abs=1e-12)
    assert stats.spearman_rho(x, y) == pytest.approx(sps.spearmanr(x, y).statistic, abs=1e-12)
    assert stats.pearson_r(x, y) == pytest.approx(sps.pearsonr(x, y).statistic, abs=1e-12)
    np.testing.assert_allclose(stats.rankdata(y), sps.rankdata(y))


def test_two_models_give_plus_or_minus_one():
    assert stats.kendall_tau_b([1, 2], [3, 5]) == 1.0
    assert stats.spearman_rho([1, 2], [5, 3]) == pytest.approx(-1.0)
    assert stats.pearson_r([1, 2], [5, 3]) == pytest.approx(-1.0)
    assert stats.adjacent_swaps([1, 2], [5, 3]) == 1
    assert not stats.identical_ranking([1, 2], [5, 3])


def test_degenerate_rank_inputs_are_undefined_with_a_reason():
    for fn in (stats.kendall_tau_b, stats.spearman_rho, stats.pearson_r):
        value, why = stats.defined(fn, [50.0, 50.0, 50.0], [1.0, 2.0, 3.0])
        assert value is None and "constant" in why
        value, why = stats.defined(fn, [1.0], [2.0])
        assert value is None and "at least 2" in why
    assert stats.defined(stats.kendall_tau_b, [1, 2, 3], [1, 2, 4]) == (1.0, None)


def test_adjacent_swaps_and_identical_ranking():
    a = np.array([90.0, 80.0, 70.0, 60.0, 50.0])
    b = np.array([85.0, 86.0, 60.0, 65.0, 10.0])  # 1<->2 and 3<->4 flip
    assert stats.adjacent_swaps(a, b) == 2
    assert not stats.identical_ranking(a, b)
    assert stats.identical_ranking(a, a - 30)
    # A tie on one side is not a flip, but it does break identity.
    assert stats.adjacent_swaps(a, np.array([80.0, 80.0, 70.0, 60.0, 50.0])) == 0
    assert not stats.identical_ranking(a, np.array([80.0, 80.0, 70.0, 60.0, 50.0]))


@pytest.mark.parametrize("seed", range(6))
def test_cohen_kappa_matches_the_textbook_formula(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 5, size=500)
    b = np.where(rng.random(500) < 0.6, a, rng.integers(0, 5, size=500))
    conf = stats.confusion_matrix(a, b, 5)
    assert conf.sum() == 500 and conf[a[0], b[0]] >= 1
    np.testing.assert_array_equal(conf, sps.contingency.crosstab(a, b, levels=(range(5), range(5))).count)
    p_o = np.mean(a == b)
    p_e = sum(np.mean(a == k) * np.mean(b == k) for k in range(5))
    assert stats.cohen_kappa(conf) == pytest.approx((p_o - p_e) / (1 - p_e), abs=1e-12)


def test_cohen_kappa_degenerate():
    one = np.zeros(20, dtype=int)
    value, why = stats.defined(stats.cohen_kappa, stats.confusion_matrix(one, one, 5))
    assert value is None and "one and the same category" in why
    value, why = stats.defined(stats.cohen_kappa, np.zeros((5, 5)))
    assert value is None and "no items" in why
    # One judge constant, the other not: defined, and zero (no agreement beyond chance).
    b = np.r_[np.zeros(10, int), np.ones(10, int)]
    assert stats.cohen_kappa(stats.confusion_matrix(one, b, 5)) == pytest.approx(0.0)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("level", ["nominal", "ordinal"])
def test_krippendorff_alpha_matches_package(seed, level):
    rng = np.random.default_rng(seed)
    raters, units, k = int(rng.integers(2, 5)), int(rng.integers(20, 300)), 4
    truth = rng.integers(0, k, size=units)
    data = np.where(rng.random((raters, units)) < 0.7, truth, rng.integers(0, k, size=(raters, units)))
    data[rng.random((raters, units)) < 0.2] = -1  # missing
    ref = krippendorff.alpha(reliability_data=np.where(data < 0, np.nan, data).astype(float),
                             value_domain=list(range(k)), level_of_measurement=level)
    assert stats.krippendorff_alpha(data, k, level) == pytest.approx(ref, abs=1e-10)


@pytest.mark.parametrize("raters,k", [(2, 4), (3, 4), (7, 6)], ids=["2x4", "3x4", "7x6-sparse-codes"])
def test_coincidence_matrix_is_the_per_unit_sum_of_its_definition(raters, k):
    rng = np.random.default_rng(raters * k)
    data = rng.integers(-1, k, size=(raters, 300))  # -1: missing
    want = np.zeros((k, k))
    for unit in data.T:
        n = np.bincount(unit[unit >= 0], minlength=k).astype(float)
        if n.sum() >= 2:
            want += (np.outer(n, n) - np.diag(n)) / (n.sum() - 1)
    assert np.allclose(stats.coincidence_matrix(data, k), want, rtol=0, atol=1e-9)
    with pytest.raises(ValueError, match="below n_values"):
        stats.coincidence_matrix(np.array([[0, k], [1, 1]]), k)


def test_krippendorff_alpha_degenerate():
    value, why = stats.defined(stats.krippendorff_alpha, np.full((3, 10), 2), 4, "nominal")
    assert value is None and "same category" in why
    no_pairs = np.array([[0, -1, 1], [-1, 2, -1]])
    value, why = stats.defined(stats.krippendorff_alpha, no_pairs, 4, "ordinal")
    assert value is None and "two raters" in why


def test_bootstrap_weights_and_paired_difference():
    rng = np.random.default_rng(0)
    w = rng.multinomial(50, np.full(50, 1 / 50), size=400).astype(float)
    a = rng.normal(0.5, 0.2, size=50)
    values = np.c_[a, a - 0.2, a + rng.normal(0, 0.05, size=50)]
    values[7, 1] = np.nan  # a model without a response to question 7
    boot = stats.bootstrap_means(w, values)
    assert boot.shape == (400, 3) and np.isfinite(boot).all()
    clear = stats.paired_difference(boot[:, 0], boot[:, 1])
    assert clear["distinguishable"] and clear["ci95"][0] > 0.15
    noise = stats.paired_difference(boot[:, 0], boot[:, 2])
    assert not noise["distinguishable"] and noise["ci95"][0] < 0 < noise["ci95"][1]
    # The percentile CI is the plain numpy percentile of the bootstrap differences.
    d = boot[:, 0] - boot[:, 1]
    assert clear["ci95"] == pytest.approx(list(np.percentile(d, [2.5, 97.5])))


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

small_scores = st.lists(st.integers(-3, 3), min_size=2, max_size=12)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_rank_statistics_agree_with_scipy_or_are_undefined_exactly_when_scipy_is_nan(data):
    x = data.draw(small_scores)
    y = data.draw(st.lists(st.integers(-3, 3), min_size=len(x), max_size=len(x)))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        refs = {stats.kendall_tau_b: sps.kendalltau(x, y, variant="b").statistic,
                stats.spearman_rho: sps.spearmanr(x, y).statistic}
    for fn, ref in refs.items():
        value, why = stats.defined(fn, x, y)
        if np.isnan(ref):
            assert value is None and why
        else:
            assert value == pytest.approx(ref, abs=1e-12)
    assert 0 <= stats.adjacent_swaps(x, y) <= len(x) - 1
    assert stats.identical_ranking(x, x)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=60))
def test_kappa_is_at_most_one_and_one_on_perfect_agreement(pairs):
    a, b = map(np.array, zip(*pairs))
    value, why = stats.defined(stats.cohen_kappa, stats.confusion_matrix(a, b, 5))
    assert (value is None) == (len(set(a.tolist())) == 1 and set(a.tolist()) == set(b.tolist()))
    if value is not None:
        assert -1.0 <= value <= 1.0 + 1e-12
    perfect, _ = stats.defined(stats.cohen_kappa, stats.confusion_matrix(a, a, 5))
    assert perfect in (1.0, None)
