"""A prompt template's identity: the hash every record made with it carries."""

from __future__ import annotations

from gamut_local.hashing import short_hash


def template_hash(*parts: str) -> str:
    return short_hash(*parts)
