"""Synthetic verdicts for tests and benchmarks (numpy rng): integer-coded arrays for the
scorer (`scorer_arrays`), multi-judge verdict records (`make_records`), and
`assert_same_table` for readers that must agree.

In `make_records` each (model, variant) has a quality; each judge copies the true verdict with its own
reliability and otherwise picks any of the five codes (invalid included).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from gamut_local.vocab import TIERS, VERDICTS


def make_records(seed: int = 0, judges=(("gold", 1.0), ("judge-a", 0.8), ("judge-b", 0.55)),
                 models=("m-large", "m-medium", "m-small", "m-tiny"), variants=("multimodal",),
                 questions: int = 30, checks: int = 6) -> list[dict]:
    rng = np.random.default_rng(seed)
    quality = {m: q for m, q in zip(models, np.linspace(0.85, 0.25, len(models)))}
    records = []
    for m in models:
        for k, variant in enumerate(variants):
            q = quality[m] + 0.05 * k
            u = rng.random((questions, checks))
            truth = np.select([u < q, u < q + 0.1, u < 0.93], [0, 1, 2], 3)
            for judge, reliability in judges:
                copy = rng.random((questions, checks)) < reliability
                codes = np.where(copy, truth, rng.integers(0, 5, size=truth.shape))
                for qi in range(questions):
                    for c in range(checks):
                        records.append({
                            "question_id": f"q{qi:03d}", "model": m, "variant": variant,
                            "judge": judge, "check_id": f"c{c}", "tier": TIERS[c % 3],
                            "verdict": VERDICTS[codes[qi, c]]})
    return records


def scorer_arrays(n_verdicts: int, n_responses: int, seed: int = 0):
    """Random verdicts with realistic skew (mostly meets/missing, few invalid)."""
    rng = np.random.default_rng(seed)
    verdict = rng.choice(5, size=n_verdicts, p=[0.45, 0.15, 0.3, 0.08, 0.02]).astype(np.int8)
    tier = rng.choice(3, size=n_verdicts, p=[0.4, 0.4, 0.2]).astype(np.int8)
    response = np.sort(rng.integers(0, n_responses, size=n_verdicts))
    return verdict, tier, response


def assert_same_table(a, b) -> None:
    """Two VerdictTables are equal field by field (arrays: same dtype, same values, NaN = NaN)."""
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), f.name
        else:
            assert x == y, f.name


def import_into(records: list[dict], run_dir):
    """Verdict records into a run's store the way a user puts them there: as a JSON Lines file
    given to `verdicts import` (`import_files`); {unit or file: verdicts added}."""
    import json
    import tempfile
    from pathlib import Path

    from gamut_local.data.verdict_io import import_files

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "records.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        return import_files([path], Path(run_dir))
