"""Model-versus-model comparisons on one judge's scores.

- Variant comparison: for models answered in both variants, the text_only minus multimodal
  gain per model, the Pearson correlation between multimodal score and gain (GAMUT finds the
  gain nearly constant, i.e. r close to 0), and Kendall's tau-b between the two rankings.
- Neighbours in the leaderboard: a paired bootstrap over questions for each pair of adjacent
  models; is their difference distinguishable from zero at 95%?
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import stats
from .errors import InputError, Problem


def _r(x, digits=4):
    return None if x is None or not np.isfinite(x) else round(float(x), digits)


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
    out = {"models": [{"model": m, "multimodal": _r(a, 2), "text_only": _r(b, 2), "gain": _r(g, 2)}
                      for m, a, b, g in zip(models, mm, to, gain)],
           "n_models": len(models)}
    if not models:
        notes["models"] = "no model was scored in both variants (multimodal and text_only)"
    out["mean_gain"] = _r(gain.mean(), 2) if len(models) else None
    for key, fn, x, y in (("pearson_r_multimodal_gain", stats.pearson_r, mm, gain),
                          ("kendall_tau_b_rankings", stats.kendall_tau_b, mm, to)):
        value, why = stats.defined(fn, x, y) if len(models) else (None, None)
        out[key] = _r(value)
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
        row = {"higher": names[hi], "lower": names[lo], "diff": _r(scores[hi] - scores[lo], 2)}
        try:
            test = stats.paired_difference(boot[:, hi], boot[:, lo])
            row.update(ci95=[_r(test["ci95"][0], 2), _r(test["ci95"][1], 2)],
                       distinguishable=test["distinguishable"], note=None)
        except stats.Undefined as e:
            row.update(ci95=[None, None], distinguishable=None, note=str(e))
        rows.append(row)
    return rows


def compare_scores_file(path: Path) -> dict:
    """Variant comparison for every judge in a `gamut-local score` output file."""
    name = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError([Problem(name, None, "", "file not found")])
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError([Problem(name, None, "", f"not a JSON file: {e}")])
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, list):
        raise InputError([Problem(name, None, "models", "expected the `models` list that `gamut-local score` writes")])
    problems, by_judge = [], {}
    for i, m in enumerate(models):
        missing = [k for k in ("judge", "model", "variant", "gamut_score") if not isinstance(m, dict) or k not in m]
        if missing:
            problems.append(Problem(name, None, f"models.{i}", "missing " + ", ".join(missing)))
            continue
        score = m["gamut_score"]
        if score is not None and not isinstance(score, (int, float)):
            problems.append(Problem(name, None, f"models.{i}.gamut_score", "expected a number or null"))
            continue
        by_judge.setdefault(m["judge"], []).append(((m["model"], m["variant"]),
                                                    np.nan if score is None else float(score)))
    if problems:
        raise InputError(problems)
    return {judge: variant_comparison([s for s, _ in rows], [v for _, v in rows])
            for judge, rows in sorted(by_judge.items())}
