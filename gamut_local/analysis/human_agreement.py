"""Agreement between people on the calibration sample's overlap (the responses a team's
assignment gives to two annotators, `analysis.assignment`), on arrays only: Krippendorff's
alpha over all the people (nominal and ordinal) and Cohen's kappa for each pair, with the
disagreements a third person has not adjudicated yet.

The corrected scores take the humans' labels as the truth. These figures say how far that
holds: where people agree with each other less than a model judge agrees with them, the
"truth" is the noisier party, and a corrected score is the score of one noisy person, not of
"the humans". The statistics are those `analysis.agreement` computes for judges
(`analysis.stats`: one coincidence matrix, one kappa), not a second implementation.
"""

from __future__ import annotations

import itertools

import numpy as np

from gamut_local.analysis import stats
from gamut_local.analysis.agreement import ORDINAL_CODE
from gamut_local.vocab import VERDICTS

INVALID = VERDICTS.index("invalid")


def krippendorff_alpha(codes: np.ndarray) -> tuple[dict, dict]:
    """Krippendorff's alpha of people x cells verdict codes, nominal and ordinal.

    Parameters
    ----------
    codes : int array (people, cells)
        Verdict codes (positions in `vocab.VERDICTS`); -1 where that person gave no verdict.
        `invalid` says nothing about the response and counts as no verdict.

    Returns
    -------
    alpha : dict
        {"nominal": float | None, "ordinal": float | None}; None where undefined.
    notes : dict
        {level: why} for each None.

    Notes
    -----
    With the coincidence matrix over the cells that two or more people graded,

        o_ck = sum over cells u of  sum over ordered pairs of values (c, k) in u from
               different people / (m_u - 1),      m_u: the values in cell u,

    n_c = sum_k o_ck and n = sum_c n_c,

        alpha = 1 - D_o / D_e = 1 - (n - 1) * sum_ck o_ck delta2_ck / sum_ck n_c n_k delta2_ck.

    Nominal: delta2_ck = [c != k]. Ordinal (contradicts < missing < partially_meets < meets):
    delta2_ck = (sum_{g from c to k} n_g - (n_c + n_k) / 2)^2. Undefined where no cell has two
    values, or every value is the same category (D_e = 0). Equal to the `krippendorff`
    package's `alpha` with the value domain (0, 1, 2, 3) in that order.
    """
    codes = np.asarray(codes)
    scale = np.where((codes >= 0) & (codes != INVALID), ORDINAL_CODE[np.clip(codes, 0, INVALID)], -1)
    alpha, notes = {}, {}
    for level in ("nominal", "ordinal"):
        if codes.shape[0] < 2:
            alpha[level], why = None, f"needs at least 2 people, got {codes.shape[0]}"
        else:
            alpha[level], why = stats.defined(stats.krippendorff_alpha, scale, 4, level)
        if why:
            notes[level] = why
    return alpha, notes


def cohen_kappa(a: np.ndarray, b: np.ndarray) -> tuple[dict, str | None]:
    """Cohen's kappa of two people's verdict codes on the same cells (-1 or invalid: none;
    only the cells both graded count).

    Returns
    -------
    pair : dict
        {"n": cells both graded, "agreement": observed share p_o, "cohen_kappa": kappa or None}
    why : str or None
        Why kappa is None.

    Notes
    -----
    With C the confusion matrix of the n cells both graded (rows a, columns b),

        p_o = sum_k C_kk / n,   p_e = sum_k (sum_j C_kj)(sum_i C_ik) / n^2,
        kappa = (p_o - p_e) / (1 - p_e).

    Undefined where no cell is shared or p_e = 1 (both gave one and the same label to every
    cell). Equal to scikit-learn's `cohen_kappa_score(a, b)` over the shared cells.
    """
    a, b = np.asarray(a), np.asarray(b)
    both = (a >= 0) & (a != INVALID) & (b >= 0) & (b != INVALID)
    conf = stats.confusion_matrix(a[both], b[both], len(VERDICTS))
    n = int(conf.sum())
    kappa, why = stats.defined(stats.cohen_kappa, conf)
    return {"n": n, "agreement": float(np.trace(conf) / n) if n else None, "cohen_kappa": kappa}, why


def agreement(codes: np.ndarray, people: list[str]) -> dict:
    """Everything the report shows about agreement between people, from people x cells codes:
    Krippendorff's alpha over all of them, Cohen's kappa per pair (those that share a cell),
    the cells graded by two or more (`n_cells`) and those where they differ
    (`disagreements`). `notes`: why a figure is None, keyed by where it is."""
    codes = np.asarray(codes).reshape(len(people), -1)
    valid = (codes >= 0) & (codes != INVALID)
    alpha, why = krippendorff_alpha(codes)
    notes = {f"krippendorff_alpha.{k}": v for k, v in why.items()}
    pairs = []
    for i, j in itertools.combinations(range(len(people)), 2):
        if not (valid[i] & valid[j]).any():
            continue
        entry, why_k = cohen_kappa(codes[i], codes[j])
        if why_k:
            notes[f"pairs[{people[i]}|{people[j]}].cohen_kappa"] = why_k
        pairs.append({"a": people[i], "b": people[j], **entry})
    shared = valid.sum(axis=0) >= 2
    lo = np.where(valid, codes, 99).min(axis=0)
    hi = np.where(valid, codes, -1).max(axis=0)
    return {"people": list(people), "n_cells": int(shared.sum()), "disagreements": int((shared & (lo != hi)).sum()),
            "krippendorff_alpha": alpha, "pairs": pairs, "notes": notes}


def overlap_agreement(assignments, records, sample_id: str, graded_by: dict[str, set],
                      judges: dict[str, dict] | None = None) -> dict:
    """The team's figures on its overlap (responses its assignment gives to two or more people).

    records: human verdicts as dicts, newest per cell; only those made in the sample's queue
    (`sample_id`) by a response's assignees count (an adjudicator read the disagreement, not
    the response afresh). graded_by: {annotator: responses graded in full}. judges: {model
    judge: {(model, variant, question, check): verdict code}} on those cells, for the judge's
    mean kappa against each person on the same cells (`judge_vs_people`), the figure
    `noisier_truth` compares the people's own agreement with.

    Returns the people's `agreement` plus `overlap_responses`, `overlap_graded` (every
    assignee graded it in full), `unadjudicated` (cells the assignees disagree on that no
    third person has graded) and `noisier_truth`: the model judges that agree with the people
    more than the people agree with each other (mean pairwise kappa)."""
    from gamut_local.analysis.correction import team_rule

    pairs = {r: who for r, who in assignments.responses.items() if len(who) > 1}
    people = sorted({a for who in pairs.values() for a in who})
    row = {a: i for i, a in enumerate(people)}
    cell_of: dict[tuple, int] = {}
    values: list[tuple[int, int, int]] = []  # (person, cell, code)
    for rec in records:
        resp = (rec["model"], rec["variant"], rec["question_id"])
        person = rec["judge"][len("human-"):]
        if rec.get("sample_id") != sample_id or person not in pairs.get(resp, ()):
            continue
        cell = cell_of.setdefault((*resp, rec["check_id"]), len(cell_of))
        values.append((row[person], cell, VERDICTS.index(rec["verdict"])))
    codes = np.full((len(people), len(cell_of)), -1, dtype=np.int64)
    for p, c, v in values:
        codes[p, c] = v
    out = agreement(codes, people)
    out["overlap_responses"] = len(pairs)
    out["overlap_graded"] = sum(all(r in graded_by.get(a, ()) for a in who) for r, who in pairs.items())
    out["unadjudicated"] = team_rule(assignments, records, sample_id).disagreements
    out["judge_vs_people"] = _judge_vs_people(judges or {}, cell_of, codes, people)
    kappas = [p["cohen_kappa"] for p in out["pairs"] if p["cohen_kappa"] is not None]
    out["people_kappa"] = float(np.mean(kappas)) if kappas else None
    out["noisier_truth"] = sorted(j for j, k in out["judge_vs_people"].items()
                                  if k is not None and out["people_kappa"] is not None and k > out["people_kappa"])
    return out


def _judge_vs_people(judges: dict, cell_of: dict, codes: np.ndarray, people: list[str]) -> dict:
    """{judge: mean over the people of Cohen's kappa between the judge and that person, on the
    overlap cells both graded} (None where no kappa is defined)."""
    out = {}
    for judge, given in sorted(judges.items()):
        mine = np.full(codes.shape[1], -1, dtype=np.int64)
        for key, c in cell_of.items():
            mine[c] = given.get(key, -1)
        ks = [k for p in range(len(people)) if (k := cohen_kappa(mine, codes[p])[0]["cohen_kappa"]) is not None]
        out[judge] = float(np.mean(ks)) if ks else None
    return out
