"""What the `gamut-local` process sets for itself before a command runs."""

from __future__ import annotations

import os


def tune() -> None:
    """The collector's pace and two environment defaults; a user's own setting of either
    variable is kept."""
    import gc

    # Records are trees, not cycles: the collector's default pace (every 700 allocations)
    # rescans the ever larger heap of a big dataset, and took half the time of `validate`
    # and `lint` at 100,000 items (scripts/bench_authoring.py). Cycles are still collected.
    gc.set_threshold(100_000, 50, 1000)
    # Arrow's own allocator (mimalloc) gave memory back and faulted it in again erratically on
    # a 2-core VM: `score` at paper scale took 0.96-1.49 s with it, 0.94-1.05 s with the
    # system allocator (scripts/bench_analysis.py). Read when pyarrow is first imported, which
    # no command does before this; a pool the user chose is kept.
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    # pydantic looks for plugins in every installed package's entry points when the first
    # model is built: 16 ms of each command in an environment with vLLM, for plugins that
    # nothing here uses. A user's own setting is kept.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
