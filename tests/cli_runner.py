"""Run `gamut-local` in-process, as a user would type it (stdout and stderr together)."""

from typer.testing import CliRunner

from gamut_local.cli import app


def gamut(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])
