"""`gamut-local` with the fake engine, as a process a test can kill: python fake_cli.py ARGS.

Not a test module (pytest collects test_*.py only); the fault tests start it with
subprocess and send it SIGKILL or SIGINT mid-run.
"""

import sys

import pytest

from gamut_local.cli.main import app
from gamut_local.testing.fake_engine import install

if __name__ == "__main__":
    install(pytest.MonkeyPatch())
    app(sys.argv[1:], prog_name="gamut-local")
