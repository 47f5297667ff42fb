"""The analysis output files as typed, versioned models: `scores.json`, `agreement.json` and
the report's `tables/report.json`. Each names the inputs it came from (path, size, mtime and
sha256 of every verdict file and the dataset), so `report` can tell whether it is current.

Floats are full precision (what the arithmetic gave; JSON writes the shortest repr that
reads back to the same double); `null` where a value does not exist. Rounding is for display
only. docs/outputs.md documents every field.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 2  # 2: coverage fields (n_questions, n_expected, n_missing_verdicts, complete)
Num = float | None


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class InputFile(_Out):
    path: str
    bytes: int
    mtime_ns: int
    sha256: str


class Formula(_Out):
    partial_credit: float
    contradiction_weight: float
    tier_weights: list[float]
    invalid_as: Literal["missing", "exclude"]


class Bootstrap(_Out):
    n_boot: int
    seed: int
    level: float = 0.95
    over: Literal["questions"] = "questions"


class Estimate(_Out):
    """A corrected estimate (`analysis.correction`), in points; None with a `reason` where
    there is none."""

    score: Num
    ci_low: Num
    ci_high: Num
    human_only: Num
    human_only_ci_low: Num
    human_only_ci_high: Num
    n_labeled: int
    n_total: int
    bias: Num
    judge_only: Num
    method: str
    reason: str | None


class Corrected(Estimate):
    judge: str
    gold: str
    sample_id: str
    tiers: dict[str, Estimate]


class CorrectedDifference(Estimate):
    judge: str
    a: list[str] = Field(min_length=2, max_length=2)  # [model, variant]
    b: list[str] = Field(min_length=2, max_length=2)


class CorrectedRank(_Out):
    judge: str
    model: str
    variant: str
    rank_best: int = Field(ge=1)
    rank_worst: int = Field(ge=1)


class Correction(_Out):
    """What `--correct-with` used: the gold judges, the sample design, the CI level."""

    gold: str  # the pattern given
    gold_judges: list[str]
    sample_file: str
    sample_id: str
    per: str
    level: float
    differences: list[CorrectedDifference]
    ranking: list[CorrectedRank] = []  # the rank intervals the differences leave open (rank_intervals)
    notes: list[str] = []  # human verdicts made outside the sample, not used (analysis.design.sample_verdicts)


class ModelScore(_Out):
    judge: str
    model: str
    variant: str
    gamut_score: Num
    ci95: list[Num] = Field(min_length=2, max_length=2)
    tier_scores: dict[str, Num]
    verdict_rates: dict[str, float]
    verdict_counts: dict[str, int]
    n_responses: int
    n_questions: int
    n_expected: int
    n_missing_verdicts: int
    n_complete_responses: int
    complete: bool
    corrected: Corrected | None = None  # with --correct-with: this judge's scores corrected by the gold


class DomainScore(_Out):
    judge: str
    model: str
    variant: str
    domain: str
    gamut_score: Num
    n_responses: int


CoverageFrom = Literal["dataset", "verdicts"]


class ScoresFile(_Out):
    schema_version: Literal[2] = SCHEMA_VERSION
    kind: Literal["gamut-local scores"] = "gamut-local scores"
    inputs: list[InputFile]
    dataset: InputFile | None
    coverage_from: CoverageFrom
    formula: Formula
    bootstrap: Bootstrap
    judges: list[str]
    responses_file: str | None  # per-response file beside this one (relative name)
    models: list[ModelScore]
    domains: list[DomainScore] | None
    # The answer files whose hashes decided which verdicts were stale, and per judge how many
    # were left out for which reason ("check_hash", "answer_hash"), or kept without identity.
    answers: list[InputFile] = []
    stale_verdicts: dict[str, dict[str, int]] = {}
    compile: dict[str, int] = {}  # the settings the dataset's checks were compiled with to compare
    correction: Correction | None = None  # with --correct-with


class PairStats(_Out):
    judge_a: str
    judge_b: str
    n_questions: int
    kendall_tau_b: Num
    spearman_rho: Num
    identical_ranking: bool | None
    adjacent_swaps: int | None
    max_abs_diff: Num
    mean_diff: Num
    cohen_kappa: Num
    confusion: list[list[int]]


class PairScore(_Out):
    model: str
    variant: str
    a: float
    b: float


class PairScores(_Out):
    judge_a: str
    judge_b: str
    n_questions: int
    models: list[PairScore]


class GoldStats(_Out):
    accuracy: Num
    cohen_kappa: Num
    confusion: list[list[int]]
    score_bias: Num


class Keys(_Out):
    total: int
    graded_by_all: int
    missing: dict[str, int]
    shared_by_pair: dict[str, int]


class Coverage(_Out):
    judge: str
    model: str
    variant: str
    n_questions: int
    n_expected: int
    n_missing_verdicts: int
    n_complete_responses: int
    complete: bool


class Agreement(_Out):
    judges: list[str]
    verdict_order: list[str]
    keys: Keys
    coverage_from: CoverageFrom
    coverage: list[Coverage]
    pairs: list[PairStats]
    pair_scores: list[PairScores]
    krippendorff_alpha: dict[str, Num]
    vs_gold: dict[str, GoldStats]
    notes: dict[str, str]


class AgreementFile(Agreement):
    schema_version: Literal[2] = SCHEMA_VERSION
    kind: Literal["gamut-local agreement"] = "gamut-local agreement"
    inputs: list[InputFile]


class ReportTablesFile(_Out):
    """`tables/report.json`: every table of the report (rows as in the CSV files)."""

    schema_version: Literal[2] = SCHEMA_VERSION
    kind: Literal["gamut-local report tables"] = "gamut-local report tables"
    inputs: list[InputFile]
    dataset: InputFile | None
    coverage_from: CoverageFrom
    pilot: int | None  # the --limit of a pilot run, else None
    incomplete: list[str]  # each incomplete (judge, system), as a sentence
    judges: list[str]
    systems: list[dict]
    n_questions: int
    n_verdicts: dict[str, int]
    leaderboard: list[dict]
    tiers: list[dict]
    verdicts: list[dict]
    neighbours: list[dict]
    variants: dict[str, dict]
    judge_scores: list[dict]
    agreement: Agreement | None
    domains: list[dict] | None
    missing: list[str]
