"""Statistics for comparing judges and models: rank correlations, agreement, bootstraps.

Plain numpy over integer-coded arrays, so the whole analysis of a million-verdict run stays
in vectorised code. Each function either returns a number or raises `Undefined` with a
sentence saying why the statistic has no value for this input (two constant score vectors,
one verdict category only, nothing to pair). Callers turn that into `null` plus the reason,
so degenerate data gives defined output instead of a crash or a silent NaN.

The formulas follow the references the tests check against: scipy.stats (`kendalltau`
variant b, `spearmanr`, `pearsonr`) and Krippendorff's coincidence-matrix alpha as in the
`krippendorff` package.
"""

from __future__ import annotations

from typing import Callable

import numpy as np


class Undefined(ValueError):
    """The statistic has no value for this input; the message says why."""


def defined(fn: Callable, *args, **kwargs) -> tuple[float | None, str | None]:
    """`(value, None)`, or `(None, reason)` when the statistic is undefined."""
    try:
        value = fn(*args, **kwargs)
    except Undefined as e:
        return None, str(e)
    return (None if value is None else float(value)), None


def _pair(x, y) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"need two 1-d arrays of one length, got {x.shape} and {y.shape}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("scores must be finite; drop models without a score first")
    if len(x) < 2:
        raise Undefined(f"needs at least 2 models, got {len(x)}")
    return x, y


def rankdata(x) -> np.ndarray:
    """Ranks 1..n, ties sharing their average rank (scipy's 'average' method)."""
    x = np.asarray(x, dtype=float)
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    # Start of each run of equal values; a run's average rank is (first + last) / 2 + 1.
    new = np.r_[True, xs[1:] != xs[:-1]]
    run = np.cumsum(new) - 1
    starts = np.flatnonzero(new)
    ends = np.r_[starts[1:], len(xs)] - 1
    avg = (starts + ends) / 2.0 + 1.0
    ranks = np.empty(len(x))
    ranks[order] = avg[run]
    return ranks


def pearson_r(x, y) -> float:
    x, y = _pair(x, y)
    dx, dy = x - x.mean(), y - y.mean()
    sx, sy = np.sqrt(dx @ dx), np.sqrt(dy @ dy)
    if sx == 0 or sy == 0:
        raise Undefined("one of the two score lists is constant (all models tied)")
    return float(np.clip((dx @ dy) / (sx * sy), -1.0, 1.0))


def spearman_rho(x, y) -> float:
    x, y = _pair(x, y)
    return pearson_r(rankdata(x), rankdata(y))


def kendall_tau_b(x, y) -> float:
    """Kendall's tau-b: (concordant - discordant) / sqrt(pairs untied in x * pairs untied in y).

    All pairs at once through sign matrices; n is a number of models, so n^2 is small.
    """
    x, y = _pair(x, y)
    sx = np.sign(x[:, None] - x[None, :])
    sy = np.sign(y[:, None] - y[None, :])
    iu = np.triu_indices(len(x), k=1)
    sx, sy = sx[iu], sy[iu]
    untied_x = np.count_nonzero(sx)
    untied_y = np.count_nonzero(sy)
    if untied_x == 0 or untied_y == 0:
        raise Undefined("one of the two score lists is constant (all models tied)")
    return float((sx * sy).sum() / np.sqrt(float(untied_x) * float(untied_y)))


def identical_ranking(x, y) -> bool:
    """Same order of every pair of models (ties must match too)."""
    x, y = _pair(x, y)
    return bool(np.array_equal(rankdata(x), rankdata(y)))


def adjacent_swaps(x, y) -> int:
    """Neighbours in x's leaderboard (best first) that y puts in the opposite order."""
    x, y = _pair(x, y)
    order = np.lexsort((np.arange(len(x)), -x))  # stable: ties keep input order
    xs, ys = x[order], y[order]
    # A swap needs a strict order on both sides; a tie in either is not a flip.
    return int(np.count_nonzero((xs[:-1] > xs[1:]) & (ys[:-1] < ys[1:])))


def confusion_matrix(a, b, n_categories: int) -> np.ndarray:
    """Counts[i, j] of items that rater a put in category i and rater b in category j."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    k = n_categories
    return np.bincount(a * k + b, minlength=k * k).reshape(k, k)


def cohen_kappa(confusion) -> float:
    """Cohen's kappa from a square confusion matrix (unweighted)."""
    c = np.asarray(confusion, dtype=float)
    n = c.sum()
    if n == 0:
        raise Undefined("no items rated by both")
    p_o = np.trace(c) / n
    p_e = (c.sum(axis=1) @ c.sum(axis=0)) / (n * n)
    if p_e >= 1.0:
        raise Undefined("both raters used one and the same category for every item, "
                        "so chance agreement is 1")
    return float((p_o - p_e) / (1.0 - p_e))


def _delta2(level: str, n_c: np.ndarray) -> np.ndarray:
    k = len(n_c)
    idx = np.arange(k)
    if level == "nominal":
        return (idx[:, None] != idx[None, :]).astype(float)
    if level == "ordinal":
        # Krippendorff's ordinal metric: (sum of n_g for g between c and k, minus half of
        # the two end counts) squared; it depends on how the values are used, not on codes.
        cum = np.r_[0.0, np.cumsum(n_c)]
        lo = np.minimum(idx[:, None], idx[None, :])
        hi = np.maximum(idx[:, None], idx[None, :])
        between = cum[hi + 1] - cum[lo]
        return (between - (n_c[:, None] + n_c[None, :]) / 2.0) ** 2
    raise ValueError(f"level must be 'nominal' or 'ordinal', not {level!r}")


def coincidence_matrix(data, n_values: int) -> np.ndarray:
    """Krippendorff's coincidence matrix of raters x units codes 0..n_values-1 (negative =
    missing). Units with fewer than two values are not pairable and add nothing.

    With n_uc the count of value c in unit u and m_u its number of values,

        o[c, d] = sum over units with m_u >= 2 of (n_uc n_ud - [c = d] n_uc) / (m_u - 1).

    A unit enters only through its count vector (n_u1 ... n_uk), and a few raters give few
    distinct vectors (at most C(raters + k, k)): each unit is coded as one integer (its counts
    as digits in base raters + 1), the codes are counted, and the sum runs over the distinct
    vectors, not over the million units of a paper-scale panel."""
    data = np.asarray(data)
    if data.ndim != 2:
        raise ValueError("data must be raters x units")
    k, base = n_values, data.shape[0] + 1
    if base ** k >= 2**63:
        raise ValueError(f"{data.shape[0]} raters and {k} values are too many to code a unit as one int64")
    if data.size and data.max() >= k:
        raise ValueError(f"codes must be below n_values ({k}); got {data.max()}")
    place = base ** np.arange(k, dtype=np.int64)
    code = np.zeros(data.shape[1], dtype=np.int64)
    for row in data:  # one rater at a time: no (raters x units) temporary
        code += np.where(row >= 0, place[np.maximum(row, 0)], 0)
    kinds, freq = count_codes(code, base ** k)
    counts = (kinds[:, None] // place) % base  # (distinct vectors, k)
    m = counts.sum(axis=1)
    pairable = m >= 2
    counts, w = counts[pairable].astype(float), freq[pairable] / (m[pairable] - 1.0)
    return (counts * w[:, None]).T @ counts - np.diag(w @ counts)


def count_codes(code: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values, how often each occurs) of non-negative ints below `size`: one count
    where the values are dense, a sort where they are sparse."""
    if size <= 8 * len(code) + 1024:
        freq = np.bincount(code, minlength=size)
        kinds = np.flatnonzero(freq)
        return kinds, freq[kinds]
    return np.unique(code, return_counts=True)


def alpha_from_coincidence(coincidence, level: str = "nominal") -> float:
    """Krippendorff's alpha from a coincidence matrix (ordinal: rows in the scale's order)."""
    o = np.asarray(coincidence, dtype=float)
    n_c = o.sum(axis=1)
    n = n_c.sum()
    if n == 0:
        raise Undefined("no unit has values from two raters")
    d2 = _delta2(level, n_c)
    expected = (np.outer(n_c, n_c) * d2).sum()
    if expected == 0:
        raise Undefined("every pairable value is the same category, so expected "
                        "disagreement is 0")
    return float(1.0 - (n - 1.0) * (o * d2).sum() / expected)


def krippendorff_alpha(data, n_values: int, level: str = "nominal") -> float:
    """Krippendorff's alpha for raters x units codes 0..n_values-1, negative = missing.

    For ordinal data the codes must be in the scale's order. Units with fewer than two
    values are not pairable and drop out, as in Krippendorff's definition.
    """
    return alpha_from_coincidence(coincidence_matrix(data, n_values), level)


def percentile_ci(samples, level: float = 0.95) -> tuple[float, float]:
    s = np.asarray(samples, dtype=float)
    tail = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.percentile(s, [tail, 100.0 - tail], axis=0)
    return float(lo), float(hi)


def bootstrap_means(weights: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per bootstrap row, the weighted mean of each column of `values` (questions x models).

    NaN marks a question a model has no score for; it counts for neither numerator nor
    denominator. A row that drew none of a model's questions gives NaN for that model.
    """
    v = np.asarray(values, dtype=float)
    have = np.isfinite(v)
    num = weights @ np.where(have, v, 0.0)
    # Every value present (a complete run): each column's denominator is the row's number of
    # draws, the same sum of whole numbers, exactly, without a second matrix product.
    den = weights.sum(axis=1, keepdims=True) if have.all() else weights @ have.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / den


def paired_difference(boot_a: np.ndarray, boot_b: np.ndarray, level: float = 0.95) -> dict:
    """Percentile CI of a - b from bootstrap means drawn with the same question rows.

    `distinguishable` says whether the CI excludes zero.
    """
    d = np.asarray(boot_a, dtype=float) - np.asarray(boot_b, dtype=float)
    d = d[np.isfinite(d)]
    if len(d) == 0:
        raise Undefined("the two models share no question")
    lo, hi = percentile_ci(d, level)
    return {"ci95": [lo, hi], "distinguishable": bool(lo > 0 or hi < 0)}
