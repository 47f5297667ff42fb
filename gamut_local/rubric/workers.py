"""Forked worker processes for CPU-bound Python that holds the GIL: the inputs the verdicts
are checked against (the dataset validated and compiled, the answers hashed) read beside the
verdicts (`beside`).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


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
