"""A seeded simulator of graded runs with known true verdicts, for proving the bias
correction (`analysis.correction`) by simulation rather than asserting it.

A simulation has systems x questions x checks. Each check has a tier; each (system,
question) a latent ability (the system's quality minus the question's difficulty, plus
noise), and each check's *true* verdict is drawn from it. The truth is what a careful human
would answer. Judges copy the truth through a 4x4 confusion matrix (rows: true label, columns:
the judge's label, in `vocab.JUDGE_LABELS` order), optionally a different matrix per system (a
judge whose bias differs by system, e.g. one lenient to its own family).

Scores come from the project's own scorer: `Simulation.response_scores` takes the scorer
function (`analysis.metrics.score_responses`) as an argument, because `testing` sits below
`analysis` in the layers and must not import it. `Simulation.records` gives the verdicts as
ordinary verdict records, so a simulated run can go through every stage's real readers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gamut_local.vocab import JUDGE_LABELS, TIERS, VERDICTS

# Rows: true meets, partially_meets, missing, contradicts; columns: the judge's label.
ACCURATE = np.array([[0.94, 0.04, 0.02, 0.00],
                     [0.12, 0.78, 0.10, 0.00],
                     [0.04, 0.06, 0.88, 0.02],
                     [0.00, 0.02, 0.10, 0.88]])
# Gives credit where there is none: the paper's open judge is 4 to 11 points more lenient.
LENIENT = np.array([[0.97, 0.02, 0.01, 0.00],
                    [0.25, 0.69, 0.06, 0.00],
                    [0.10, 0.12, 0.77, 0.01],
                    [0.03, 0.07, 0.25, 0.65]])
# Much noisier, and lenient too: kappa against the truth well below 0.6.
NOISY = np.array([[0.70, 0.12, 0.15, 0.03],
                  [0.30, 0.35, 0.30, 0.05],
                  [0.20, 0.15, 0.60, 0.05],
                  [0.10, 0.10, 0.30, 0.50]])


@dataclass(frozen=True)
class SimJudge:
    """A simulated judge: one confusion matrix, or one per system (`by_system[s]` for system
    index s, falling back to `confusion`)."""

    name: str
    confusion: np.ndarray
    by_system: dict[int, np.ndarray] = field(default_factory=dict)

    def matrix(self, s: int) -> np.ndarray:
        return self.by_system.get(s, self.confusion)


def standard_judges() -> list[SimJudge]:
    """The judges the tests and the benchmark use: accurate, lenient, noisy, and one lenient
    only to the first system (its bias differs by system)."""
    return [SimJudge("accurate", ACCURATE), SimJudge("lenient", LENIENT), SimJudge("noisy", NOISY),
            SimJudge("partial-to-first", ACCURATE, {0: LENIENT})]


@dataclass
class Simulation:
    """Codes are positions in `vocab.VERDICTS` / `vocab.TIERS`; `mask[q, c]`: question q has check c."""

    systems: list[str]
    questions: list[str]
    tier: np.ndarray  # int8 (Q, C)
    mask: np.ndarray  # bool (Q, C)
    truth: np.ndarray  # int8 (S, Q, C)
    judged: dict[str, np.ndarray]  # judge name -> int8 (S, Q, C)

    def labels(self, judge: str | None) -> np.ndarray:
        """The judge's verdict codes; None: the truth."""
        return self.truth if judge is None else self.judged[judge]

    def scorer_inputs(self, judge: str | None):
        """(verdict, tier, response, n_responses) as `analysis.metrics.score_responses` takes
        them; response index = system * n_questions + question."""
        S, Q, C = self.truth.shape
        s, q, c = np.nonzero(np.broadcast_to(self.mask, (S, Q, C)))
        return self.labels(judge)[s, q, c], self.tier[q, c], s * Q + q, S * Q

    def response_scores(self, score_responses, judge: str | None = None):
        """(scores (S, Q), tier_scores (S, Q, 3)) in [-1, 1] from the given scorer."""
        S, Q, _ = self.truth.shape
        scores, tiers = score_responses(*self.scorer_inputs(judge))
        return scores.reshape(S, Q), tiers.reshape(S, Q, len(TIERS))

    def records(self, judge: str | None, name: str | None = None, cells=None) -> list[dict]:
        """Verdict records of a judge (None: the truth, under `name`, e.g. `human-sim`); `cells`:
        an optional bool (S, Q) mask of the responses to include."""
        labels = self.labels(judge)
        S, Q, C = labels.shape
        keep = np.broadcast_to(self.mask, (S, Q, C)) & (True if cells is None else np.asarray(cells)[:, :, None])
        return [{"question_id": self.questions[q], "model": self.systems[s], "variant": "multimodal",
                 "judge": name or judge, "check_id": f"c{c}", "tier": TIERS[self.tier[q, c]],
                 "verdict": VERDICTS[labels[s, q, c]]} for s, q, c in zip(*np.nonzero(keep))]


def simulate(seed: int, *, n_questions: int = 400, qualities=(0.9, 0.5, 0.1, -0.3),
             judges: list[SimJudge] | None = None, checks=(4, 12), question_sd: float = 1.0,
             response_sd: float = 0.6) -> Simulation:
    """A seeded simulated run. `qualities`: one latent quality per system (higher is better);
    each question has 4-12 checks (`checks`), tiered about 40/40/20."""
    rng = np.random.default_rng(seed)
    judges = standard_judges() if judges is None else judges
    S, Q, C = len(qualities), n_questions, checks[1]
    n_checks = rng.integers(checks[0], checks[1] + 1, size=Q)
    mask = np.arange(C)[None, :] < n_checks[:, None]
    tier = rng.choice(len(TIERS), size=(Q, C), p=[0.4, 0.4, 0.2]).astype(np.int8)
    ability = (np.asarray(qualities, dtype=float)[:, None] - rng.normal(0, question_sd, Q)[None, :]
               + rng.normal(0, response_sd, (S, Q)))
    p_meets = 1.0 / (1.0 + np.exp(-(ability[:, :, None] + rng.normal(0, 0.5, (S, Q, C)))))
    # What is not met is partly met, missing or contradicted in fixed proportions.
    rest = np.array([0.3, 0.55, 0.15])
    probs = np.concatenate([p_meets[..., None], (1 - p_meets)[..., None] * rest], axis=-1)
    truth = _draw(rng, probs)
    judged = {}
    for j in judges:
        rows = np.stack([j.matrix(s) for s in range(S)])  # (S, 4, 4)
        judged[j.name] = _draw(rng, rows[np.arange(S)[:, None, None], truth])
    return Simulation([f"sys-{k}" for k in range(S)], [f"q{k:05d}" for k in range(Q)], tier, mask,
                      truth, judged)


def _draw(rng, probs: np.ndarray) -> np.ndarray:
    """One category per row of the last axis of `probs` (codes in JUDGE_LABELS order)."""
    cum = np.cumsum(probs, axis=-1)
    u = rng.random(probs.shape[:-1])[..., None] * cum[..., -1:]
    return np.minimum((u > cum).sum(axis=-1), len(JUDGE_LABELS) - 1).astype(np.int8)


def write_verdicts(sim: Simulation, run_dir, judge: str | None, name: str | None = None, cells=None,
                   design: dict | None = None) -> list:
    """Write a judge's (None: the truth's, as `name`) verdicts into a run directory's
    `verdicts/<name>/<model>.multimodal.jsonl`, one file per system; the paths written.
    `design` (a sample design file as a dict): the verdicts on the responses it drew carry its
    `sample_id` and inclusion probability, as the viewer's calibration queue writes them."""
    import json
    from pathlib import Path

    name = name or judge
    paths = []
    drawn = {} if design is None else _drawn(design)
    for s, system in enumerate(sim.systems):
        one = np.zeros(sim.truth.shape[:2], dtype=bool)
        one[s] = True if cells is None else np.asarray(cells)[s]
        records = sim.records(judge, name, one)
        for r in records:
            if (r["model"], r["question_id"]) in drawn:
                r.update(sample_id=design["sample_id"], inclusion_probability=drawn[(r["model"], r["question_id"])])
        if not records:
            continue
        path = Path(run_dir) / "verdicts" / name / f"{system}.multimodal.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        paths.append(path)
    return paths


def _drawn(design: dict) -> dict[tuple[str, str], float]:
    prob = {st["model"]: st["inclusion_probability"] for st in design["strata"]}
    return {(r["model"], r["question_id"]): prob[r["model"]] for r in design["responses"]}


def sampled_cells(sim: Simulation, design: dict, upto: int | None = None):
    """(S, Q) bool: the responses a sample design file (`RUN/samples/NAME.json`, as a dict)
    drew, the first `upto` of them in grading order."""
    s_of = {name: i for i, name in enumerate(sim.systems)}
    q_of = {q: i for i, q in enumerate(sim.questions)}
    cells = np.zeros(sim.truth.shape[:2], dtype=bool)
    for r in sorted(design["responses"], key=lambda r: r["order"])[:upto]:
        cells[s_of[r["model"]], q_of[r["question_id"]]] = True
    return cells
