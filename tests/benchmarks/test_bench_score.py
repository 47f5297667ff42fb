"""pytest-benchmark entry for the scorer (timed only with `pytest --benchmark-enable`).

The figures in docs/performance.md come from scripts/bench_score.py, which also times the loop.
"""

import numpy as np

from gamut_local.analysis.metrics import score_responses, score_responses_reference
from tests.support.synthetic import scorer_arrays


def test_bench_score_responses(benchmark):
    v, t, r = scorer_arrays(1_000_000, 70_000)
    scores, tiers = benchmark(score_responses, v, t, r, 70_000)
    head = r < 2_000  # the loop is slow: hold the vectorised result to it on a slice
    ref_scores, ref_tiers = score_responses_reference(v[head], t[head], r[head], 2_000)
    np.testing.assert_allclose(scores[:2_000], ref_scores, atol=1e-12, equal_nan=True)
    np.testing.assert_allclose(tiers[:2_000], ref_tiers, atol=1e-12, equal_nan=True)
