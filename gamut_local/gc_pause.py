"""Reading a large input without the cyclic garbage collector (config, dataset and revise
files). Below every other module: `score` and `agree` read a dataset without importing the
config models."""

from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def gc_paused():
    """The cyclic garbage collector off while a large input is read into fresh objects: it
    would walk them all again each time the heap grows by a quarter, and a document read
    whole makes no cycles (a cyclic alias is refused). Reference counting still frees.

    On the way out what was read is frozen (`gc.freeze`: left out of every later collection)
    rather than handed back to the collector, whose first collection would walk it all: at
    100,000 items that one walk took 2.5 CPU-s, longer than reading the dataset."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was:
            gc.enable()
