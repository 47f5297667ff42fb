"""Benchmark the vectorised scorer against the per-response Python loop, side by side.

    .venv/bin/python scripts/bench_score.py [--verdicts 10000000] [--responses 700000]

Prints JSON: verdicts/s of each implementation on the same data in the same run, their
ratio, and whether both agree. Pins BLAS/OpenMP to one thread: the claim is per core.
"""

from __future__ import annotations

import os

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from gamut_local.metrics import score_responses, score_responses_reference  # noqa: E402


def synthetic_verdicts(n_verdicts: int, n_responses: int, seed: int = 0):
    """Random verdicts with realistic skew (mostly meets/missing, few invalid)."""
    rng = np.random.default_rng(seed)
    verdict = rng.choice(5, size=n_verdicts, p=[0.45, 0.15, 0.3, 0.08, 0.02]).astype(np.int8)
    tier = rng.choice(3, size=n_verdicts, p=[0.4, 0.4, 0.2]).astype(np.int8)
    response = np.sort(rng.integers(0, n_responses, size=n_verdicts))
    return verdict, tier, response


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verdicts", type=int, default=10_000_000)
    ap.add_argument("--responses", type=int, default=700_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    v, t, r = synthetic_verdicts(args.verdicts, args.responses)
    fast = best_of(lambda: score_responses(v, t, r, args.responses), args.repeats)
    loop = best_of(lambda: score_responses_reference(v, t, r, args.responses), 1)
    a, b = score_responses(v, t, r, args.responses), score_responses_reference(v, t, r, args.responses)
    print(json.dumps({
        "verdicts": args.verdicts, "responses": args.responses,
        "vectorised_s": round(fast, 4), "loop_s": round(loop, 2),
        "vectorised_verdicts_per_s": round(args.verdicts / fast),
        "loop_verdicts_per_s": round(args.verdicts / loop),
        "speedup": round(loop / fast, 1),
        "agree": bool(np.allclose(a[0], b[0], atol=1e-12, equal_nan=True)
                      and np.allclose(a[1], b[1], atol=1e-12, equal_nan=True)),
    }, indent=2))


if __name__ == "__main__":
    main()
