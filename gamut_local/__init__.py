"""gamut_local: the GAMUT factual-completeness benchmark, offline, on open models."""

__version__ = "0.1.0"
