"""`domain_rows` groups questions by domain with one look-up per question: it searched the
list of domain names for every question (questions x domains comparisons, quadratic)."""

from __future__ import annotations

import numpy as np

from gamut_local.analysis.scoring import UNKNOWN_DOMAIN, Scores, domain_rows, mean_points

COMPARED = [0]


class _Domain(str):
    """A domain name that counts how often it is compared for equality."""

    __hash__ = str.__hash__

    def __eq__(self, other):
        COMPARED[0] += 1
        return str.__eq__(self, other)


def _scores(n_questions: int, n_domains: int) -> Scores:
    rng = np.random.default_rng(0)
    score = rng.uniform(-1, 1, size=(2, 3, n_questions))
    score[rng.random(score.shape) < 0.2] = np.nan  # responses without a score
    domains = [_Domain(f"d{rng.integers(n_domains)}") for _ in range(n_questions)]
    domains[::97] = [_Domain(UNKNOWN_DOMAIN)] * len(domains[::97])
    return Scores(["j1", "j2"], [("m", "answer"), ("m", "no_answer"), ("n", "answer")],
                  [f"q{i}" for i in range(n_questions)], score, np.zeros((2, 3, n_questions, 3)),
                  np.zeros((2, 3, n_questions, 5), dtype=np.int64), np.ones((3, n_questions), dtype=np.int64),
                  domains)


def test_domain_rows_are_each_domains_mean_with_one_look_up_per_question():
    scores = _scores(3000, 400)
    COMPARED[0] = 0
    rows = domain_rows(scores)
    assert COMPARED[0] < 5 * len(scores.questions)  # the search compared ~600,000 times
    names = sorted(set(scores.domains) - {UNKNOWN_DOMAIN}) + [UNKNOWN_DOMAIN]
    want, plain = [], np.array([str.__str__(d) for d in scores.domains])
    for domain in names:  # each domain by a mask over the questions, as before
        mask = plain == domain
        points, n = mean_points(scores.score[:, :, mask]), np.isfinite(scores.score[:, :, mask]).sum(axis=2)
        want += [(judge, m, v, domain, points[j, s], int(n[j, s])) for j, judge in enumerate(scores.judges)
                 for s, (m, v) in enumerate(scores.systems) if n[j, s]]
    want.sort(key=lambda r: (r[0], r[1], r[2], names.index(r[3])))
    got = [(r["judge"], r["model"], r["variant"], r["domain"], r["gamut_score"], r["n_responses"]) for r in rows]
    assert got == want  # the very same floats: each domain's questions summed in the same order
