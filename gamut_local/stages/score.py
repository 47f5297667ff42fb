"""The score stage: read and validate verdict files (and the dataset, for domains) and score
them with `analysis.metrics`, where the formula and the arithmetic live.

`score_run` scores every judge's verdicts of a run plus its `extra_verdicts` (e.g. the
sample's gold verdicts) together into `scores/scores.json`, one entry per (judge, model,
variant)."""

from __future__ import annotations

from pathlib import Path

from gamut_local.analysis.metrics import score_table, verdict_table
from gamut_local.config import RunSpec
from gamut_local.data.dataset import load_questions
from gamut_local.data.records import Verdict, load_records, verdict_key
from gamut_local.errors import InputError, Problem
from gamut_local.rundir.layout import scores_path, verdict_files
from gamut_local.rundir.store import write_json


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
    records = load_records(list(paths), Verdict, verdict_key)
    domains = None
    if dataset is not None:
        domains = {q.question_id: q.domain for q in load_questions(dataset, check_images=False)}
    return score_records(records, domains, seed=seed, n_boot=n_boot)


def score_run(spec: RunSpec) -> Path:
    """Score every verdict file of the run and its extra_verdicts together."""
    paths = verdict_files(Path(spec.output_dir)) + [Path(p) for p in spec.extra_verdicts]
    if not paths:
        raise InputError([Problem(str(Path(spec.output_dir) / "verdicts"), None, "",
                                  "no verdict files and no extra_verdicts: run judge first")])
    out = scores_path(Path(spec.output_dir))
    write_json(out, score_files(paths, dataset=Path(spec.dataset), seed=spec.seed))
    return out
