"""Drawing the report's figures (`reporting.figures`), in worker processes where it can.

matplotlib takes ~0.35 s to import and draws on one core, and the figures are independent.
So the report forks its workers (`drawing_pool()`, then `Workers.start`) as soon as it has
read the verdicts (the read forks its own processes first, where no thread runs yet: the
workers' pool brings one), and each worker imports matplotlib while this process scores and
measures agreement; `draw_all` then hands them the figures, slowest first. This module does
not import matplotlib: with workers, this process never does.
"""

from __future__ import annotations

import os
import sys
from contextlib import ExitStack, contextmanager
from pathlib import Path

# Every figure (`figures.FIGURES`), in the order the workers take them: slowest first
# (measured at paper scale, scripts/bench_analysis.py), so the workers finish together.
SLOWEST_FIRST = ("leaderboard", "tiers", "verdicts", "domains", "judge_scatter", "variants", "confusion")


def draw(name: str, tables: dict, out_dir: Path) -> Path | None:
    """Draw one figure into out_dir; None when its table is empty."""
    from gamut_local.reporting import figures

    return figures.draw(name, tables, out_dir)


def _load() -> None:
    """A worker's start: import matplotlib and the figures now, while nothing waits on it."""
    try:
        from gamut_local.reporting import figures  # noqa: F401
    except ImportError:  # no matplotlib: `draw` raises it where someone sees it
        pass


class Workers:
    """Worker processes for `draw_all`, forked on the first `start()`; `pool` stays None until
    then, or where they cannot be (one core, no fork() as on Windows, or a process that holds
    an engine: torch's OpenMP pool and vLLM's threads are not safe to fork, and `run`
    reports in the process that judged)."""

    def __init__(self, workers: int, stack: ExitStack):
        self.workers, self.pool, self._stack = workers, None, stack

    def start(self) -> None:
        import multiprocessing

        if self.pool is not None or self.workers < 2 or "fork" not in multiprocessing.get_all_start_methods() \
                or any(name in sys.modules for name in ("torch", "vllm")):
            return
        from concurrent.futures import ProcessPoolExecutor

        self.pool = self._stack.enter_context(ProcessPoolExecutor(
            self.workers, mp_context=multiprocessing.get_context("fork"), initializer=_load))
        self.pool.submit(int)  # with fork, the first job starts every worker


@contextmanager
def drawing_pool(workers: int | None = None):
    """`Workers` (default: one per core, at most one per figure), shut down on leaving."""
    workers = min(len(SLOWEST_FIRST), os.cpu_count() or 1) if workers is None else workers
    with ExitStack() as stack:
        yield Workers(workers, stack)


def draw_all(tables: dict, out_dir: Path, workers: Workers | None = None) -> dict[str, Path]:
    """Draw every figure that has data, by `workers` (started now if they are not yet) or in
    this process; {name: path}. Each figure is drawn by the same function either way: the
    same PNGs."""
    if workers is not None:
        workers.start()
    pool = workers.pool if workers is not None else None
    if pool is None:
        paths = {n: draw(n, tables, out_dir) for n in SLOWEST_FIRST}
    else:
        jobs = {n: pool.submit(draw, n, tables, out_dir) for n in SLOWEST_FIRST}
        paths = {n: job.result() for n, job in jobs.items()}
    return {n: path for n, path in paths.items() if path is not None}
