"""Judge agreement on arrays only (no file I/O): verdicts of several judges aligned into a
`Panel`, then three separate computations that `agree_panel` puts together:

- `pairwise`: for each pair of judges, rank statistics of their models' GAMUT scores, Cohen's
  kappa and the confusion matrix of their verdicts;
- `krippendorff`: Krippendorff's alpha over all judges (nominal and ordinal);
- `gold_calibration`: each judge against the human `gold` verdicts (accuracy, kappa, score bias).

Verdicts are aligned on (question, model, variant, check) keys into a dense judges x keys
array of verdict codes (-1 where a judge gave no verdict), so every statistic is a
vectorised operation over that array. A "model" in the rank statistics is a (model,
variant) pair, a *system* here.

For each pair of judges, the systems both graded are ranked on the questions where every
one of them has a complete response from both judges (`scoring.common_questions`), so a
judge that covered fewer responses (gold on a subset, an unfinished run) is compared on the
same ground, and `pairs[].n_questions` says on how many; the response scores are the very
ones `scoring.score_table` computed (passed in, not recomputed). `keys.missing` says how
many keys each judge lacks, and `coverage` gives each judge's coverage of each system (the
stages refuse an incomplete comparison unless told otherwise: `scoring.require_complete`).

Statistics that have no value for the data (two constant score lists, one verdict category
only, judges that share no key) are written as `null`, and `notes` says why, keyed by where
the null is. Full precision throughout.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from gamut_local.analysis import stats
from gamut_local.analysis.metrics import score_responses
from gamut_local.analysis.scoring import Scores, common_questions, coverage, mean_points, system_index
from gamut_local.errors import InputError, Problem
from gamut_local.vocab import TIERS, VERDICTS

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


def panel_from_table(table, systems: tuple | None = None) -> Panel:
    """Align a verdict table's judges on (system, question, check) keys, systems and questions
    in the order `scoring.score_table` uses (`systems`: the table's `system_index`, where the
    caller has it). The tier of a check must be the same for every judge (they graded one
    rubric); a disagreement is an InputError naming the verdict."""
    systems, system = systems or system_index(table)
    Q, C = len(table.questions), max(len(table.checks), 1)
    code = system.astype(np.int32 if len(systems) * Q * C < 2**31 else np.int64)  # int32: half the traffic
    code *= Q
    code += table.question
    code *= C
    code += table.check
    keys, key_of = _dense_codes(code)
    key_tier = np.full(len(keys), -1, dtype=np.int8)
    key_tier[key_of] = table.tier
    clash = np.flatnonzero(key_tier[key_of] != table.tier)
    if len(clash):
        raise InputError([_tier_clash(table, systems, i, key_tier[key_of[i]]) for i in clash[:20]])
    verdict = np.full((len(table.judges), len(keys)), -1, dtype=np.int8)
    verdict[table.judge, key_of] = table.verdict
    return Panel(list(table.judges), systems, list(table.questions), keys // C // Q,
                 keys // C % Q, key_tier, verdict)


def _dense_codes(code: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct values, each row's index into them): `np.unique(code,
    return_inverse=True)`, by one count instead of a sort when the values are dense."""
    size = int(code.max()) + 1 if len(code) else 0
    if size > 8 * len(code):
        keys, key_of = np.unique(code, return_inverse=True)
        return keys, key_of.ravel()
    used = np.zeros(size, dtype=bool)
    used[code] = True  # not a bincount: that would copy the codes to int64 first
    return np.flatnonzero(used), (np.cumsum(used) - 1).astype(code.dtype)[code]


def _tier_clash(table, systems, row: int, other: int) -> Problem:
    model, variant = table.models[table.model[row]], table.variants[table.variant[row]]
    key = (model, variant, table.questions[table.question[row]], table.checks[table.check[row]])
    line = int(table.line[row]) or None
    return Problem(table.files[table.file[row]], line, "tier",
                   f"judges disagree on the tier of check {key}: {TIERS[other]} vs "
                   f"{TIERS[table.tier[row]]} (judge {table.judges[table.judge[row]]})")


def response_scores(panel: Panel, j: int, mask: np.ndarray | None = None) -> np.ndarray:
    """Judge j's response scores as a systems x questions matrix (NaN: nothing graded),
    restricted to a subset of keys by `mask` (e.g. those two judges share)."""
    have = panel.verdict[j] >= 0
    if mask is not None:
        have &= mask
    scores, _ = score_responses(panel.verdict[j][have], panel.key_tier[have],
                                panel.key_response[have], panel.n_responses)
    return scores.reshape(len(panel.systems), len(panel.questions))


def _value(x) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


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
    for name, fn, kind in (("kendall_tau_b", stats.kendall_tau_b, float),
                           ("spearman_rho", stats.spearman_rho, float),
                           ("identical_ranking", stats.identical_ranking, bool),
                           ("adjacent_swaps", stats.adjacent_swaps, int)):
        value, why = stats.defined(fn, a, b)
        out[name] = None if value is None else kind(value)
        if why:
            notes[f"{where}.{name}"] = why
    if len(a):
        out["max_abs_diff"] = float(np.abs(b - a).max())
        out["mean_diff"] = float((b - a).mean())
    else:
        out["max_abs_diff"] = out["mean_diff"] = None
        notes[f"{where}.mean_diff"] = "no system scored by both judges"
    return out


def _pair(panel: Panel, ia: int, ib: int, scores: Scores, notes: dict) -> tuple[dict, dict, np.ndarray]:
    """(statistics entry, the scores it ranked, confusion matrix) of judges ia and ib."""
    present = panel.verdict >= 0
    a, b = panel.judges[ia], panel.judges[ib]
    where = f"pairs[{a}|{b}]"
    shared = present[ia] & present[ib]
    if not shared.any():
        notes[where] = "the two judges share no (question, model, variant, check) key"
    # Systems both judges graded, ranked on the questions every one of them has complete from
    # both judges: the same ground for both, whatever either covered beyond it.
    both = scores.graded[ia] & scores.graded[ib]
    common = common_questions(scores, ia, both) & common_questions(scores, ib, both)
    sa, sb = (np.where(both, mean_points(scores.score[j][:, common]), np.nan) for j in (ia, ib))
    n_expected = int((scores.expected[both] > 0).any(axis=0).sum())
    if both.any() and common.sum() < n_expected:
        notes[f"{where}.n_questions"] = (f"ranked on the {int(common.sum())} of {n_expected} questions every "
                                         "system both judges graded has complete from both")
    entry = {"judge_a": a, "judge_b": b, "n_questions": int(common.sum()),
             **_rank_block(sa, sb, panel.systems, where, notes)}
    conf = stats.confusion_matrix(panel.verdict[ia][shared], panel.verdict[ib][shared], N_VERDICTS)
    kappa, why = stats.defined(stats.cohen_kappa, conf)
    if why:
        notes[f"{where}.cohen_kappa"] = why
    entry.update(cohen_kappa=kappa, confusion=conf.tolist())
    ranked_ = np.flatnonzero(np.isfinite(sa) & np.isfinite(sb))
    ranked = {"judge_a": a, "judge_b": b, "n_questions": int(common.sum()), "models": [
        {"model": panel.systems[i][0], "variant": panel.systems[i][1], "a": float(sa[i]), "b": float(sb[i])}
        for i in ranked_]}
    return entry, ranked, conf


def pairwise(panel: Panel, scores: Scores, notes: dict) -> tuple[list, list, dict]:
    """(pairs, pair_scores, confusion by (ia, ib)) for every pair of judges."""
    if len(panel.judges) < 2:
        notes["pairs"] = f"needs at least 2 judges, got {len(panel.judges)}"
    pairs, ranked, confusion = [], [], {}
    for ia, ib in itertools.combinations(range(len(panel.judges)), 2):
        entry, ranked_scores, conf = _pair(panel, ia, ib, scores, notes)
        pairs.append(entry)
        ranked.append(ranked_scores)
        confusion[(ia, ib)] = conf
    return pairs, ranked, confusion


def krippendorff(panel: Panel, notes: dict) -> dict:
    """Krippendorff's alpha over all judges, nominal and ordinal."""
    present = panel.verdict >= 0
    # One coincidence matrix serves both levels; only the distance metric differs.
    coincidence = stats.coincidence_matrix(ORDINAL_CODE[np.where(present, panel.verdict, 4)], 4)
    alpha = {}
    for level in ("nominal", "ordinal"):
        value, why = (None, "needs at least 2 judges") if len(panel.judges) < 2 else stats.defined(
            stats.alpha_from_coincidence, coincidence, level)
        alpha[level] = value
        if why:
            notes[f"krippendorff_alpha.{level}"] = why
    return alpha


def gold_calibration(panel: Panel, pairs: list[dict], confusion: dict, notes: dict) -> dict:
    """Each judge against `gold`: accuracy, kappa, confusion (rows gold) and score bias
    (judge minus gold, points). Empty when no judge is named gold."""
    if GOLD not in panel.judges:
        return {}
    g = panel.judges.index(GOLD)
    entries = {(p["judge_a"], p["judge_b"]): p for p in pairs}
    out = {}
    for j, name in enumerate(panel.judges):
        if j == g:
            continue
        key = (min(g, j), max(g, j))
        conf = confusion[key] if g < j else confusion[key].T  # rows must be gold
        bias = entries[(panel.judges[key[0]], panel.judges[key[1]])]["mean_diff"]
        if bias is not None and g > j:
            bias = -bias
        n = conf.sum()
        where = f"vs_gold[{name}]"
        kappa, why = stats.defined(stats.cohen_kappa, conf)
        if why:
            notes[f"{where}.cohen_kappa"] = why
        if n == 0:
            notes[f"{where}.accuracy"] = "no key graded by both this judge and gold"
        out[name] = {"accuracy": float(np.trace(conf) / n) if n else None, "cohen_kappa": kappa,
                     "confusion": conf.tolist(), "score_bias": bias}
    return out


def coverage_rows(scores: Scores) -> list[dict]:
    """Each judge's coverage of each system it graded (`scoring.coverage`)."""
    c, graded = coverage(scores), scores.graded
    return [{"judge": judge, "model": m, "variant": v,
             **{k: bool(x[j, s]) if k == "complete" else int(x[j, s]) for k, x in c.items()}}
            for j, judge in enumerate(scores.judges) for s, (m, v) in enumerate(scores.systems)
            if graded[j, s]]


def agree_panel(panel: Panel, scores: Scores) -> dict:
    """Everything `gamut-local agree` writes, from an aligned Panel and the response scores of
    the same table (`scoring.score_table`), whose expected grid says what is complete."""
    if not isinstance(scores, Scores):
        raise TypeError("agree_panel needs the table's scoring.Scores (its coverage), not bare scores")
    notes: dict[str, str] = {}
    present = panel.verdict >= 0
    pairs, pair_scores, confusion = pairwise(panel, scores, notes)
    return {
        "judges": panel.judges,
        "verdict_order": list(VERDICTS),
        "keys": {
            "total": int(panel.verdict.shape[1]),
            "graded_by_all": int(present.all(axis=0).sum()),
            "missing": {j: int((~present[i]).sum()) for i, j in enumerate(panel.judges)},
            "shared_by_pair": {f"{p['judge_a']}|{p['judge_b']}": int((present[ia] & present[ib]).sum())
                               for p, (ia, ib) in zip(pairs, confusion)},
        },
        "coverage_from": "dataset" if scores.from_dataset else "verdicts",
        "coverage": coverage_rows(scores),
        "pairs": pairs,
        # The scores the rank statistics of each pair were computed from (common questions only).
        "pair_scores": pair_scores,
        "krippendorff_alpha": krippendorff(panel, notes),
        "vs_gold": gold_calibration(panel, pairs, confusion, notes),
        "notes": notes,
    }
