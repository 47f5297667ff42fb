"""The `gamut-local` app: its global options and every command, registered by group."""

from __future__ import annotations

import sys

import typer

from gamut_local.cli import assign, authoring, calibration, cluster, pipeline, process, team, verdicts, view
from gamut_local.cli.errors import OPTIONS

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="GAMUT factual-completeness benchmark, offline, on open models.")


@app.callback()
def _global_options(debug: bool = typer.Option(False, "--debug", help="On an internal error, print the "
                                               "full traceback (give it before the command).")):
    OPTIONS["debug"] = debug
    process.tune()


def _register(group: str, commands: dict, on: typer.Typer = app) -> None:
    for name, fn in commands.items():
        on.command(name, rich_help_panel=group)(fn)


_register("Run the benchmark", {
    "run": pipeline.run, "generate": pipeline.generate, "judge": pipeline.judge, "score-run": pipeline.score_run,
    "report": pipeline.report})
_register("Stages on files", {
    "score": pipeline.score, "agree": pipeline.agree, "compare": pipeline.compare})
_register("Datasets and rubrics", {
    "validate": authoring.validate, "compile": authoring.compile_cmd, "draft": authoring.draft,
    "audit": authoring.audit, "lint": authoring.lint, "export": authoring.export_cmd,
    "import": authoring.import_cmd, "diff": authoring.diff})
_register("On a cluster", {"plan": cluster.plan_cmd, "slurm": cluster.slurm_cmd, "status": cluster.status_cmd})
_register("Judges and people", {
    "jury": verdicts.jury, "sample": calibration.sample, "plan-sample": calibration.plan_sample,
    "view": view.view})

verdicts_app = typer.Typer(no_args_is_help=True, help=verdicts.GROUP_HELP)
app.add_typer(verdicts_app, name="verdicts", rich_help_panel="Judges and people")
_register("Commands", {"export": verdicts.verdicts_export, "import": verdicts.verdicts_import}, on=verdicts_app)

team_app = typer.Typer(no_args_is_help=True, help=team.GROUP_HELP)
app.add_typer(team_app, name="annotators", rich_help_panel="Judges and people")
_register("Commands", {"add": team.add, "link": team.link, "list": team.list_cmd, "revoke": team.revoke,
                      "assign": assign.assign},
          on=team_app)


def main():
    """The `gamut-local` executable (and `python -m gamut_local.cli`). (Tests call `app`.)"""
    app()


if __name__ == "__main__":
    sys.exit(main())
