"""One scoring path: a verdict table -> response scores -> every table that `score`, `agree`
and `report` write, all from the same arrays.

`score_table` runs the formula (`metrics.score_counts` on one `verdict_counts`) once over every
verdict and keeps the response scores as a dense judges x systems x questions array (a *system*
is a (model, variant) pair; NaN where a judge graded nothing of that response). Everything
else derives from it: GAMUT scores, tier scores, verdict rates, per-domain scores, the
bootstrap (one resampling matrix over questions, shared by every judge and system so
differences pair), and the judge-agreement panel's full-coverage scores. Full precision
throughout; rounding is for display only (`reporting`).

Coverage: the question axis is the *expected grid*, not only what was graded. With a dataset
the caller passes each (question, variant)'s number of checks (`Question.checks_for_variant`);
without one the grid is what the verdicts imply (`implied_expected`: the checks any judge
graded for that question and variant, across models). `Scores.expected` holds each system's
expected checks per question; a response is *complete* when its judge gave a verdict on each
of them. Anything that compares systems does so on the questions every compared system has
complete (`common_questions`), and refuses an incomplete comparison unless told to
(`require_complete`; the rule is `COVERAGE_RULE`).

The table is a `data.verdict_table.VerdictTable` (analysis does not import `data`: any object
with its code arrays and dictionaries will do).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from gamut_local.analysis.metrics import N_TIERS, N_VERDICTS, bootstrap_weights, score_counts, verdict_counts
from gamut_local.analysis.stats import bootstrap_means, count_codes
from gamut_local.errors import InputError, Problem
from gamut_local.rundir.human import is_human
from gamut_local.vocab import (
    CONTRADICTION_WEIGHT,
    PARTIAL_CREDIT,
    TIER_WEIGHTS,
    TIERS,
    VARIANTS,
    VERDICTS,
)

UNKNOWN_DOMAIN = "unknown"
N_BOOT = 1000
# The threshold below which a comparison of systems is refused without --allow-incomplete:
# every compared system must have a verdict on every expected check of every expected
# question. A comparison on fewer questions is allowed on request, on the questions every
# compared system has complete, and says how many those are.
COVERAGE_RULE = "every compared system complete (all expected questions, every check graded)"
ALLOW_HINT = ("judge the missing responses (rerun the failed shard or judge; it resumes), or give "
              "--allow-incomplete to compare on the questions every system has")


def formula_settings(partial_credit: float = PARTIAL_CREDIT, contradiction_weight: float = CONTRADICTION_WEIGHT,
                     tier_weights=TIER_WEIGHTS, invalid_as: str = "missing") -> dict:
    return {"partial_credit": float(partial_credit), "contradiction_weight": float(contradiction_weight),
            "tier_weights": [float(w) for w in tier_weights], "invalid_as": invalid_as}


@dataclass
class Scores:
    """Response scores of every (judge, system, question), dense; see the module docstring."""

    judges: list[str]
    systems: list[tuple[str, str]]  # (model, variant)
    questions: list[str]
    score: np.ndarray  # float64 (J, S, Q) in [-1, 1]
    tier_scores: np.ndarray  # float64 (J, S, Q, 3)
    counts: np.ndarray  # int64 (J, S, Q, 5): verdicts of each code; all 0: no such response
    expected: np.ndarray  # int64 (S, Q): checks each response should have; 0: not expected
    domains: list[str] | None = None  # per question; None: no dataset given
    seed: int = 0
    n_boot: int = N_BOOT
    formula: dict = field(default_factory=formula_settings)
    from_dataset: bool = False  # the expected grid came from the dataset (else from the verdicts)

    @cached_property
    def n_graded(self) -> np.ndarray:
        """(J, S, Q) int64: verdicts the judge gave on the response (computed once: the
        coverage properties below are asked per judge and per system)."""
        return self.counts.sum(axis=-1)

    @property
    def present(self) -> np.ndarray:
        """(J, S, Q) bool: the judge graded at least one check of this response."""
        return self.n_graded > 0

    @cached_property
    def graded(self) -> np.ndarray:
        """(J, S) bool: the judge graded at least one response of the system (its rows)."""
        return self.present.any(axis=2)

    @property
    def complete(self) -> np.ndarray:
        """(J, S, Q) bool: the judge graded every expected check of the response (also true
        where nothing is expected: nothing is missing there)."""
        return self.n_graded >= self.expected

    @cached_property
    def boot(self) -> np.ndarray:
        """(J, n_boot, S) `bootstrap` GAMUT scores, drawn once: the scores file's CIs and the
        report's tables (a fresh report writes both) use the same draws."""
        return bootstrap(self)

    @property
    def n_missing(self) -> np.ndarray:
        """(J, S, Q) int64: expected verdicts the judge did not give."""
        return np.maximum(self.expected - self.n_graded, 0)


def system_index(table) -> tuple[list[tuple[str, str]], np.ndarray]:
    """The (model, variant) pairs present in the table, sorted, and each row's index into them."""
    code = table.model * np.int32(len(VARIANTS)) + table.variant  # int32: models x variants never overflow
    used = np.zeros(len(table.models) * len(VARIANTS), dtype=bool)
    used[code] = True  # not a bincount: that would copy the codes to int64 first
    remap = (np.cumsum(used) - 1).astype(np.int32)
    systems = [(table.models[c // len(VARIANTS)], VARIANTS[c % len(VARIANTS)]) for c in np.flatnonzero(used)]
    return systems, remap[code]


def score_table(table, domains: dict[str, str] | None = None, *, expected: dict | None = None, seed: int = 0,
                n_boot: int = N_BOOT, systems: tuple | None = None, **formula) -> Scores:
    """Score every verdict of the table at once (the formula: `metrics.score_counts`).

    `expected`: {(question_id, variant): number of checks} from the dataset; None: the grid
    the verdicts imply (`implied_expected`). `systems`: the table's `system_index`, where the
    caller has it (agreement uses it too)."""
    settings = formula_settings(**formula)
    systems, system = systems or system_index(table)
    if expected is None:
        questions, grid = list(table.questions), implied_expected(table)
    else:
        questions, grid = _dataset_grid(table, expected)
    at = _positions(table.questions, questions)
    J, S, Q = len(table.judges), len(systems), len(questions)
    # int32 where every response fits: half the memory traffic of int64 over millions of rows.
    response = table.judge.astype(np.int32 if J * S * Q * N_TIERS * N_VERDICTS < 2**31 else np.int64)
    response *= S
    response += system
    response *= Q
    response += at[table.question]
    by_tier = verdict_counts(table.verdict, table.tier, response, J * S * Q)  # (tier, verdict, response)
    score, tiers = score_counts(by_tier, **settings)
    counts = by_tier.sum(axis=0).T  # the verdict counts over all tiers, (response, verdict)
    variant_of = np.array([VARIANTS.index(v) for _, v in systems], dtype=np.int64)
    return Scores(list(table.judges), systems, questions, score.reshape(J, S, Q),
                  tiers.reshape(J, S, Q, N_TIERS), counts.reshape(J, S, Q, N_VERDICTS),
                  grid[variant_of] if S else np.zeros((0, Q), dtype=np.int64),
                  _question_domains(questions, domains), seed, n_boot, settings, expected is not None)


def _positions(names: list[str], order: list[str]) -> np.ndarray:
    lookup = {v: i for i, v in enumerate(order)}
    return np.array([lookup[v] for v in names], dtype=np.int64)


def implied_expected(table) -> np.ndarray:
    """(variants, questions) checks expected per response without a dataset: the distinct
    checks any judge graded for that question and variant, whatever the model."""
    V, Q, C = len(VARIANTS), len(table.questions), max(len(table.checks), 1)
    code = (table.variant.astype(np.int64) * Q + table.question) * C + table.check
    keys, _ = count_codes(code, V * Q * C)
    return np.bincount(keys // C, minlength=V * Q).reshape(V, Q)


def _dataset_grid(table, expected: dict) -> tuple[list[str], np.ndarray]:
    """The dataset's questions (plus any only the verdicts name) and (variants, questions)
    checks expected, from {(question_id, variant): n}."""
    questions = sorted({q for q, _ in expected} | set(table.questions))
    at = {q: i for i, q in enumerate(questions)}
    grid = np.zeros((len(VARIANTS), len(questions)), dtype=np.int64)
    for (q, variant), n in expected.items():
        grid[VARIANTS.index(variant), at[q]] = n
    return questions, grid


def _question_domains(questions: list[str], domains: dict[str, str] | None) -> list[str] | None:
    # A question the dataset does not have is grouped under "unknown", not dropped.
    return None if domains is None else [domains.get(q, UNKNOWN_DOMAIN) for q in questions]


def mean_points(values: np.ndarray) -> np.ndarray:
    """100 x mean over the last axis, ignoring NaN; NaN where there is no value."""
    # Contiguous first: numpy's pairwise sum adds in an order that follows the memory layout,
    # and the same scores read back from a file must give the very same bits.
    values = np.ascontiguousarray(values)
    have = np.isfinite(values)
    n = have.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, 100.0 * np.where(have, values, 0.0).sum(axis=-1) / np.maximum(n, 1), np.nan)


def system_scores(scores: Scores) -> np.ndarray:
    """GAMUT score (points) per (judge, system): 100 x the mean response score."""
    return mean_points(scores.score)


def coverage(scores: Scores) -> dict[str, np.ndarray]:
    """Per (judge, system): `n_questions` expected, `n_expected` verdicts, `n_missing_verdicts`,
    `n_complete_responses`, and `complete` (nothing missing)."""
    expected = np.broadcast_to(scores.expected, scores.score.shape)
    missing = scores.n_missing.sum(axis=2)
    return {"n_questions": (expected > 0).sum(axis=2), "n_expected": expected.sum(axis=2),
            "n_missing_verdicts": missing, "n_complete_responses": (scores.complete & (expected > 0)).sum(axis=2),
            "complete": missing == 0}


def common_questions(scores: Scores, j: int, systems: np.ndarray | None = None) -> np.ndarray:
    """(Q,) bool: the questions on which every given system (default: every system judge j
    graded) has a complete response from judge j."""
    pick = scores.graded[j] if systems is None else np.asarray(systems)
    if not pick.any():
        return np.zeros(len(scores.questions), dtype=bool)
    asked = ((scores.expected[pick] > 0) | scores.present[j][pick]).any(axis=0)
    return asked & scores.complete[j][pick].all(axis=0)


def coverage_gaps(scores: Scores) -> list[tuple[str, str, str, str]]:
    """(judge, model, variant, sentence) for every graded system that is incomplete. Human
    annotators (`human-*`) are left out: they grade a sample by design (the adjudication
    queue); their systems are still marked incomplete and compared on common questions."""
    c = coverage(scores)
    out = []
    for j, judge in enumerate(scores.judges):
        if is_human(judge):
            continue
        for s in np.flatnonzero(scores.graded[j] & ~c["complete"][j]):
            (model, variant), n = scores.systems[s], {k: int(v[j, s]) for k, v in c.items() if k != "complete"}
            out.append((judge, model, variant,
                        f"judge {judge!r}, {model} ({variant}): {n['n_complete_responses']} of "
                        f"{n['n_questions']} questions complete, {n['n_missing_verdicts']} of "
                        f"{n['n_expected']} expected verdicts missing"))
    return out


def require_complete(scores: Scores, where: str, allow: bool) -> list[str]:
    """The coverage gaps as sentences; an InputError naming them when comparisons would be made
    on fewer questions than expected (`COVERAGE_RULE`) and `allow` is not given."""
    gaps = [g[-1] for g in coverage_gaps(scores)]
    if gaps and not allow:
        shown = gaps[:20] + ([f"... and {len(gaps) - 20} more"] if len(gaps) > 20 else [])
        raise InputError([Problem(where, None, "coverage", f"incomplete: {g}") for g in shown]
                         + [Problem(where, None, "coverage", f"systems are compared only when {COVERAGE_RULE}"
                                    f" (expected grid from {_grid_source(scores)}); {ALLOW_HINT}")])
    return gaps


def _grid_source(scores: Scores) -> str:
    return "the dataset" if scores.from_dataset else "the verdicts themselves, no dataset given"


def common_scores(scores: Scores, j: int, common: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Judge j's system scores (points, NaN for systems it did not grade) and (n_boot, S)
    bootstrap means over the `common` questions only, one resampling of them for every system."""
    values = np.where(scores.graded[j][:, None], scores.score[j][:, common], np.nan)
    n = int(common.sum())
    if n == 0:
        return np.full(len(scores.systems), np.nan), np.full((scores.n_boot, len(scores.systems)), np.nan)
    weights = bootstrap_weights(n, scores.n_boot, scores.seed).astype(np.float64)
    return mean_points(values), 100.0 * bootstrap_means(weights, values.T)


def bootstrap(scores: Scores) -> np.ndarray:
    """(J, n_boot, S) bootstrap GAMUT scores: every judge and system on the same question draws."""
    weights = bootstrap_weights(len(scores.questions), scores.n_boot, scores.seed).astype(np.float64)
    return np.stack([100.0 * bootstrap_means(weights, scores.score[j].T) for j in range(len(scores.judges))]) \
        if scores.judges else np.zeros((0, scores.n_boot, len(scores.systems)))


def _none(x) -> float | None:
    x = float(x)
    return None if not np.isfinite(x) else x


def model_rows(scores: Scores, boot: np.ndarray | None = None) -> list[dict]:
    """One row per (judge, model, variant) with a response: GAMUT score, 95% CI, tier scores,
    verdict rates and counts, and its coverage (`coverage`). Full precision; None where a
    value does not exist."""
    boot = scores.boot if boot is None else boot
    gamut = system_scores(scores)
    tier_points = mean_points(np.moveaxis(scores.tier_scores, -1, -2))  # (J, S, 3)
    counts = scores.counts.sum(axis=2)  # (J, S, 5)
    n_responses = np.isfinite(scores.score).sum(axis=2)
    with warnings.catch_warnings():  # a system a judge never scored: all-NaN draws, NaN CI
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, hi = np.nanpercentile(boot, [2.5, 97.5], axis=1) if boot.size else (gamut, gamut)
    graded = scores.graded  # (J, S); computed once, not per row
    cover = coverage(scores)
    rows = []
    for j, judge in enumerate(scores.judges):
        for s, (model, variant) in enumerate(scores.systems):
            if not graded[j, s]:
                continue
            total = max(int(counts[j, s].sum()), 1)
            rows.append({
                "judge": judge, "model": model, "variant": variant,
                "gamut_score": _none(gamut[j, s]),
                "ci95": [_none(lo[j, s]), _none(hi[j, s])],
                "tier_scores": {t: _none(tier_points[j, s, k]) for k, t in enumerate(TIERS)},
                "verdict_rates": {v: counts[j, s, k] / total for k, v in enumerate(VERDICTS)},
                "verdict_counts": {v: int(counts[j, s, k]) for k, v in enumerate(VERDICTS)},
                "n_responses": int(n_responses[j, s]),
                **{k: bool(v[j, s]) if k == "complete" else int(v[j, s]) for k, v in cover.items()},
            })
    return rows


def domain_rows(scores: Scores) -> list[dict] | None:
    """GAMUT score per (judge, model, variant, domain) with at least one scored response."""
    if scores.domains is None:
        return None
    names = sorted(set(scores.domains) - {UNKNOWN_DOMAIN})
    names += [UNKNOWN_DOMAIN] if UNKNOWN_DOMAIN in scores.domains else []
    code = {d: k for k, d in enumerate(names)}  # a look-up per question, not a search of the names
    of_question = np.array([code[d] for d in scores.domains], dtype=np.int64)
    # each domain's questions in their own order (the sums' order, so the same bits as a mask)
    order = np.argsort(of_question, kind="stable")
    bounds = np.searchsorted(of_question[order], np.arange(len(names) + 1))
    rows = []
    for k, domain in enumerate(names):
        sub = scores.score[:, :, order[bounds[k]:bounds[k + 1]]]
        points, n = mean_points(sub), np.isfinite(sub).sum(axis=2)
        rows += [{"judge": judge, "model": m, "variant": v, "domain": domain,
                  "gamut_score": _none(points[j, s]), "n_responses": int(n[j, s])}
                 for j, judge in enumerate(scores.judges) for s, (m, v) in enumerate(scores.systems)
                 if n[j, s]]
    rows.sort(key=lambda r: (r["judge"], r["model"], r["variant"], code[r["domain"]]))
    return rows


@dataclass
class Coded:
    """A string column as codes into its values (what parquet and pyarrow store anyway)."""

    codes: np.ndarray
    values: list[str]

    def __len__(self) -> int:
        return len(self.codes)

    def tolist(self) -> list[str]:
        return [self.values[i] for i in self.codes]

    @classmethod
    def of(cls, column) -> Coded:
        """A column as Coded: as it is, from a (codes, values) pair (`gamut_local.arrow.codes`), or
        coded from its strings."""
        if isinstance(column, Coded):
            return column
        if isinstance(column, tuple) and len(column) == 2 and isinstance(column[0], np.ndarray):
            return cls(*column)
        values, codes = np.unique(np.asarray(column, dtype=object), return_inverse=True)
        return cls(codes.ravel(), list(values))


def response_columns(scores: Scores) -> dict[str, Coded | np.ndarray | None]:
    """Columns of the per-response file: one row per (judge, model, variant, question) the
    judge graded, and per expected question of a system the judge graded (a missing response:
    NaN scores, zero counts), response and tier scores in [-1, 1] (NaN: nothing graded),
    counts, the checks expected and whether the response is complete."""
    rows = scores.present | (scores.graded[:, :, None] & (scores.expected > 0))
    j, s, q = np.nonzero(rows)
    cols: dict[str, Coded | np.ndarray | None] = {
        "judge": Coded(j, list(scores.judges)),
        "model": Coded(s, [m for m, _ in scores.systems]),
        "variant": Coded(s, [v for _, v in scores.systems]),
        "question_id": Coded(q, list(scores.questions)),
        "domain": None if scores.domains is None else Coded(q, list(scores.domains)),
        "score": scores.score[j, s, q],
    }
    for k, tier in enumerate(TIERS):
        cols[tier] = scores.tier_scores[j, s, q, k]
    for k, verdict in enumerate(VERDICTS):
        cols[f"n_{verdict}"] = scores.counts[j, s, q, k]
    cols["n_expected"] = scores.expected[s, q]
    cols["complete"] = scores.complete[j, s, q]
    return cols


def _index(column, order: list[str]) -> np.ndarray:
    """Positions in `order` of a column's values."""
    coded = Coded.of(column)
    lookup = {v: i for i, v in enumerate(order)}
    return np.array([lookup[v] for v in coded.values], dtype=np.int64)[coded.codes]


def scores_from_columns(cols: dict, judges: list[str], *, seed: int, n_boot: int, formula: dict,
                        from_dataset: bool = False) -> Scores:
    """Rebuild Scores from `response_columns` (as read back from the per-response file)."""
    model, variant, question = (Coded.of(cols[k]) for k in ("model", "variant", "question_id"))
    nv = max(len(variant.values), 1)  # each (model, variant) once, column-wise (a row per response)
    used = np.unique(model.codes.astype(np.int64) * nv + variant.codes).tolist()
    pairs = sorted({(model.values[k // nv], variant.values[k % nv]) for k in used},
                   key=lambda mv: (mv[0], VARIANTS.index(mv[1])))
    questions = sorted(set(question.values[i] for i in np.unique(question.codes)))
    J, S, Q = len(judges), len(pairs), len(questions)
    j = _index(cols["judge"], judges)
    pair_code = {p: i for i, p in enumerate(pairs)}
    mv_code = np.array([[pair_code.get((m, v), -1) for v in variant.values] for m in model.values],
                       dtype=np.int64).reshape(len(model.values), len(variant.values))
    s = mv_code[model.codes, variant.codes]
    q = _index(question, questions)
    score = np.full((J, S, Q), np.nan)
    tiers = np.full((J, S, Q, N_TIERS), np.nan)
    counts = np.zeros((J, S, Q, N_VERDICTS), dtype=np.int64)
    score[j, s, q] = cols["score"]
    for k, tier in enumerate(TIERS):
        tiers[j, s, q, k] = cols[tier]
    for k, verdict in enumerate(VERDICTS):
        counts[j, s, q, k] = cols[f"n_{verdict}"]
    expected = np.zeros((S, Q), dtype=np.int64)
    expected[s, q] = cols["n_expected"]
    domains = None
    if cols.get("domain") is not None:
        domain = Coded.of(cols["domain"])
        by_q = np.empty(Q, dtype=np.int64)
        by_q[q] = domain.codes
        domains = [domain.values[i] for i in by_q]
    return Scores(judges, pairs, questions, score, tiers, counts, expected, domains, seed, n_boot, formula,
                  from_dataset)
