"""Every table of the report, from the response scores (`scoring.Scores`) and the agreement
(`agreement.agree_panel`, or None with fewer than two judges): leaderboards with CIs and
neighbour tests, tiers, verdict rates, domains, judges side by side, variant comparisons,
and, as sentences, what could not be computed and why. Full precision; the Markdown rounds.
"""

from __future__ import annotations

import numpy as np

from gamut_local.analysis.agreement import GOLD
from gamut_local.analysis.comparisons import neighbour_tests, variant_comparison
from gamut_local.analysis.scoring import Scores, bootstrap, domain_rows, model_rows, system_scores


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
    """Leaderboard, tier and verdict rows, neighbour tests and variant comparison per judge."""
    by_key = {(m["judge"], m["model"], m["variant"]): m for m in model_rows(scores, boot)}
    out = {"leaderboard": [], "tiers": [], "verdicts": [], "neighbours": [], "variants": {}}
    for j, judge in enumerate(scores.judges):
        unscored = [labels[i] for i in np.flatnonzero(~np.isfinite(gamut[j]))]
        if unscored:
            missing.append(f"Judge `{judge}` graded no response of {', '.join(unscored)}; "
                           "left out of its leaderboard.")
        order = [i for i in np.lexsort((np.arange(len(gamut[j])), -gamut[j])) if np.isfinite(gamut[j][i])]
        for rank, i in enumerate(order, start=1):
            m = by_key[(judge, *scores.systems[i])]
            base = {"judge": judge, "model": m["model"], "variant": m["variant"], "label": labels[i]}
            out["leaderboard"].append({**base, "rank": rank, "gamut_score": m["gamut_score"],
                                       "ci95_low": m["ci95"][0], "ci95_high": m["ci95"][1],
                                       "n_responses": m["n_responses"]})
            out["tiers"].append({**base, **m["tier_scores"]})
            out["verdicts"].append({**base, **m["verdict_rates"]})
        out["neighbours"] += [{"judge": judge, **row} for row in neighbour_tests(labels, gamut[j], boot[j])]
        out["variants"][judge] = variant_comparison(scores.systems, gamut[j])
        for key, why in out["variants"][judge]["notes"].items():
            missing.append(f"Variant comparison, judge `{judge}`, {key}: {why}.")
    return out


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
    """Every table of the report; `missing` lists, as sentences, what could not be computed."""
    missing: list[str] = []
    labels = system_labels(scores.systems)
    gamut, boot = system_scores(scores), bootstrap(scores)
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
    }



