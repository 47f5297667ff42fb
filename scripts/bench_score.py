"""Benchmark the vectorised scorer against the per-response Python loop, side by side.

    .venv/bin/python scripts/bench_score.py [--verdicts 10000000] [--responses 700000]

Prints JSON: verdicts/s of each implementation on the same data in the same run, their
ratio, and whether both agree. Pins BLAS/OpenMP to one thread: the claim is per core.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import argparse  # noqa: E402
import json  # noqa: E402

import numpy as np  # noqa: E402

from gamut_local.analysis.metrics import score_responses, score_responses_reference  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for tests.support
from tests.support.synthetic import scorer_arrays  # noqa: E402
from tests.support.timing import best_of  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verdicts", type=int, default=10_000_000)
    ap.add_argument("--responses", type=int, default=700_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    v, t, r = scorer_arrays(args.verdicts, args.responses)
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
