"""Timing for the benchmark scripts: the best of a few runs, because on a shared machine the
fastest run is the one least disturbed by others."""

from __future__ import annotations

import time


def best_of(fn, repeats: int) -> float:
    """Seconds of the fastest of `repeats` calls of `fn()`."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)
