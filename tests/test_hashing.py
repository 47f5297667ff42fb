"""One home for the short hashes run files carry (`gamut_local.hashing`): every one is made
the same way, and no module writes its own."""

import hashlib
import re
from pathlib import Path

from gamut_local.hashing import HASH_CHARS, file_sha256, short_hash

PACKAGE = Path(__file__).resolve().parents[1] / "gamut_local"


def test_short_hash_is_sha256_of_the_parts_joined_by_nul():
    # The values already written into run files: sha256, NUL-joined UTF-8, 12 hex characters.
    assert HASH_CHARS == 12
    assert short_hash("a", "b") == hashlib.sha256(b"a\x00b").hexdigest()[:12] == "59b271ae1bbc"
    assert short_hash("é") == hashlib.sha256("é".encode()).hexdigest()[:12]
    assert short_hash("x", chars=8) == hashlib.sha256(b"x").hexdigest()[:8]
    # crag_mm's image file names: sha1, 10 characters
    assert short_hash("s/x", algorithm="sha1", chars=10) == hashlib.sha1(b"s/x").hexdigest()[:10]


def test_file_sha256_is_the_whole_content_hash(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"\x00gamut" * 10_000)
    assert file_sha256(path) == hashlib.sha256(path.read_bytes()).hexdigest()


def test_no_module_cuts_a_digest_by_hand():
    """A truncated digest written out anywhere but gamut_local/hashing.py is a second rule."""
    cut = re.compile(r"(hex)?digest\(\)\s*\[")
    found = [f"{p.relative_to(PACKAGE.parent)}:{n}" for p in sorted(PACKAGE.rglob("*.py"))
             if p.name != "hashing.py" or p.parent != PACKAGE
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if cut.search(line)]
    assert found == [], f"use gamut_local.hashing.short_hash instead: {found}"
