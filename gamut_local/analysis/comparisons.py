"""Comparisons between models from their GAMUT scores: text-only versus multimodal, and the
leaderboard's neighbours.

Variant comparison: for models answered in both variants, the text_only minus multimodal
gain per model, the Pearson correlation between multimodal score and gain (GAMUT finds the
gain nearly constant, i.e. r close to 0), and Kendall's tau-b between the two rankings.
Neighbours in the leaderboard: a paired bootstrap over questions for each pair of adjacent
models; is their difference distinguishable from zero at 95%?

Full precision; None where a value does not exist (NaN scores: a judge scored nothing).
"""

from __future__ import annotations

import numpy as np

from gamut_local.analysis import stats


def _value(x) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def variant_comparison(systems: list[tuple[str, str]], scores) -> dict:
    """Compare the variants of each model from system scores (points, NaN = not scored).

    Returns ``{"models": [{model, multimodal, text_only, gain}], "n_models",
    "mean_gain", "pearson_r_multimodal_gain", "kendall_tau_b_rankings", "notes"}``;
    a statistic that has no value is null and `notes` says why.
    """
    scores = np.asarray(scores, dtype=float)
    by = {s: float(v) for s, v in zip(systems, scores) if np.isfinite(v)}
    models = sorted({m for m, v in by if (m, "multimodal") in by and (m, "text_only") in by})
    mm = np.array([by[(m, "multimodal")] for m in models])
    to = np.array([by[(m, "text_only")] for m in models])
    gain = to - mm
    notes: dict[str, str] = {}
    out = {"models": [{"model": m, "multimodal": _value(a), "text_only": _value(b), "gain": _value(g)}
                      for m, a, b, g in zip(models, mm, to, gain)],
           "n_models": len(models)}
    if not models:
        notes["models"] = "no model was scored in both variants (multimodal and text_only)"
    out["mean_gain"] = _value(gain.mean()) if len(models) else None
    for key, fn, x, y in (("pearson_r_multimodal_gain", stats.pearson_r, mm, gain),
                          ("kendall_tau_b_rankings", stats.kendall_tau_b, mm, to)):
        value, why = stats.defined(fn, x, y) if len(models) else (None, None)
        out[key] = _value(value)
        if why:
            notes[key] = why
    out["notes"] = notes
    return out


def neighbour_tests(names: list[str], scores, boot) -> list[dict]:
    """Paired bootstrap for each adjacent pair of the leaderboard (best first).

    `scores` are the systems' GAMUT scores (points) and `boot` their bootstrap means
    (n_boot x systems, points) drawn with the same question resamples for every system,
    which is what makes each difference paired.
    """
    scores = np.asarray(scores, dtype=float)
    ranked = [i for i in np.lexsort((np.arange(len(scores)), -scores)) if np.isfinite(scores[i])]
    rows = []
    for hi, lo in zip(ranked[:-1], ranked[1:]):
        row = {"higher": names[hi], "lower": names[lo], "diff": _value(scores[hi] - scores[lo])}
        try:
            test = stats.paired_difference(boot[:, hi], boot[:, lo])
            row.update(ci95=[_value(test["ci95"][0]), _value(test["ci95"][1])],
                       distinguishable=test["distinguishable"], note=None)
        except stats.Undefined as e:
            row.update(ci95=[None, None], distinguishable=None, note=str(e))
        rows.append(row)
    return rows
