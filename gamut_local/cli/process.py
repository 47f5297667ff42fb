"""What the `gamut-local` process sets for itself before a command runs."""

from __future__ import annotations

import os


def tune() -> None:
    """The collector's pace and two environment defaults; a user's own setting of either
    variable is kept."""
    import gc

    # Records are trees, not cycles: at the default pace (every 700 allocations) the collector
    # rescans the ever larger heap of a paper-sized read (docs/performance.md). Cycles are
    # still collected.
    gc.set_threshold(100_000, 50, 1000)
    # Arrow's own allocator (mimalloc) returned memory and faulted it in again erratically on
    # small VMs, slowing `score` at paper scale (docs/performance.md). Read when pyarrow is
    # first imported, which no command does before this.
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    # pydantic looks for plugins in every installed package's entry points when the first
    # model is built, for plugins that nothing here uses.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
