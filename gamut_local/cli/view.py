"""`gamut-local view`: the local web app over a run."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from gamut_local.cli.console import out
from gamut_local.cli.errors import OPTIONS, user_errors
from gamut_local.cli.options import VIEW_HOST, VIEW_PORT
from gamut_local.errors import InputError, Problem


@user_errors
def view(
    run_dir: Path = typer.Argument(..., help="Run directory to look inside."),
    port: int = typer.Option(VIEW_PORT, help="Port to listen on."),
    host: str = typer.Option(VIEW_HOST, help="Address to listen on, and the one name requests may be "
                             "addressed to; beyond this machine only with --team."),
    team: bool = typer.Option(False, "--team", help="Serve the run's team: each annotator signs in with the "
                              "link `gamut-local annotators add` printed and writes as themselves."),
    annotator: Optional[str] = typer.Option(None, help="Adjudicate as judge human-NAME (lower-case letters, digits, _ -)."),
    read_only: bool = typer.Option(False, "--read-only", help="Write nothing, even with --annotator."),
    dataset: Optional[Path] = typer.Option(None, help="Dataset (default: the one manifest.json names)."),
):
    """Local web app over a run: leaderboard, questions, rubric trees, responses, verdicts, and an
    adjudication queue that writes human verdicts to verdicts/human-NAME/ (needs the `view` extra).
    With --team, one viewer serves every annotator of `gamut-local annotators`. Plain HTTP: beyond
    a trusted network, put it behind TLS (a tunnel or a proxy), or the links and cookies travel in clear."""
    try:
        from gamut_local.viewer.app import serve
    except ImportError as e:
        raise InputError([Problem("gamut-local view", None, "", f"needs the `view` extra ({e.name} is "
                                  "missing): pip install -e '.[view]'")])
    serve(run_dir, port=port, annotator=annotator, read_only=read_only, dataset=dataset,
          echo=lambda line: out.print(line), debug=OPTIONS["debug"], team=team, host=host)
