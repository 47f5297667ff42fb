"""The scoring arithmetic: verdict codes -> tier scores -> response scores -> GAMUT scores,
with bootstrap CIs. Pure numpy on integer-coded arrays; no file I/O (the `score` stage reads
the files and calls this).

Per response and tier, with M, P, S, C the counts of meets, partially_meets, missing and
contradicts::

    s = (M + λP + μC) / (M + P + S + |μ|C)        λ = partial_credit = 0.5, μ = contradiction_weight = -2

The response score is the weighted mean of its tier scores (0.6 / 0.3 / 0.1 for
answer_critical / valuable / context); a tier with no checks gives its weight to the present
tiers in proportion. A response score lies in [-1, 1]; a model's GAMUT score is 100 x the mean
of its response scores.

Everything works on integer-coded arrays (codes in `vocab`), so 10 million verdicts score in
well under a second: one `np.bincount` builds every (response, tier, verdict) count at once.
"""

from __future__ import annotations

import numpy as np

from gamut_local.vocab import (
    CONTRADICTION_WEIGHT,
    PARTIAL_CREDIT,
    TIER_WEIGHTS,
    TIERS,
    VERDICT_CODE,
    VERDICTS,
)

N_TIERS, N_VERDICTS = len(TIERS), len(VERDICTS)
INVALID = VERDICT_CODE["invalid"]
INVALID_AS = ("missing", "exclude")


def verdict_counts(verdict, tier, response, n_responses: int) -> np.ndarray:
    """Counts of shape (3 tiers, 5 verdict codes, n_responses), invalid included.

    (tier, verdict)-major: the pair is one small code, so the flat index takes two passes
    (code x n + response) with no temporary, and each (tier, verdict) count is one contiguous
    row that the formula works on whole.
    """
    code = np.asarray(tier, dtype=np.int8) * N_VERDICTS + np.asarray(verdict, dtype=np.int8)
    response = np.asarray(response)
    flat = np.multiply(code, n_responses, dtype=response.dtype if response.dtype == np.int32 and
                       N_TIERS * N_VERDICTS * n_responses < 2**31 else np.int64)
    flat += response
    counts = np.bincount(flat, minlength=N_TIERS * N_VERDICTS * n_responses)
    return counts.reshape(N_TIERS, N_VERDICTS, n_responses)


def score_counts(counts: np.ndarray, *, partial_credit: float = PARTIAL_CREDIT,
                 contradiction_weight: float = CONTRADICTION_WEIGHT, tier_weights=TIER_WEIGHTS,
                 invalid_as: str = "missing") -> tuple[np.ndarray, np.ndarray]:
    """(scores[n], tier_scores[n, 3]) from `verdict_counts`; NaN where nothing was graded.

    `invalid` verdicts count as `missing` (the default: the judge gave no usable grade, so the
    response gets no credit) or are left out (`invalid_as="exclude"`).
    """
    if invalid_as not in INVALID_AS:
        raise ValueError(f"invalid_as must be one of {INVALID_AS}, got {invalid_as!r}")
    m, p, s, c, invalid = (counts[:, v, :] for v in range(N_VERDICTS))
    num = m + partial_credit * p + contradiction_weight * c
    den = (m + p + s + (invalid if invalid_as == "missing" else 0)) + abs(contradiction_weight) * c
    with np.errstate(invalid="ignore", divide="ignore"):
        tier_scores = num / den  # (3, n); 0 / 0 = NaN: a tier without graded checks
        w = np.asarray(tier_weights, dtype=np.float64)
        present = ~np.isnan(tier_scores)
        # Absent tiers drop out of both sums: their weight goes to the others in proportion.
        scores = w @ np.where(present, tier_scores, 0.0) / (w @ present)
    return scores, tier_scores.T


def score_responses(verdict, tier, response, n_responses: int, *, partial_credit: float = PARTIAL_CREDIT,
                    contradiction_weight: float = CONTRADICTION_WEIGHT, tier_weights=TIER_WEIGHTS,
                    invalid_as: str = "missing") -> tuple[np.ndarray, np.ndarray]:
    """Per-response overall scores and per-response-per-tier scores.

    Parameters
    ----------
    verdict, tier, response : int arrays of equal length, one entry per graded check
        Verdict codes (meets=0 ... invalid=4), tier codes (answer_critical=0 ... context=2),
        and the index of the response each check belongs to (0 <= response < n_responses).
    n_responses : int
    partial_credit, contradiction_weight : float
        λ and μ of the formula.
    tier_weights : 3 floats
    invalid_as : "missing" or "exclude"

    Returns
    -------
    scores : float array (n_responses,), in [-1, 1]; NaN for a response with no graded check.
    tier_scores : float array (n_responses, 3); NaN where a response has no check of a tier.
    """
    counts = verdict_counts(verdict, tier, response, n_responses)
    return score_counts(counts, partial_credit=partial_credit, contradiction_weight=contradiction_weight,
                        tier_weights=tier_weights, invalid_as=invalid_as)


def score_responses_reference(verdict, tier, response, n_responses: int, *, partial_credit=PARTIAL_CREDIT,
                              contradiction_weight=CONTRADICTION_WEIGHT, tier_weights=TIER_WEIGHTS,
                              invalid_as="missing"):
    """The formula written as a plain per-response loop: the readable definition that tests and
    the benchmark hold `score_responses` to. Not for use on real data (it is ~100x slower)."""
    by_response: list[list[tuple[int, int]]] = [[] for _ in range(n_responses)]
    for v, t, r in zip(verdict, tier, response):
        by_response[int(r)].append((int(v), int(t)))
    scores = np.full(n_responses, np.nan)
    tier_scores = np.full((n_responses, N_TIERS), np.nan)
    for r, graded in enumerate(by_response):
        total = weight = 0.0
        for t in range(N_TIERS):
            n = [0, 0, 0, 0]
            for v, vt in graded:
                if vt != t or (v == INVALID and invalid_as == "exclude"):
                    continue
                n[VERDICT_CODE["missing"] if v == INVALID else v] += 1
            den = n[0] + n[1] + n[2] + abs(contradiction_weight) * n[3]
            if den:
                s = (n[0] + partial_credit * n[1] + contradiction_weight * n[3]) / den
                tier_scores[r, t] = s
                total += tier_weights[t] * s
                weight += tier_weights[t]
        if weight:
            scores[r] = total / weight
    return scores, tier_scores


def bootstrap_weights(n_questions: int, n_boot: int = 1000, seed: int = 0) -> np.ndarray:
    """(n_boot, n_questions) multiplicities: how often each question is drawn in each resample.

    Resampling questions as counts turns every bootstrap mean into one matrix product, and
    using the same draws for every model makes differences between models paired. Each row
    counts `n_questions` uniform draws with replacement, a multinomial row: counted by
    `bincount`, a block of rows at a time (the draws never take more than ~16 MB beside the
    result), 3x faster than numpy's `multinomial`, which chains a binomial per question
    (0.08 s of `score` at 1,813 questions, against 0.024).
    """
    rng = np.random.default_rng(seed)
    out = np.zeros((n_boot, n_questions), dtype=np.int64)
    step = max(1, 2**21 // max(n_questions, 1))  # rows drawn at a time: ~16 MB of draws beside the result
    for start in range(0, n_boot if n_questions else 0, step):
        draws = rng.integers(0, n_questions, size=(min(step, n_boot - start), n_questions))
        draws += np.arange(len(draws))[:, None] * n_questions  # row r's draws count in its own bins
        out[start:start + len(draws)] = np.bincount(draws.ravel(), minlength=draws.size).reshape(draws.shape)
    return out
