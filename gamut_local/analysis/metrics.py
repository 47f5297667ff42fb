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

from dataclasses import dataclass

import numpy as np

from gamut_local.vocab import (
    CONTRADICTION_WEIGHT,
    PARTIAL_CREDIT,
    TIER_CODE,
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
    flat = np.multiply(code, n_responses, dtype=np.int64)
    flat += np.asarray(response)
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


@dataclass
class VerdictTable:
    """Verdict records as integer arrays. A response is one (judge, model, variant, question)."""

    verdict: np.ndarray  # int8 codes, one per graded check
    tier: np.ndarray  # int8 codes
    response: np.ndarray  # int64 index into `responses`
    responses: list[tuple[str, str, str, str]]  # (judge, model, variant, question_id)


def verdict_table(records) -> VerdictTable:
    """Integer-code verdict dicts (as written by the judge stage)."""
    index: dict[tuple, int] = {}
    n = len(records)
    verdict = np.empty(n, dtype=np.int8)
    tier = np.empty(n, dtype=np.int8)
    response = np.empty(n, dtype=np.int64)
    for i, r in enumerate(records):
        key = (r["judge"], r["model"], r.get("variant", "multimodal"), r["question_id"])
        response[i] = index.setdefault(key, len(index))
        verdict[i] = VERDICT_CODE[r["verdict"]]
        tier[i] = TIER_CODE[r["tier"]]
    return VerdictTable(verdict, tier, response, list(index))


def bootstrap_weights(n_questions: int, n_boot: int = 1000, seed: int = 0) -> np.ndarray:
    """(n_boot, n_questions) multiplicities: how often each question is drawn in each resample.

    Resampling questions as counts turns every bootstrap mean into one matrix product, and
    using the same draws for every model makes differences between models paired.
    """
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_questions, np.full(n_questions, 1.0 / n_questions), size=n_boot)


def grouped_means(values: np.ndarray, group: np.ndarray, n_groups: int) -> np.ndarray:
    """Mean of `values` per group, ignoring NaN; NaN for a group with no value."""
    ok = ~np.isnan(values)
    sums = np.bincount(group[ok], weights=values[ok], minlength=n_groups)
    counts = np.bincount(group[ok], minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _r(x, digits: int = 4):
    x = float(x)
    return None if np.isnan(x) else round(x, digits)


def score_table(table: VerdictTable, domains: dict[str, str] | None = None, *, seed: int = 0,
                n_boot: int = 1000, responses: bool = True, **formula) -> dict:
    """Scores for every (judge, model, variant) in a verdict table.

    Returns ``{"models": [{judge, model, variant, gamut_score, tier_scores, verdict_rates,
    n_responses, ci95}], "responses": [{judge, model, variant, question_id, score,
    tier_scores}]}`` and, given ``domains`` (question_id -> domain), ``"domains"`` with one
    entry per (judge, model, variant, domain). Scores are in points (x100) except response
    scores, which are in [-1, 1]. ``responses=False`` leaves out the per-response list (one
    dict per response is most of the time at GAMUT scale) for callers that only need the
    per-model tables.
    """
    n = len(table.responses)
    scores, tier_scores = score_responses(table.verdict, table.tier, table.response, n, **formula)
    systems = sorted({k[:3] for k in table.responses})
    sys_index = {s: i for i, s in enumerate(systems)}
    questions = sorted({k[3] for k in table.responses})
    q_index = {q: i for i, q in enumerate(questions)}
    g = np.fromiter((sys_index[k[:3]] for k in table.responses), dtype=np.int64, count=n)
    q = np.fromiter((q_index[k[3]] for k in table.responses), dtype=np.int64, count=n)
    G, Q = len(systems), len(questions)

    mean = grouped_means(scores, g, G)
    tier_means = np.stack([grouped_means(tier_scores[:, t], g, G) for t in range(N_TIERS)], axis=1)
    n_resp = np.bincount(g[~np.isnan(scores)], minlength=G)
    rates = np.bincount(g[table.response] * N_VERDICTS + table.verdict, minlength=G * N_VERDICTS)
    rates = rates.reshape(G, N_VERDICTS) / np.maximum(rates.reshape(G, N_VERDICTS).sum(1, keepdims=True), 1)

    # Percentile bootstrap over questions, all systems on the same draws.
    by_question = np.zeros((G, Q))
    present = np.zeros((G, Q))
    ok = ~np.isnan(scores)
    by_question[g[ok], q[ok]] = scores[ok]
    present[g[ok], q[ok]] = 1.0
    w = bootstrap_weights(Q, n_boot, seed).T.astype(np.float64)  # (Q, B)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = (by_question @ w) / (present @ w)
    lo, hi = np.nanpercentile(boot, [2.5, 97.5], axis=1) if G else (np.array([]), np.array([]))

    models = [{
        "judge": s[0], "model": s[1], "variant": s[2],
        "gamut_score": _r(100 * mean[i], 2),
        "tier_scores": {t: _r(100 * tier_means[i, j], 2) for j, t in enumerate(TIERS)},
        "verdict_rates": {v: _r(rates[i, j]) for j, v in enumerate(VERDICTS)},
        "n_responses": int(n_resp[i]),
        "ci95": [_r(100 * lo[i], 2), _r(100 * hi[i], 2)],
    } for i, s in enumerate(systems)]
    result = {"models": models}
    if responses:
        result["responses"] = [{
            "judge": k[0], "model": k[1], "variant": k[2], "question_id": k[3],
            "score": _r(scores[i]), "tier_scores": {t: _r(tier_scores[i, j]) for j, t in enumerate(TIERS)},
        } for i, k in enumerate(table.responses)]
    if domains is not None:
        result["domains"] = _domain_scores(table, scores, g, systems, domains)
    return result


def _domain_scores(table, scores, g, systems, domains) -> list[dict]:
    names = sorted(set(domains.values()))
    d_index = {d: i for i, d in enumerate(names)}
    # Responses whose question is not in the dataset are grouped under "unknown", not dropped.
    d = np.fromiter((d_index.get(domains.get(k[3]), len(names)) for k in table.responses),
                    dtype=np.int64, count=len(table.responses))
    labels = names + ["unknown"]
    cell = g * len(labels) + d
    means = grouped_means(scores, cell, len(systems) * len(labels))
    counts = np.bincount(cell[~np.isnan(scores)], minlength=len(systems) * len(labels))
    return [{"judge": s[0], "model": s[1], "variant": s[2], "domain": dom,
             "gamut_score": _r(100 * means[i * len(labels) + j], 2),
             "n_responses": int(counts[i * len(labels) + j])}
            for i, s in enumerate(systems) for j, dom in enumerate(labels)
            if counts[i * len(labels) + j]]
