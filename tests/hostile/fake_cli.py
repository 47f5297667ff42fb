"""`gamut-local` with the fake engine, as a process a test can kill: python fake_cli.py ARGS.

Not a test module (pytest collects test_*.py only); the fault tests start it with
subprocess and send it SIGKILL or SIGINT mid-run.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for tests.support

from gamut_local.cli.main import app  # noqa: E402
from tests.support.fake_engine import install  # noqa: E402

if __name__ == "__main__":
    install(pytest.MonkeyPatch())
    app(sys.argv[1:], prog_name="gamut-local")
