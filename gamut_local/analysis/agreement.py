"""The computation behind judge agreement and model comparisons, on arrays only (no file
I/O): verdicts of several judges aligned into a `Panel`, the statistics `gamut-local agree`
writes, and the variant comparison and leaderboard-neighbour tests the report uses.

Verdicts are aligned on (question, model, variant, check) keys into a dense
judges x keys array of verdict codes (-1 where a judge gave no verdict), so every statistic
is a vectorised operation over that array. A "model" in the rank statistics is a
(model, variant) pair, a *system* here.

For each pair of judges, the models' GAMUT scores (computed by `metrics.score_responses`, as
`gamut-local score` does) are taken over the keys both judges graded, so a judge that covered
fewer responses (gold on a subset, an unfinished run) is compared on the same ground; when
both graded everything these are the full scores. `keys.missing` says how many keys each
judge lacks.

Statistics that have no value for the data (two constant score lists, one verdict category
only, judges that share no key) are written as `null`, and `notes` says why, keyed by where
the null is.

Variant comparison: for models answered in both variants, the text_only minus multimodal
gain per model, the Pearson correlation between multimodal score and gain (GAMUT finds the
gain nearly constant, i.e. r close to 0), and Kendall's tau-b between the two rankings.
Neighbours in the leaderboard: a paired bootstrap over questions for each pair of adjacent
models; is their difference distinguishable from zero at 95%?
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from gamut_local.analysis import stats
from gamut_local.analysis.metrics import score_responses
from gamut_local.errors import InputError, Problem
from gamut_local.vocab import TIER_CODE, TIERS, VERDICT_CODE, VERDICTS

GOLD = "gold"
N_VERDICTS = len(VERDICTS)
# Krippendorff's ordinal scale: contradicts < missing < partially_meets < meets; invalid is
# missing data (-1), because it says nothing about the response.
ORDINAL_CODE = np.array([3, 2, 1, 0, -1], dtype=np.int8)


@dataclass
class Panel:
    """Several judges' verdicts aligned on (question, system, check) keys.

    `verdict[j, u]` is judge j's verdict code for key u, or -1 if judge j has none.
    A response is (system, question) and has index `system * len(questions) + question`.
    """

    judges: list[str]
    systems: list[tuple[str, str]]  # (model, variant)
    questions: list[str]
    key_system: np.ndarray  # int64 (U,)
    key_question: np.ndarray  # int64 (U,)
    key_tier: np.ndarray  # int8 (U,)
    verdict: np.ndarray  # int8 (J, U)

    @property
    def key_response(self) -> np.ndarray:
        return self.key_system * len(self.questions) + self.key_question

    @property
    def n_responses(self) -> int:
        return len(self.systems) * len(self.questions)


def panel_from_records(records: list[dict], source: str = "<verdicts>") -> Panel:
    """Align verdict dicts (as the judge stage writes them) across judges.

    The tier of a check must be the same for every judge (they graded one rubric);
    a disagreement is an InputError naming the key.
    """
    judges = sorted({r["judge"] for r in records})
    j_index = {j: i for i, j in enumerate(judges)}
    keys: dict[tuple, int] = {}
    n = len(records)
    key_of = np.empty(n, dtype=np.int64)
    judge_of = np.empty(n, dtype=np.int64)
    code = np.empty(n, dtype=np.int8)
    tier = np.empty(n, dtype=np.int8)
    for i, r in enumerate(records):
        k = (r["model"], r.get("variant", "multimodal"), r["question_id"], r["check_id"])
        key_of[i] = keys.setdefault(k, len(keys))
        judge_of[i] = j_index[r["judge"]]
        code[i] = VERDICT_CODE[r["verdict"]]
        tier[i] = TIER_CODE[r["tier"]]
    n_keys = len(keys)
    key_tier = np.full(n_keys, -1, dtype=np.int8)
    key_tier[key_of] = tier
    clash = np.flatnonzero(key_tier[key_of] != tier)
    if len(clash):
        key_list = list(keys)
        raise InputError([Problem(source, None, "tier",
                                  f"judges disagree on the tier of check {key_list[key_of[i]]}: "
                                  f"{TIERS[key_tier[key_of[i]]]} vs {TIERS[tier[i]]} "
                                  f"(judge {records[i]['judge']})") for i in clash[:20]])
    verdict = np.full((len(judges), n_keys), -1, dtype=np.int8)
    verdict[judge_of, key_of] = code
    systems = sorted({k[:2] for k in keys})
    questions = sorted({k[2] for k in keys})
    s_index = {s: i for i, s in enumerate(systems)}
    q_index = {q: i for i, q in enumerate(questions)}
    key_system = np.fromiter((s_index[k[:2]] for k in keys), dtype=np.int64, count=n_keys)
    key_question = np.fromiter((q_index[k[2]] for k in keys), dtype=np.int64, count=n_keys)
    return Panel(judges, systems, questions, key_system, key_question, key_tier, verdict)


def response_scores(panel: Panel, j: int, mask: np.ndarray | None = None) -> np.ndarray:
    """Judge j's response scores as a systems x questions matrix (NaN: nothing graded).

    `mask` restricts to a subset of keys, e.g. those two judges share.
    """
    have = panel.verdict[j] >= 0
    if mask is not None:
        have &= mask
    scores, _ = score_responses(panel.verdict[j][have], panel.key_tier[have],
                                panel.key_response[have], panel.n_responses)
    return scores.reshape(len(panel.systems), len(panel.questions))


def system_scores(by_question: np.ndarray) -> np.ndarray:
    """GAMUT score (points) per system: 100 x mean response score; NaN with no response."""
    have = np.isfinite(by_question)
    n = have.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, 100.0 * np.where(have, by_question, 0.0).sum(axis=1) / n, np.nan)


def _system_name(s: tuple[str, str]) -> str:
    return f"{s[0]}/{s[1]}"


def _rank_block(a: np.ndarray, b: np.ndarray, systems, where: str, notes: dict) -> dict:
    """Rank statistics of two judges' system scores, over systems both scored."""
    both = np.isfinite(a) & np.isfinite(b)
    left_out = [_system_name(systems[i]) for i in np.flatnonzero(~both)]
    if left_out:
        notes[f"{where}.systems_left_out"] = (
            "no response graded by both judges, so not ranked: " + ", ".join(left_out))
    a, b = a[both], b[both]
    out = {}
    for name, fn, kind in (("kendall_tau_b", stats.kendall_tau_b, _r),
                           ("spearman_rho", stats.spearman_rho, _r),
                           ("identical_ranking", stats.identical_ranking, bool),
                           ("adjacent_swaps", stats.adjacent_swaps, int)):
        value, why = stats.defined(fn, a, b)
        out[name] = None if value is None else kind(value)
        if why:
            notes[f"{where}.{name}"] = why
    if len(a):
        out["max_abs_diff"] = round(float(np.abs(b - a).max()), 4)
        out["mean_diff"] = round(float((b - a).mean()), 4)
    else:
        out["max_abs_diff"] = out["mean_diff"] = None
        notes[f"{where}.mean_diff"] = "no system scored by both judges"
    return out


def _verdict_block(va: np.ndarray, vb: np.ndarray, where: str, notes: dict) -> tuple[dict, np.ndarray]:
    conf = stats.confusion_matrix(va, vb, N_VERDICTS)
    kappa, why = stats.defined(stats.cohen_kappa, conf)
    if why:
        notes[f"{where}.cohen_kappa"] = why
    return {"cohen_kappa": None if kappa is None else round(kappa, 6),
            "confusion": conf.tolist()}, conf


def _r(x, digits=6):
    return None if x is None else round(float(x), digits)


def agree_panel(panel: Panel) -> dict:
    """Everything `gamut-local agree` writes, from an aligned Panel."""
    notes: dict[str, str] = {}
    J = len(panel.judges)
    present = panel.verdict >= 0
    all_have = present.all(axis=0)
    # Scores on each judge's full verdicts, to reuse when a pair shares every key.
    full = [system_scores(response_scores(panel, j)) for j in range(J)]
    pairs = []
    if J < 2:
        notes["pairs"] = f"needs at least 2 judges, got {J}"
    pair_stats: dict[tuple[int, int], dict] = {}
    shared_by_pair: dict[str, int] = {}
    pair_scores: list[dict] = []
    for ia, ib in itertools.combinations(range(J), 2):
        a, b = panel.judges[ia], panel.judges[ib]
        where = f"pairs[{a}|{b}]"
        shared = present[ia] & present[ib]
        if not shared.any():
            notes[where] = "the two judges share no (question, model, variant, check) key"
        # Scores over the keys both judges graded, so a judge that covered fewer responses
        # is compared on the same ground, not on a different set of questions.
        if (shared == present[ia]).all() and (shared == present[ib]).all():
            sa, sb = full[ia], full[ib]
        else:
            sa = system_scores(response_scores(panel, ia, shared))
            sb = system_scores(response_scores(panel, ib, shared))
        entry = {"judge_a": a, "judge_b": b}
        entry.update(_rank_block(sa, sb, panel.systems, where, notes))
        vblock, conf = _verdict_block(panel.verdict[ia][shared], panel.verdict[ib][shared], where, notes)
        entry.update(vblock)
        shared_by_pair[f"{a}|{b}"] = int(shared.sum())
        both = np.isfinite(sa) & np.isfinite(sb)
        pair_scores.append({"judge_a": a, "judge_b": b, "models": [
            {"model": panel.systems[i][0], "variant": panel.systems[i][1],
             "a": round(float(sa[i]), 4), "b": round(float(sb[i]), 4)} for i in np.flatnonzero(both)]})
        pairs.append(entry)
        pair_stats[(ia, ib)] = {"conf": conf, "entry": entry}

    alpha = {}
    # One coincidence matrix serves both levels; only the distance metric differs.
    coincidence = stats.coincidence_matrix(ORDINAL_CODE[np.where(present, panel.verdict, 4)], 4)
    for level in ("nominal", "ordinal"):
        value, why = (None, "needs at least 2 judges") if J < 2 else stats.defined(
            stats.alpha_from_coincidence, coincidence, level)
        alpha[level] = _r(value)
        if why:
            notes[f"krippendorff_alpha.{level}"] = why

    vs_gold = {}
    if GOLD in panel.judges:
        g = panel.judges.index(GOLD)
        for j, name in enumerate(panel.judges):
            if j == g:
                continue
            key = (min(g, j), max(g, j))
            conf = pair_stats[key]["conf"]
            if g > j:  # rows must be gold
                conf = conf.T
            entry = pair_stats[key]["entry"]
            n = conf.sum()
            where = f"vs_gold[{name}]"
            kappa, why = stats.defined(stats.cohen_kappa, conf)
            if why:
                notes[f"{where}.cohen_kappa"] = why
            bias = entry["mean_diff"]
            if bias is not None and g > j:
                bias = -bias
            if n == 0:
                notes[f"{where}.accuracy"] = "no key graded by both this judge and gold"
            vs_gold[name] = {
                "accuracy": _r(np.trace(conf) / n) if n else None,
                "cohen_kappa": _r(kappa),
                "confusion": conf.tolist(),
                "score_bias": bias,
            }

    return {
        "judges": panel.judges,
        "verdict_order": list(VERDICTS),
        "keys": {
            "total": int(panel.verdict.shape[1]),
            "graded_by_all": int(all_have.sum()),
            "missing": {j: int((~present[i]).sum()) for i, j in enumerate(panel.judges)},
            "shared_by_pair": shared_by_pair,
        },
        "pairs": pairs,
        # The scores the rank statistics of each pair were computed from (shared keys only).
        "pair_scores": pair_scores,
        "krippendorff_alpha": alpha,
        "vs_gold": vs_gold,
        "notes": notes,
    }


# ---------------------------------------------------------------- model comparisons

def _rf(x, digits=4):
    # Unlike `_r`, also None for NaN/inf: variant and neighbour statistics come from
    # system scores that are NaN where a judge scored nothing.
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
    out = {"models": [{"model": m, "multimodal": _rf(a, 2), "text_only": _rf(b, 2), "gain": _rf(g, 2)}
                      for m, a, b, g in zip(models, mm, to, gain)],
           "n_models": len(models)}
    if not models:
        notes["models"] = "no model was scored in both variants (multimodal and text_only)"
    out["mean_gain"] = _rf(gain.mean(), 2) if len(models) else None
    for key, fn, x, y in (("pearson_r_multimodal_gain", stats.pearson_r, mm, gain),
                          ("kendall_tau_b_rankings", stats.kendall_tau_b, mm, to)):
        value, why = stats.defined(fn, x, y) if len(models) else (None, None)
        out[key] = _rf(value)
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
        row = {"higher": names[hi], "lower": names[lo], "diff": _rf(scores[hi] - scores[lo], 2)}
        try:
            test = stats.paired_difference(boot[:, hi], boot[:, lo])
            row.update(ci95=[_rf(test["ci95"][0], 2), _rf(test["ci95"][1], 2)],
                       distinguishable=test["distinguishable"], note=None)
        except stats.Undefined as e:
            row.update(ci95=[None, None], distinguishable=None, note=str(e))
        rows.append(row)
    return rows
