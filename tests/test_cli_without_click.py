"""The core install has no click of its own: typer >= 0.29 vendors it, and nothing else in the
core pulls it in. Every command must work, and fail cleanly, with `import click` impossible."""

from __future__ import annotations

import subprocess
import sys

import gamut_local
from tests.support import processes

SAMPLE = f"{gamut_local.__path__[0]}/data/sample/questions.jsonl"

# `sys.modules["click"] = None` makes `import click` raise ImportError, as in a venv without it.
RUN = """
import sys
sys.modules["click"] = None
from gamut_local.cli.main import app
from tests.support import processes
sys.argv = ["gamut-local", *sys.argv[1:]]
app()
"""


def _cli(*args: str) -> subprocess.CompletedProcess:
    # 120 s: one CLI start-up and a 13-question validation, on a busy machine.
    return processes.run([sys.executable, "-c", RUN, *args], timeout=120, waiting_for=f"`gamut-local {args[0]}`")


def test_commands_run_and_fail_cleanly_without_click(tmp_path):
    ok = _cli("validate", SAMPLE)
    assert ok.returncode == 0 and "all valid" in ok.stdout, ok.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question_id": "q1"}\n')
    failed = _cli("validate", str(bad))
    assert failed.returncode == 1 and "Traceback" not in failed.stderr + failed.stdout
    assert str(bad) in failed.stdout + failed.stderr
    usage = _cli("validate")  # a usage error is typer's to report: exit 2, no internal error
    assert usage.returncode == 2 and "internal error" not in usage.stdout + usage.stderr
