"""The short content hashes records, templates and file names carry: one function, so every
hash a run file holds is made one way (sha256 of the parts joined by NUL, its first 12 hex
characters unless a caller's stored format says otherwise)."""

from __future__ import annotations

import hashlib

HASH_CHARS = 12  # 48 bits: collisions within one run's records are not a practical concern


def short_hash(*parts: str, chars: int = HASH_CHARS, algorithm: str = "sha256") -> str:
    """The first `chars` hex characters of `algorithm` over `parts` joined by NUL (one part:
    that text alone), UTF-8 encoded."""
    return hashlib.new(algorithm, "\x00".join(parts).encode("utf-8")).hexdigest()[:chars]


def file_sha256(path) -> str:
    """A file's whole sha256 in hex, read in blocks: what names an input file, an image or a
    model's config file by its content."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
