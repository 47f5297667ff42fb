"""What the `gamut-local` process sets for itself before a command runs."""

from __future__ import annotations

import os


def tune() -> None:
    """Two environment defaults; a user's own setting of either variable is kept."""
    # Arrow's own allocator (mimalloc) returned memory and faulted it in again erratically on
    # small VMs, slowing `score` at paper scale (docs/performance.md). Read when pyarrow is
    # first imported, which no command does before this.
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    # pydantic looks for plugins in every installed package's entry points when the first
    # model is built, for plugins that nothing here uses.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
