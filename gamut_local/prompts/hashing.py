"""A prompt template's identity: the hash every record made with it carries."""

from __future__ import annotations

import hashlib


def template_hash(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()[:12]
