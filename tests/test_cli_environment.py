"""What the `gamut-local` process sets for itself before a command runs: Arrow's system
allocator (mimalloc's page faults made paper-scale `score` erratic) and no pydantic plugin
scan (16 ms a command); a user's own setting of either is kept."""

from __future__ import annotations

import os
import sys

import gamut_local
from tests.support import processes

SAMPLE = f"{gamut_local.__path__[0]}/data/sample/questions.jsonl"
RUN = f"""
import os, sys
from gamut_local.cli.main import app
sys.argv = ["gamut-local", "validate", {SAMPLE!r}]
try:
    app()
except SystemExit as e:
    assert not e.code, e.code
import pyarrow
print(pyarrow.default_memory_pool().backend_name, os.environ["PYDANTIC_DISABLE_PLUGINS"])
"""


def _chosen(**env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k not in ("ARROW_DEFAULT_MEMORY_POOL", "PYDANTIC_DISABLE_PLUGINS")}
    done = processes.run([sys.executable, "-c", RUN], timeout=120, waiting_for="`gamut-local validate`",
                         env={**base, **env})
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\n")[-2]


def test_the_cli_picks_the_system_allocator_and_no_plugin_scan():
    assert _chosen() == "system __all__"


def test_a_users_own_choice_is_kept():
    assert _chosen(ARROW_DEFAULT_MEMORY_POOL="jemalloc", PYDANTIC_DISABLE_PLUGINS="0") == "jemalloc 0"


def test_the_executable_runs_the_command_and_exits_with_its_code():
    """`gamut-local` is `cli.main.main`: the command; the exit code is the command's."""
    probe = ("import sys\nfrom gamut_local.cli.main import main\nsys.argv = ['gamut-local', *sys.argv[1:]]\n"
             "try:\n    main()\nexcept SystemExit as e:\n"
             "    print(e.code or 0)\n")
    for argv, code in ((["--help"], 0), (["validate", "/nonexistent/questions.jsonl"], 1)):  # neither reads a dataset
        done = processes.run([sys.executable, "-c", probe, *argv], timeout=120, waiting_for="`gamut-local`")
        assert done.stdout.split("\n")[-2] == f"{code}", done.stdout + done.stderr
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(gamut_local.__path__[0]).parent / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["gamut-local"] == "gamut_local.cli.main:main"
