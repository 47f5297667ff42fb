"""The fake engine's patches end with the test that made them: after `install`'s monkeypatch
is undone, every place the stages look the engine loader up holds the real one again, even
where installing it was what first imported those modules."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# In a fresh interpreter, so that `install` is what first imports the stages (as when a test
# that installs it runs before any test that imports them).
PROBE = textwrap.dedent("""
    import importlib, sys
    import pytest
    from tests.support import fake_engine

    assert "gamut_local.stages.pipeline" not in sys.modules
    mp = pytest.MonkeyPatch()
    fake_engine.install(mp)
    patched = {t: getattr(importlib.import_module(t.rsplit(".", 1)[0]), t.rsplit(".", 1)[1])
               for t in fake_engine.TARGETS}
    mp.undo()
    from gamut_local.engines.loading import load_engine
    left = [t for t in fake_engine.TARGETS
            if getattr(importlib.import_module(t.rsplit(".", 1)[0]), t.rsplit(".", 1)[1]) is not load_engine]
    assert all(v is fake_engine.load_fake for v in patched.values()), patched
    assert not left, f"still patched after the test: {left}"
""")


def test_the_fake_engine_is_gone_after_its_test_everywhere_it_was_installed():
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
