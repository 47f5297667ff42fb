"""Forked worker processes for CPU-bound Python that holds the GIL: the authoring commands'
work per question (`export`, `import`, `lint`: rendering and parsing YAML, compiling checks
and running the lint rules) on questions independent of each other (`in_processes`), so one
core each halves a 2-core machine's wait; and the inputs the verdicts are checked against (the
dataset validated and compiled, the answers hashed) read beside the verdicts (`beside`).

The workers are forked, so they see what `in_processes` is given (`shared()`) without its
being pickled; only each chunk's results travel back.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager

# Below this many questions one process does it all: forking costs more than it saves.
PARALLEL_FROM = 400
CHUNK = 100  # questions per task for a worker process
_SHARED: list = []  # what forked workers read (set just before the fork)


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def shared() -> list:
    """What the running `in_processes` was given, in a worker or in this process."""
    return _SHARED


def in_processes(fn: Callable[[int, int], list], n: int, data: list) -> Iterator:
    """`fn(start, stop)` over `range(n)` in chunks, each chunk's results in order, in forked
    worker processes (one per core, at most 8) that see `data` as `shared()`; in this process
    where there is one core, no fork, or fewer than PARALLEL_FROM items."""
    workers = min(cores(), 8)
    chunks = [(a, min(a + CHUNK, n)) for a in range(0, n, CHUNK)]
    if workers < 2 or n < PARALLEL_FROM or "fork" not in mp.get_all_start_methods():
        _SHARED[:] = data
        try:
            for a, b in chunks:
                yield from fn(a, b)
        finally:
            _SHARED.clear()
        return
    _SHARED[:] = data  # before the fork: the workers inherit it
    pool = ProcessPoolExecutor(workers, mp_context=mp.get_context("fork"))
    try:
        for part in pool.map(fn, *zip(*chunks)):  # all workers forked here, before any thread
            yield from part
    finally:  # after a failure, the chunks not started are dropped, not worked for nothing
        pool.shutdown(wait=True, cancel_futures=True)
        _SHARED.clear()


@contextmanager
def beside(*calls: tuple) -> Iterator[list[Future]]:
    """Each call, `(fn, *args)`, run while the caller goes on: yields their Futures; waits
    for them on the way out. Each in a forked process of its own where that is safe (more
    than one core, fork available, and no other Python thread in this process: a lock
    another thread held at the fork would stay held in the child), so Python that holds the
    GIL (validating and compiling a dataset, hashing the answers: 0.3 s and 1.2 s at paper
    scale) runs beside the caller's instead of taking turns with it. Otherwise in threads, as
    where the processes cannot be made (no semaphores: a container without /dev/shm; a fork
    refused: a process limit). Each `fn` is a module-level function; its arguments and result
    (or exception) are plain data that pickle."""
    pool = jobs = None
    if cores() > 1 and "fork" in mp.get_all_start_methods() and threading.active_count() == 1:
        try:
            pool = ProcessPoolExecutor(min(len(calls), cores()), mp_context=mp.get_context("fork"))
            jobs = [pool.submit(*call) for call in calls]  # with fork, the first submit forks every worker
        except (OSError, NotImplementedError):
            pool = jobs = None
    with pool or ThreadPoolExecutor(len(calls)) as running:
        yield jobs if jobs is not None else [running.submit(*call) for call in calls]
