"""Bias-corrected GAMUT scores: what humans would score, estimated from a judge's scores of
every response and a human's scores of a small random sample of them.

Prediction-powered inference (Angelopoulos et al., Science 2023) with power tuning (PPI++,
Angelopoulos, Duchi and Zrnic, arXiv 2311.01453), through the `ppi-python` package. The unit
is the response score in [-1, 1] (or a tier score, for the per-tier rows):

- labeled: the responses of the recorded random sample that the gold judge (a human) graded
  in full, with the human's score Y and the judge's score Yhat;
- unlabeled: the system's other responses the judge scored, with Yhat only.

Where several people graded a response (a team's overlap, `analysis.assignment`), Y is one
person's: the first-assigned annotator's labels, with the label of a third person who
adjudicated a cell the assignees disagreed on (`gold_choice`, `TeamRule`); never a mean.

`ppi_mean_ci(Y, Yhat, Yhat_unlabeled, lam=None, w=...)` tunes lam in [0, 1] and gives
lam * mean(Yhat_unlabeled) + mean(Y - lam * Yhat) with its CLT interval. That is unbiased for
the mean human response score whatever the judge's errors, provided the sample is random (the
design's inclusion probabilities become the weights `w`); lam = 0 is the human-only estimate.
The labeled and unlabeled responses are disjoint, as ppi-python assumes. The estimand is the
same as the judge-only bootstrap CI's: the mean over the population of questions the run's
questions stand for. As a statement about exactly the run's questions the interval is
conservative.

Scores are reported in GAMUT points (100 x the mean), full precision. A case without an
estimate (fewer than two labeled responses, human scores all equal) gives None and a reason,
never an exception. `ppi_py` is imported only here and only when a correction is asked for:
`score` without `--correct-with` does not load it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from gamut_local.rundir.human import gold_judges, is_human
from gamut_local.vocab import TIERS

LEVEL = 0.95
# Below this many labeled responses the CLT intervals undercover (91-93% at 25 per system in
# scripts/bench_correction.py) and power tuning adds a bias of ~0.5 points: plan-sample never
# advises fewer.
MIN_LABELED = 50
METHOD = "ppi++"
CLASSICAL = "classical"  # the judge carries no information here: human-only


def _ppi():
    try:
        import ppi_py
    except ImportError as e:  # an install without the `correct` extra
        from gamut_local.errors import InputError, Problem

        raise InputError([Problem("--correct-with", None, "", f"needs the `correct` extra ({e.name} is "
                                  "missing): pip install 'gamut_local[correct]'")]) from None
    return ppi_py


def _empty(n_labeled: int, n_total: int, reason: str) -> dict:
    return {"score": None, "ci_low": None, "ci_high": None, "human_only": None, "human_only_ci_low": None,
            "human_only_ci_high": None, "n_labeled": n_labeled, "n_total": n_total, "bias": None,
            "judge_only": None, "method": METHOD, "reason": reason}


def estimate(y, yhat, yhat_unlabeled, w=None, level: float = LEVEL) -> dict:
    """PPI++ and human-only estimates of a mean, in points, with `level` CIs.

    y, yhat: the human's and the judge's scores of the labeled responses (same order);
    yhat_unlabeled: the judge's scores of the other responses; w: sampling weights of the
    labeled responses (1 / inclusion probability; None: equal). NaN entries are left out.
    """
    y, yhat = np.asarray(y, dtype=np.float64), np.asarray(yhat, dtype=np.float64)
    yhat_unlabeled = np.asarray(yhat_unlabeled, dtype=np.float64)
    ok = np.isfinite(y) & np.isfinite(yhat)
    y, yhat = y[ok], yhat[ok]
    w = None if w is None else np.asarray(w, dtype=np.float64)[ok]
    yhat_unlabeled = yhat_unlabeled[np.isfinite(yhat_unlabeled)]
    n, N = len(y), len(y) + len(yhat_unlabeled)
    if n < 2:
        return _empty(n, N, f"{n} labeled response(s): a CI needs at least 2")
    if np.all(y == y[0]):
        return _empty(n, N, f"all {n} labeled human scores are equal ({100 * y[0]:g}): no variation to "
                      "build a CI from; label more responses")
    ppi, alpha = _ppi(), 1.0 - level
    # A judge that scores everything alike (or too few others to average) tells nothing: lam = 0.
    informative = len(yhat_unlabeled) >= 2 and np.ptp(np.concatenate([yhat, yhat_unlabeled])) > 0
    lam = None if informative else 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        rest = yhat_unlabeled if len(yhat_unlabeled) else yhat  # lam = 0 ignores it
        point = ppi.ppi_mean_pointestimate(y, yhat, rest, lam=lam, w=w)
        lo, hi = ppi.ppi_mean_ci(y, yhat, rest, alpha=alpha, lam=lam, w=w)
        h_lo, h_hi = ppi.classical_mean_ci(y, w=w, alpha=alpha)
    human = float(np.average(y, weights=w))
    judge = float(np.mean(np.concatenate([yhat, yhat_unlabeled])))
    score = 100.0 * float(np.ravel(point)[0])
    return {"score": score, "ci_low": 100.0 * float(np.ravel(lo)[0]), "ci_high": 100.0 * float(np.ravel(hi)[0]),
            "human_only": 100.0 * human, "human_only_ci_low": 100.0 * float(np.ravel(h_lo)[0]),
            "human_only_ci_high": 100.0 * float(np.ravel(h_hi)[0]), "n_labeled": n, "n_total": N,
            "bias": 100.0 * judge - score, "judge_only": 100.0 * judge,
            "method": METHOD if informative else CLASSICAL, "reason": None}


def estimate_on(judge_scores, gold_scores, labeled, weights=None, level: float = LEVEL) -> dict:
    """`estimate` over one population: the judge's scores of every response (NaN: not scored,
    outside the population), the gold's (NaN where not labeled), `labeled` a bool mask of the
    sampled responses the gold graded in full, `weights` 1 / inclusion probability."""
    judge_scores = np.asarray(judge_scores, dtype=np.float64)
    inside = np.isfinite(judge_scores)
    lab = np.asarray(labeled, dtype=bool) & inside & np.isfinite(gold_scores)
    w = None if weights is None else np.asarray(weights, dtype=np.float64)[lab]
    if w is not None and (w.size == 0 or np.ptp(w) == 0):
        w = None  # equal weights: the unweighted estimate, bit for bit
    return estimate(np.asarray(gold_scores)[lab], judge_scores[lab], judge_scores[inside & ~lab], w, level)


@dataclass
class Labels:
    """The gold side of a correction: which responses of a `Scores` are labeled.

    gold: indices of the gold judges in `scores.judges` (one annotator, or several: a response
    more than one graded in full takes one person's labels, `gold_choice`); labeled:
    (S, Q) bool, the response is in the random sample and fully graded by the gold; weights:
    (S, Q) 1 / inclusion probability (1 outside the sample); shared: the same questions were
    sampled for every system (differences are paired)."""

    gold: list[int]
    labeled: np.ndarray
    weights: np.ndarray
    shared: bool
    sample_id: str
    population: np.ndarray | None = None  # (S, Q) bool: what the sample was drawn from; None: all
    eligible: np.ndarray | None = None  # (len(gold), S, Q) bool: the gold's verdicts there count; None: all
    graded: np.ndarray | None = None  # (len(gold), S, Q) bool: labeled by that gold judge
    team: TeamRule | None = None  # whose label a response several people graded takes


def labels_for(scores, sample, gold: list[int]) -> Labels:
    """The labels a checked sample (`analysis.design.check_sample`) gives: a response is
    labeled when the design drew it and a gold judge graded it in full (`graded_in_full`),
    a human gold judge only with verdicts all made in the sample's queue (`in_queue`: any
    other human verdict, wherever it was read from, is not a random label). Responses outside
    the design's population (added to the run after the draw, or, for a shared sample, to a
    question not every system answered) had no chance to be drawn and are left out of the
    corrected scores' population."""
    from gamut_local.analysis.design import inclusion

    design = sample.design
    population, sampled, prob = inclusion(design, scores.systems, scores.questions)
    eligible = np.ones((len(gold), *scores.score.shape[1:]), dtype=bool)
    s_of = {tuple(h): i for i, h in enumerate(scores.systems)}
    q_of = {q: i for i, q in enumerate(scores.questions)}
    for g, j in enumerate(gold):
        if not is_human(scores.judges[j]):
            continue
        eligible[g] = False
        for model, variant, qid in sample.in_queue.get(scores.judges[j], ()):
            if (model, variant) in s_of and qid in q_of:
                eligible[g, s_of[(model, variant)], q_of[qid]] = True
    n = scores.n_graded[gold]
    full = graded_in_full(n, judged_checks(scores)[None], eligible) & (sampled & population)[None]
    weights = 1.0 / np.where(prob > 0, prob, 1.0)  # 1 / inclusion probability
    return Labels(gold, full.any(axis=0), weights, design.per == "shared", design.sample_id,
                  population, eligible, full, getattr(sample, "team", None))


def graded_responses(scores, sample) -> dict[str, set[tuple[str, str, str]]]:
    """{human judge: {(model, variant, question)}} the drawn responses each human judge has
    graded in full in the sample's queue: the rule that makes a response labeled
    (`labels_for`), per person. What the team's assignment and progress count as graded."""
    humans = [j for j, name in enumerate(scores.judges) if is_human(name)]
    if not humans:
        return {}
    graded = labels_for(scores, sample, humans).graded
    return {scores.judges[j]: {(*scores.systems[s], scores.questions[q]) for s, q in zip(*np.nonzero(graded[g]))}
            for g, j in enumerate(humans)}


def _in_population(values: np.ndarray, labels: Labels, s: int) -> np.ndarray:
    return values if labels.population is None else np.where(labels.population[s], values, np.nan)


def graded_in_full(verdicts, judged, in_queue):
    """The rule that makes a drawn response graded in full by a person, the one the correction
    labels with (`labels_for`) and the viewer shows progress and the next response by
    (`viewer.pages.graded`); elementwise over arrays, or for one response.

    verdicts: the person's current verdicts on the response (newest per check, not stale);
    judged: the most checks of it a model judge graded (`judged_checks`: the checks its judge
    scores are over; 0: no judge scored it, so it can label nothing); in_queue: every one of
    those verdicts was made in the sample's queue (one made elsewhere was not drawn at random).
    Verdicts are counted, not matched check by check (scores keep counts): a person who graded
    a check no model judge graded instead of one it did counts as having graded it in full.
    With judges that graded every check (what a complete run has) that cannot happen."""
    return np.logical_and(in_queue, np.logical_and(np.greater(judged, 0), np.greater_equal(verdicts, judged)))


def judged_checks(scores) -> np.ndarray:
    """(S, Q) the most verdicts a judge that is not a person gave each response: the checks a
    person must grade for `graded_in_full`. People's verdicts never raise it: one person's
    verdict on a check no judge graded is no check the others must grade."""
    models = [j for j, name in enumerate(scores.judges) if not is_human(name)]
    n = scores.n_graded
    return n[models].max(axis=0) if models else np.zeros(n.shape[1:], dtype=n.dtype)


def fully_graded(scores, gold: list[int]) -> np.ndarray:
    """(len(gold), S, Q): `graded_in_full` by each gold judge, wherever its verdicts were made."""
    return graded_in_full(scores.n_graded[gold], judged_checks(scores)[None], True)


def gold_scores(scores, labels: Labels, tier: int | None = None) -> np.ndarray:
    """(S, Q) the gold's response (or tier) score where labeled, else NaN: one person's labels,
    never a mean of several (`gold_choice`), with the adjudicated label on a cell the people
    assigned to it disagreed on (`TeamRule`)."""
    choice = gold_choice(scores, labels)
    out = np.full(scores.score.shape[1:], np.nan)
    s, q = np.nonzero(choice >= 0)
    g = choice[s, q]
    js = np.asarray(labels.gold, dtype=np.int64)[g] if len(g) else np.zeros(0, np.int64)
    out[s, q] = scores.score[js, s, q] if tier is None else scores.tier_scores[js, s, q, tier]
    team, at = labels.team, _positions(scores)
    for (judge, resp), cells in (team.composite.items() if team else ()):
        si, qi = at(*resp)
        if si is None or choice[si, qi] < 0 or scores.judges[labels.gold[choice[si, qi]]] != judge:
            continue
        overall, tiers = score_cells(cells, scores.formula)
        out[si, qi] = overall if tier is None else tiers[tier]
    return out


def gold_choice(scores, labels: Labels) -> np.ndarray:
    """(S, Q) the position in `labels.gold` of the one person whose labels a labeled response
    takes (-1: not labeled). Of the gold judges who graded it in full in the sample's queue:
    the first the team's assignment gave it to (`TeamRule.order`), else the first by name.

    Why one person and not a mean: the estimand is the score a person grading like the team
    would give. The first-assigned annotator is who grades the response with or without the
    overlap, so every labeled response's label comes from one person chosen by the same
    balanced, random-order assignment, and the overlap changes no label (only adds the second
    reading that agreement is measured on). A mean of two people's scores is no label anyone
    gave, and it would make the overlap's labels less noisy than the rest's. By name, without
    an assignment: a fixed rule, independent of the labels."""
    full = labels.graded
    if full is None:
        full = fully_graded(scores, labels.gold) & labels.labeled[None]
        full &= True if labels.eligible is None else labels.eligible
    names = [scores.judges[j] for j in labels.gold]
    by_name = sorted(range(len(names)), key=names.__getitem__)
    out = np.full(scores.score.shape[1:], -1, dtype=np.int64)
    for g in reversed(by_name):  # the first by name wins: written last
        out[full[g]] = g
    at = _positions(scores)
    for resp, order in (labels.team.order.items() if labels.team else ()):
        si, qi = at(*resp)
        if si is None:
            continue
        first = next((names.index(j) for j in order if j in names and full[names.index(j), si, qi]), None)
        if first is not None:
            out[si, qi] = first
    return out


def _positions(scores):
    """(model, variant, question) -> (system index, question index), or (None, None)."""
    s_of = {tuple(h): i for i, h in enumerate(scores.systems)}
    q_of = {q: i for i, q in enumerate(scores.questions)}

    def at(model: str, variant: str, qid: str):
        s, q = s_of.get((model, variant)), q_of.get(qid)
        return (s, q) if s is not None and q is not None else (None, None)
    return at


def score_cells(cells: dict, formula: dict) -> tuple[float, np.ndarray]:
    """(score, tier scores) of one response from {check: (tier, verdict)} codes."""
    from gamut_local.analysis.metrics import score_responses

    tier_v, verdict = (np.array([c[k] for c in cells.values()], dtype=np.int64) for k in (0, 1))
    overall, tiers = score_responses(verdict, tier_v, np.zeros(len(cells), np.int64), 1, **formula)
    return float(overall[0]), tiers[0]


@dataclass(frozen=True)
class TeamRule:
    """The gold label of a response a team's assignment gave to several people (`team_rule`).

    order: {(model, variant, question): human judges in the order they were assigned};
    composite: {(judge, response): {check: (tier, verdict) codes}}: that assignee's labels of an
    overlap response with each cell the assignees disagreed on and a third person (no assignee
    of the response) graded replaced by that adjudicator's label; disagreements: the cells
    assignees disagree on that nobody has adjudicated yet."""

    order: dict
    composite: dict
    disagreements: int = 0


def team_rule(assignments, records, sample_id: str) -> TeamRule:
    """The team's rule from its assignment (`rundir.assignments.Assignments`) and the human
    verdicts (dicts, newest per cell) made in the sample's queue (`sample_id`). An
    adjudication is an ordinary verdict of someone not assigned the response, on a cell its
    assignees labeled differently; of several adjudicators the first by name decides."""
    from gamut_local.vocab import HUMAN_PREFIX, VERDICTS

    order = {r: tuple(HUMAN_PREFIX + a for a in who) for r, who in assignments.responses.items()}
    labels: dict = {}
    for rec in records:
        resp = (rec["model"], rec["variant"], rec["question_id"])
        if rec.get("sample_id") == sample_id and len(order.get(resp, ())) > 1:
            labels.setdefault(resp, {}).setdefault(rec["judge"], {})[rec["check_id"]] = (
                TIERS.index(rec["tier"]), VERDICTS.index(rec["verdict"]))
    composite, open_ = {}, 0
    for resp, by_judge in labels.items():
        mine = [by_judge.get(j, {}) for j in order[resp]]
        others = sorted(j for j in by_judge if j not in order[resp])
        fixed = {}
        for check in set().union(*mine):
            given = {m[check][1] for m in mine if check in m}
            if sum(check in m for m in mine) < 2 or len(given) < 2:
                continue
            judge = next((j for j in others if check in by_judge[j]), None)
            if judge is None:
                open_ += 1
            else:
                fixed[check] = by_judge[judge][check]
        if fixed:
            composite.update({(j, resp): {**by_judge[j], **{c: v for c, v in fixed.items() if c in by_judge[j]}}
                              for j in order[resp] if j in by_judge})
    return TeamRule(order, composite, open_)


def _predictor(judge: str, j: int, labels: Labels) -> bool:
    """Model judges are corrected; gold and human judges are not (they are the reference)."""
    return j not in labels.gold and not is_human(judge)


def corrected_rows(scores, labels: Labels, level: float = LEVEL) -> dict[tuple[int, int], dict]:
    """{(judge index, system index): corrected estimate with per-tier ones} for every non-gold
    judge and system the judge scored."""
    gold_name = "+".join(scores.judges[g] for g in labels.gold)
    y = gold_scores(scores, labels)
    y_tier = [gold_scores(scores, labels, t) for t in range(len(TIERS))]
    out = {}
    for j, judge in enumerate(scores.judges):
        if not _predictor(judge, j, labels):
            continue
        for s in range(len(scores.systems)):
            if not np.isfinite(scores.score[j, s]).any():
                continue
            row = estimate_on(_in_population(scores.score[j, s], labels, s), y[s], labels.labeled[s],
                              labels.weights[s], level)
            row["tiers"] = {name: estimate_on(_in_population(scores.tier_scores[j, s, :, t], labels, s),
                                              y_tier[t][s], labels.labeled[s], labels.weights[s], level)
                            for t, name in enumerate(TIERS)}
            out[(j, s)] = {"judge": judge, "gold": gold_name, "sample_id": labels.sample_id, **row}
    return out


def corrected_differences(scores, labels: Labels, rows: dict, level: float = LEVEL) -> list[dict]:
    """Per judge and pair of systems (a listed before b): the corrected difference a - b.

    Shared sample: paired, PPI++ on per-question differences (Y_a - Y_b against Yhat_a -
    Yhat_b, over questions both systems have). Otherwise the two estimates are independent
    samples' and the difference's standard error is the root sum of squares of theirs (the
    judge-side terms share questions, which this ignores: conservative when they correlate)."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + level / 2)
    y = gold_scores(scores, labels)
    out = []
    for j, judge in enumerate(scores.judges):
        if not _predictor(judge, j, labels):
            continue
        for a in range(len(scores.systems)):
            for b in range(a + 1, len(scores.systems)):
                if (j, a) not in rows or (j, b) not in rows:
                    continue
                if labels.shared:
                    lab = labels.labeled[a] & labels.labeled[b]
                    diff = _in_population(scores.score[j, a], labels, a) - _in_population(scores.score[j, b], labels, b)
                    d = estimate_on(diff, y[a] - y[b], lab, labels.weights[a], level)
                    d["method"] = f"{d['method']} paired"
                else:
                    d = _unpaired(rows[(j, a)], rows[(j, b)], z)
                out.append({"judge": judge, "a": list(scores.systems[a]), "b": list(scores.systems[b]), **d})
    return out


def _unpaired(ra: dict, rb: dict, z: float) -> dict:
    keys = ("score", "ci_low", "ci_high", "human_only", "human_only_ci_low", "human_only_ci_high")
    d = {"n_labeled": min(ra["n_labeled"], rb["n_labeled"]), "n_total": min(ra["n_total"], rb["n_total"]),
         "bias": None, "judge_only": None, "method": f"{ra['method']} unpaired", "reason": ra["reason"] or rb["reason"]}
    if d["reason"] is not None:
        return {**dict.fromkeys(keys), **d}
    for name, lo, hi in (("score", "ci_low", "ci_high"), ("human_only", "human_only_ci_low", "human_only_ci_high")):
        se = np.hypot((ra[hi] - ra[lo]) / (2 * z), (rb[hi] - rb[lo]) / (2 * z))
        diff = ra[name] - rb[name]
        d[name], d[lo], d[hi] = diff, diff - z * se, diff + z * se
    d["judge_only"] = ra["judge_only"] - rb["judge_only"]
    d["bias"] = d["judge_only"] - d["score"]
    return d


def correct(scores, sample, gold: str, sample_file: str, level: float = LEVEL) -> tuple[dict, dict]:
    """({(judge index, system index): corrected row}, the `correction` block of scores.json)
    for every model judge (neither gold nor human) against the judges `gold` names (an
    `fnmatch` pattern, e.g. `human-*`), over `sample`: the design and the gold verdicts as
    `analysis.design.check_sample` passed them (the block keeps its notes)."""
    design = sample.design
    gold_idx = gold_judges(scores.judges, gold, "--correct-with")
    labels = labels_for(scores, sample, gold_idx)
    notes = list(sample.notes) + _unscored(design, scores.systems)
    rows = corrected_rows(scores, labels, level)
    differences = corrected_differences(scores, labels, rows, level)
    flat = [{"judge": r["judge"], "model": scores.systems[s][0], "variant": scores.systems[s][1], "score": r["score"]}
            for (_, s), r in rows.items()]
    block = {"gold": gold, "gold_judges": [scores.judges[j] for j in gold_idx], "sample_file": sample_file,
             "sample_id": design.sample_id, "per": design.per, "level": level, "differences": differences,
             "ranking": rank_list(flat, differences), "notes": notes}
    return rows, block


def _unscored(design, systems) -> list[str]:
    """A note on the design's systems the verdicts have no scores of (a design drawn from more
    systems than these inputs hold): they get no corrected score."""
    gone = [f"{st.model} ({st.variant})" for st in design.strata if (st.model, st.variant) not in set(map(tuple, systems))]
    return [f"the sample {design.sample_id} also drew from {', '.join(gone)}, which these verdicts have no scores "
            "of: not corrected"] if gone else []


def rank_intervals(flat: list[dict], differences: list[dict]) -> dict[tuple[str, str, str], tuple[int, int]]:
    """(judge, model, variant) -> (best, worst) rank the corrected differences allow: a system
    ranks below every system whose corrected difference over it has a 95% CI above 0, and above
    every one it beats so; a difference without an interval separates nothing."""
    better: dict[tuple, int] = {}
    worse: dict[tuple, int] = {}
    for d in differences:
        if d["ci_low"] is None or d["ci_high"] is None:
            continue
        a, b = (d["judge"], *d["a"]), (d["judge"], *d["b"])
        if d["ci_low"] > 0:
            better[b], worse[a] = better.get(b, 0) + 1, worse.get(a, 0) + 1
        elif d["ci_high"] < 0:
            better[a], worse[b] = better.get(a, 0) + 1, worse.get(b, 0) + 1
    shown = [r for r in flat if r["score"] is not None]
    n = {j: sum(r["judge"] == j for r in shown) for j in {r["judge"] for r in shown}}
    out = {}
    for r in shown:
        key = (r["judge"], r["model"], r["variant"])
        out[key] = (1 + better.get(key, 0), n[r["judge"]] - worse.get(key, 0))
    return out


def rank_list(flat: list[dict], differences: list[dict]) -> list[dict]:
    """`rank_intervals` as `scores.json`'s `correction.ranking[]`: per model judge and system
    with a corrected score, `rank_best` and `rank_worst`, best first."""
    ranks = rank_intervals(flat, differences)
    return [{"judge": j, "model": m, "variant": v, "rank_best": lo, "rank_worst": hi}
            for (j, m, v), (lo, hi) in sorted(ranks.items(), key=lambda kv: (kv[0][0], kv[1], kv[0][1:]))]


def plan(y, yhat, n_total: int, half_width: float, level: float = LEVEL) -> dict:
    """From a pilot (the human's and the judge's scores of the labeled responses so far): how
    many responses humans must grade for a CI half-width of `half_width` points, human-only
    and corrected, among `n_total` responses. Human-only: the CLT interval's n. Corrected:
    `ppi_py.ppi_mean_power`'s cheapest n of labels whose PPI++ estimate is as precise as that
    many human labels, the judge's scores of the others being free, and never fewer than
    MIN_LABELED nor more than human-only needs (`reachable` False: not even labeling all
    `n_total` gets there)."""
    from statistics import NormalDist

    y, yhat = np.asarray(y, dtype=np.float64), np.asarray(yhat, dtype=np.float64)
    ok = np.isfinite(y) & np.isfinite(yhat)
    y, yhat = y[ok], yhat[ok]
    out = {"pilot_n": int(len(y)), "n_total": int(n_total), "half_width": float(half_width),
           "human_only_n": None, "corrected_n": None, "reachable": None, "ppi_corr": None, "reason": None}
    if len(y) < 2 or np.all(y == y[0]) or np.ptp(yhat) == 0:
        return {**out, "reason": f"a pilot of {len(y)} labeled response(s) without variation in the human's "
                "or the judge's scores: label a few more first"}
    z = NormalDist().inv_cdf(0.5 + level / 2)
    need = int(np.ceil((z * 100.0 * y.std() / half_width) ** 2))
    with warnings.catch_warnings():  # its "not reachable" warning: `reachable` says so
        warnings.simplefilter("ignore", UserWarning)
        power = _ppi().ppi_mean_power(y, yhat, cost_Y=1.0, cost_Yhat=1e-9, effective_n=need, n_max=int(n_total))
    # ppi-python's own rule: no (n, N) within n_total responses does better than labeling all.
    return {**out, "human_only_n": need, "corrected_n": min(max(int(power["n"]), MIN_LABELED), need, int(n_total)),
            "reachable": need <= n_total,
            "ppi_corr": float(power["ppi_corr"])}
