"""Benchmark: GAMUT-sized multi-judge analysis through score, agree and the report tables.

Default shape: 3 judges x 14 models x 2 variants x 1,813 questions x 16 checks
(812,224 verdicts per judge, 2.4 million in all). The verdict table is built directly as
arrays (`data.verdict_table.VerdictTable`; no JSON, no per-record dicts): file reading is not
what is timed here (scripts/bench_analysis.py times whole commands on files). Timed, on one
core (BLAS/OpenMP threads pinned to 1 before numpy loads):

- score:         scoring.score_table + model_rows + domain_rows (leaderboard, tiers, rates,
                 domains, 1000-resample bootstrap CIs)
- agree:         agreement.agree_panel on the table's panel (rank statistics, kappa,
                 confusion, Krippendorff alpha, gold), from the same response scores
- report_tables: everything the report needs from the table (score, agree, per-judge
                 neighbour tests and variant comparison): the end-to-end figure, which must
                 stay under 5 s.

Prints one JSON object. Run: `.venv/bin/python scripts/bench_agree.py`
"""

from __future__ import annotations

import os

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from gamut_local.analysis.agreement import agree_panel, panel_from_table  # noqa: E402
from gamut_local.analysis.scoring import domain_rows, model_rows, score_table  # noqa: E402
from gamut_local.analysis.summary import report_tables  # noqa: E402
from gamut_local.data.verdict_table import VerdictTable  # noqa: E402

DOMAINS = ("plants", "food", "animals", "vehicles", "local places", "everyday objects",
           "consumer products", "books", "art", "sports", "text", "other")


def synthetic_table(judges: int, models: int, variants: int, questions: int, checks: int,
                    seed: int = 0) -> VerdictTable:
    """Verdict codes for every (judge, model, variant, question, check), built as arrays.

    Each model has a quality (chance a check is met); each judge copies a true verdict with
    its own reliability and otherwise guesses; about 1% of outputs are `invalid`. Judge 0
    is `gold`.
    """
    rng = np.random.default_rng(seed)
    n_sys = models * variants
    U = n_sys * questions * checks
    system = np.repeat(np.arange(n_sys), questions * checks)
    question = np.tile(np.repeat(np.arange(questions), checks), n_sys)
    check = np.tile(np.arange(checks), n_sys * questions)
    # Tiers by check position: 4 answer_critical, 7 valuable, 5 context in 16.
    tier = np.minimum(check * 3 // checks, 2).astype(np.int8)
    quality = rng.uniform(0.25, 0.8, size=models)
    gain = 0.05 if variants == 2 else 0.0
    sys_quality = (quality[:, None] + gain * np.arange(variants)[None, :]).ravel()
    u = rng.random(U)
    q = sys_quality[system]
    # Omission dominates contradiction, as GAMUT reports.
    truth = np.select([u < q, u < q + 0.1, u < 0.95], [0, 1, 2], 3).astype(np.int8)
    verdict = np.empty((judges, U), dtype=np.int8)
    for j in range(judges):
        reliability = 1.0 if j == 0 else 0.9 - 0.1 * j
        guess = rng.integers(0, 4, size=U, dtype=np.int8)
        verdict[j] = np.where(rng.random(U) < reliability, truth, guess)
        if j:
            verdict[j][rng.random(U) < 0.01] = 4  # invalid
    n = judges * U
    rows = lambda a, dtype=np.int32: np.tile(a, judges).astype(dtype)  # noqa: E731
    return VerdictTable(
        judges=["gold"] + [f"judge-{j}" for j in range(1, judges)],
        models=[f"model-{m:02d}" for m in range(models)], questions=[f"q{i:05d}" for i in range(questions)],
        checks=[f"c{c:02d}" for c in range(checks)], files=["<arrays>"],
        judge=np.repeat(np.arange(judges), U).astype(np.int32), model=rows(system // variants),
        variant=rows(system % variants, np.int8), question=rows(question), check=rows(check),
        tier=rows(tier, np.int8), verdict=verdict.ravel(), probs=np.full((n, 4), np.nan),
        file=np.zeros(n, dtype=np.int32), line=np.zeros(n, dtype=np.int32))


def _score(table, domains):
    scores = score_table(table, domains)
    return {"models": model_rows(scores), "domains": domain_rows(scores)}


def _report(table, domains):
    scores = score_table(table, domains)
    return report_tables(scores, agree_panel(panel_from_table(table), scores))


def timed(fn, repeats: int):
    """Best of `repeats`: (CPU seconds of this process, wall seconds, result).

    CPU time is the figure that counts on a shared machine: with every thread pool pinned to
    one thread it is one core's work, whatever else the machine is running; wall time is
    printed beside it.
    """
    best_cpu = best_wall = float("inf")
    out = None
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        out = fn()
        best_cpu = min(best_cpu, time.process_time() - c0)
        best_wall = min(best_wall, time.perf_counter() - w0)
    return best_cpu, best_wall, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--judges", type=int, default=3)
    ap.add_argument("--models", type=int, default=14)
    ap.add_argument("--variants", type=int, choices=(1, 2), default=2)
    ap.add_argument("--questions", type=int, default=1813)
    ap.add_argument("--checks", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3, help="best of this many runs")
    args = ap.parse_args()

    t0 = time.perf_counter()
    table = synthetic_table(args.judges, args.models, args.variants, args.questions, args.checks)
    build_s = time.perf_counter() - t0
    domains = {q: DOMAINS[i % len(DOMAINS)] for i, q in enumerate(table.questions)}

    score_s, score_wall, scored = timed(lambda: _score(table, domains), args.repeats)
    agree_s, agree_wall, agreement = timed(
        lambda: agree_panel(panel_from_table(table), score_table(table)), args.repeats)
    tables_s, tables_wall, tables = timed(lambda: _report(table, domains), args.repeats)

    per_judge = len(table) // args.judges
    print(json.dumps({
        "shape": {"judges": args.judges, "models": args.models, "variants": args.variants,
                  "questions": args.questions, "checks": args.checks},
        "verdicts_per_judge": per_judge,
        "verdicts_total": per_judge * args.judges,
        "build_arrays_s (not timed work)": round(build_s, 3),
        "score_cpu_s": round(score_s, 3),
        "agree_cpu_s": round(agree_s, 3),
        "report_tables_cpu_s (score + agree + neighbours + variants)": round(tables_s, 3),
        "wall_s": {"score": round(score_wall, 3), "agree": round(agree_wall, 3),
                   "report_tables": round(tables_wall, 3)},
        "load_average_1min": round(os.getloadavg()[0], 2),
        "target_s": 5.0,
        "meets_target": tables_s < 5.0,
        "verdicts_per_s": round(per_judge * args.judges / tables_s),
        "best_of": args.repeats,
        "threads": 1,
        "check": {
            "kendall_tau_b gold vs judge-1": agreement["pairs"][0]["kendall_tau_b"],
            "krippendorff_alpha": agreement["krippendorff_alpha"],
            "leaderboard rows": len(tables["leaderboard"]),
            "scored systems": len(scored["models"]),
        },
    }, indent=2))


if __name__ == "__main__":
    main()
