"""The console and progress bars for long stages (rich), shared by every stage so `run` shows
one display."""

from __future__ import annotations

from contextlib import contextmanager


def plain_console(**options):
    """A rich console that prints text as given: no markup, no emoji codes, no highlighting.
    Messages carry paths and names: `[/x]` in an output path was read as a closing tag and
    failed the command after its files were written, `[bold]` vanished from the path shown,
    and `:fire:` became an emoji. Styles go in `style=` or `rich.text.Text`."""
    from rich.console import Console

    return Console(highlight=False, markup=False, emoji=False, **options)


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
