"""Juries of judges (Verga et al. 2024, "Replacing Judges with Juries"): one verdict per cell
(question, model, variant, check) from several judges' verdicts on it.

Rules, on the members' labels (`vocab.JUDGE_LABELS` codes; an `invalid` verdict or a member
that did not grade the cell is no vote):

- `majority`: the label most members gave. A tie goes to the label that gives less credit
  (meets < partially_meets < missing < contradicts in credit order, so the later one): a jury
  never breaks a tie towards leniency.
- `mean-probs`: the mean of the members' label probabilities (members without probabilities
  on a cell do not count there), and its most probable label (ties as above); a cell where no
  member has probabilities falls back to `majority`.
- `dawid-skene`: Dawid and Skene's EM estimate (1979) of each member's confusion matrix and
  every cell's label probabilities, without gold, through `crowd-kit` (`DawidSkene`); the
  most probable label (ties as above). Each member's estimated confusion matrix is returned
  for the report.

A cell without any vote gets `invalid`. Pure arrays in, arrays out; `crowdkit` is imported
only for `dawid-skene`.
"""

from __future__ import annotations

import warnings

import numpy as np

from gamut_local.vocab import JUDGE_LABELS, VERDICT_CODE

RULES = ("majority", "mean-probs", "dawid-skene")
K = len(JUDGE_LABELS)
INVALID = VERDICT_CODE["invalid"]
DS_ITERATIONS = 100


def _pick(weights: np.ndarray) -> np.ndarray:
    """The label of largest weight per row; ties to the later (less credit) label; no weight:
    invalid."""
    best = K - 1 - np.argmax(weights[:, ::-1], axis=1)
    return np.where(weights.max(axis=1) > 0, best, INVALID).astype(np.int8)


def votes(labels: np.ndarray) -> np.ndarray:
    """(cells, K) vote counts from (cells, members) label codes (>= K or < 0: no vote)."""
    valid = (labels >= 0) & (labels < K)
    counts = np.zeros((labels.shape[0], K))
    for k in range(K):
        counts[:, k] = ((labels == k) & valid).sum(axis=1)
    return counts


def majority(labels: np.ndarray) -> tuple[np.ndarray, None]:
    return _pick(votes(labels)), None


def mean_probs(labels: np.ndarray, probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """probs: (cells, members, K), NaN where a member gave none."""
    have = np.isfinite(probs).all(axis=2) & (labels >= 0) & (labels < K)
    n = have.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(have[:, :, None], probs, 0.0).sum(axis=1) / n[:, None]
    codes = np.where(n > 0, _pick(np.nan_to_num(mean)), majority(labels)[0])
    return codes.astype(np.int8), np.where(n[:, None] > 0, mean, np.nan)


def dawid_skene(labels: np.ndarray, members: list[str]) -> tuple[np.ndarray, np.ndarray, dict]:
    """(codes, probs (cells, K), {member: confusion (K, K), rows true label, columns the
    member's label, each row a distribution}) by crowd-kit's DawidSkene."""
    import pandas as pd
    from crowdkit.aggregation import DawidSkene

    cell, member = np.nonzero((labels >= 0) & (labels < K))
    data = pd.DataFrame({"task": cell, "worker": [members[m] for m in member],
                         "label": labels[cell, member].astype(np.int64)})
    probs = np.full((labels.shape[0], K), np.nan)
    confusion = {m: np.full((K, K), np.nan) for m in members}
    if data.empty:
        return np.full(labels.shape[0], INVALID, dtype=np.int8), probs, confusion
    ds = DawidSkene(n_iter=DS_ITERATIONS)
    with warnings.catch_warnings():  # crowd-kit's own pandas deprecations, one per EM step
        warnings.simplefilter("ignore")
        fitted = ds.fit_predict_proba(data).reindex(columns=range(K), fill_value=0.0)
    probs[fitted.index.to_numpy()] = fitted.to_numpy()
    errors = ds.errors_.reindex(columns=range(K), fill_value=0.0)  # rows (worker, observed), columns true
    for m in members:
        if m in errors.index.get_level_values(0):
            e = errors.loc[m].reindex(range(K), fill_value=0.0).to_numpy()  # (observed, true)
            confusion[m] = e.T
    codes = np.where(np.isfinite(probs).all(axis=1), _pick(np.nan_to_num(probs)), INVALID)
    return codes.astype(np.int8), probs, confusion


def aggregate(rule: str, labels: np.ndarray, probs: np.ndarray, members: list[str]) -> dict:
    """{"codes": (cells,) verdict codes, "probs": (cells, K) or None, "confusion": {member:
    K x K} or None} for one rule; labels (cells, members), probs (cells, members, K)."""
    if rule == "majority":
        codes, p = majority(labels)
        return {"codes": codes, "probs": p, "confusion": None}
    if rule == "mean-probs":
        codes, p = mean_probs(labels, probs)
        return {"codes": codes, "probs": p, "confusion": None}
    if rule == "dawid-skene":
        codes, p, confusion = dawid_skene(labels, members)
        return {"codes": codes, "probs": p, "confusion": confusion}
    raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
