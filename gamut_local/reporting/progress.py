"""Progress bars for long stages (rich), shared by every stage so `run` shows one display."""

from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def progress_bars(console, progress=None):
    """A rich Progress for a stage: the caller's (run shows one for all stages) or a new one."""
    if progress is not None:
        yield progress
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=console) as bars:
        yield bars
