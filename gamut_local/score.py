"""`gamut-local score`: read and validate verdict files (and the dataset, for domains) and
score them with `metrics`, where the formula and the arithmetic live."""

from __future__ import annotations

from pathlib import Path

from .metrics import score_table, verdict_table


def score_records(records, domains: dict[str, str] | None = None, *, seed: int = 0, n_boot: int = 1000,
                  **formula) -> dict:
    """Score verdict dicts of any mix of judges, models and variants.

    Returns ``{"models": [{judge, model, variant, gamut_score, tier_scores, verdict_rates,
    n_responses, ci95}], "responses": [{judge, model, variant, question_id, score,
    tier_scores}]}`` and, given ``domains`` (question_id -> domain), ``"domains"`` with one
    entry per (judge, model, variant, domain). Scores are in points (x100) except response
    scores, which are in [-1, 1].
    """
    return score_table(verdict_table(records), domains, seed=seed, n_boot=n_boot, **formula)


def score_files(paths, dataset: Path | None = None, *, seed: int = 0, n_boot: int = 1000) -> dict:
    """Read and validate verdict JSONL files (and the dataset, for domains), then score."""
    from .data.records import Verdict, load_questions, load_records, verdict_key

    records = load_records(list(paths), Verdict, verdict_key)
    domains = None
    if dataset is not None:
        domains = {q.question_id: q.domain for q in load_questions(dataset, check_images=False)}
    return score_records(records, domains, seed=seed, n_boot=n_boot)
