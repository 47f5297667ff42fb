"""Every table of the report, from the response scores (`scoring.Scores`) and the agreement
(`agreement.agree_panel`, or None with fewer than two judges): leaderboards with CIs and
neighbour tests, tiers, verdict rates, domains, judges side by side, variant comparisons,
and, as sentences, what could not be computed and why. Full precision; the Markdown rounds.

Each judge's leaderboard ranks its systems, tests neighbours and compares variants on the
questions every one of its systems has complete (`scoring.common_questions`): with complete
coverage those are all the questions and the scores are `scores.json`'s; otherwise (allowed
by the caller: `scoring.require_complete`) each row says on how many questions it was
ranked and whether the system is complete.
"""

from __future__ import annotations

import numpy as np

from gamut_local.analysis.agreement import GOLD
from gamut_local.analysis.comparisons import neighbour_tests, variant_comparison
from gamut_local.analysis.scoring import (
    Scores,
    common_questions,
    common_scores,
    coverage,
    coverage_gaps,
    domain_rows,
    model_rows,
    system_scores,
)


def system_labels(systems: list[tuple[str, str]]) -> list[str]:
    """`model` alone when the run has one variant, else `model (mm)` / `model (text)`."""
    if len({v for _, v in systems}) <= 1:
        return [m for m, _ in systems]
    short = {"multimodal": "mm", "text_only": "text"}
    return [f"{m} ({short.get(v, v)})" for m, v in systems]


def _value(x) -> float | None:
    return None if not np.isfinite(x) else float(x)


def _judge_tables(scores: Scores, labels: list[str], gamut: np.ndarray, boot: np.ndarray,
                  missing: list[str]) -> dict:
    """Leaderboard, tier and verdict rows, neighbour tests and variant comparison per judge,
    systems compared on the questions every one of them has complete."""
    by_key = {(m["judge"], m["model"], m["variant"]): m for m in model_rows(scores, boot)}
    complete = coverage(scores)["complete"]
    out = {"leaderboard": [], "tiers": [], "verdicts": [], "neighbours": [], "variants": {}}
    for j, judge in enumerate(scores.judges):
        unscored = [labels[i] for i in np.flatnonzero(~np.isfinite(gamut[j]))]
        if unscored:
            missing.append(f"Judge `{judge}` graded no response of {', '.join(unscored)}; "
                           "left out of its leaderboard.")
        common = common_questions(scores, j)
        as_written = bool(complete[j][scores.graded[j]].all())
        if as_written:  # all complete: the very numbers (and CIs) of scores.json
            points, draws = gamut[j], boot[j]
        else:
            points, draws = common_scores(scores, j, common)
            points = np.where(np.isfinite(gamut[j]), points, np.nan)
        n_common = int(common.sum())
        if n_common == 0 and not as_written:
            missing.append(f"Leaderboard, judge `{judge}`: its systems share no question that each has "
                           "complete, so no score compares them (no rank, no score); judge the missing "
                           "verdicts, or report each system's questions on their own.")
        order = [i for i in np.lexsort((np.arange(len(points)), -np.nan_to_num(points, nan=-np.inf)))
                 if np.isfinite(gamut[j][i])]
        for rank, i in enumerate(order, start=1):
            m = by_key[(judge, *scores.systems[i])]
            lo, hi = m["ci95"] if as_written else _ci(draws[:, i])
            base = {"judge": judge, "model": m["model"], "variant": m["variant"], "label": labels[i]}
            rank = rank if np.isfinite(points[i]) else None  # no score on common questions: no place in the order
            out["leaderboard"].append({**base, "rank": rank, "gamut_score": _value(points[i]),
                                       "ci95_low": lo, "ci95_high": hi, "n_responses": m["n_responses"],
                                       "n_questions": n_common, "complete": m["complete"],
                                       "n_complete_responses": m["n_complete_responses"],
                                       "n_expected_questions": m["n_questions"]})
            out["tiers"].append({**base, **m["tier_scores"]})
            out["verdicts"].append({**base, **m["verdict_rates"]})
        out["neighbours"] += [{"judge": judge, **row} for row in neighbour_tests(labels, points, draws)]
        out["variants"][judge] = {**variant_comparison(scores.systems, points), "n_questions": n_common}
        for key, why in out["variants"][judge]["notes"].items():
            missing.append(f"Variant comparison, judge `{judge}`, {key}: {why}.")
    return out


def _ci(draws: np.ndarray) -> list:
    d = draws[np.isfinite(draws)]
    return [float(x) for x in np.percentile(d, [2.5, 97.5])] if len(d) else [None, None]


def _agreement_notes(scores: Scores, agreement: dict | None, missing: list[str]) -> None:
    if agreement is None:
        missing.append(f"Judge agreement: the run has one judge (`{scores.judges[0]}`); "
                       "agreement needs at least two.")
        return
    for key, why in agreement["notes"].items():
        missing.append(f"Agreement {key}: {why}.")
    if GOLD not in scores.judges:
        missing.append("Calibration against gold: no judge named `gold` in the run, so "
                       "no judge is compared with human verdicts.")


def report_tables(scores: Scores, agreement: dict | None) -> dict:
    """Every table of the report; `missing` lists, as sentences, what could not be computed,
    `incomplete` each incomplete (judge, system)."""
    missing: list[str] = []
    labels = system_labels(scores.systems)
    gamut, boot = system_scores(scores), scores.boot
    per_judge = _judge_tables(scores, labels, gamut, boot, missing)
    _agreement_notes(scores, agreement, missing)
    domains = domain_rows(scores)
    if domains is not None:
        label_of = dict(zip(scores.systems, labels))
        domains = [{**d, "label": label_of[(d["model"], d["variant"])]} for d in domains]
        if any(d["domain"] == "unknown" for d in domains):
            missing.append("Some questions in the verdicts are not in the dataset; their "
                           "responses are grouped under domain `unknown`.")
    return {
        "judges": scores.judges,
        "systems": [{"model": m, "variant": v, "label": lab} for (m, v), lab in zip(scores.systems, labels)],
        "n_questions": len(scores.questions),
        "n_verdicts": {j: int(scores.counts[i].sum()) for i, j in enumerate(scores.judges)},
        **per_judge,
        "judge_scores": [{"model": m, "variant": v, "label": lab,
                          **{j: _value(gamut[k, i]) for k, j in enumerate(scores.judges)}}
                         for i, ((m, v), lab) in enumerate(zip(scores.systems, labels))],
        "agreement": agreement,
        "domains": domains,
        "missing": missing,
        "coverage_from": "dataset" if scores.from_dataset else "verdicts",
        "incomplete": [g[-1] for g in coverage_gaps(scores)],
    }



