"""`gamut-local annotators`: the accounts of a run's team of annotators (add, list, revoke), who
sign in to `gamut-local view RUN --team` with the link `add` prints once."""

from __future__ import annotations

from pathlib import Path

import typer

from gamut_local.cli.console import err, out
from gamut_local.cli.errors import user_errors
from gamut_local.cli.options import VIEW_HOST, VIEW_PORT, LinkHost, LinkPort

GROUP_HELP = ("A run's team of annotators: accounts for `gamut-local view RUN --team`, "
              "each signed in with a link that works once.")


def _rebalance(run_dir: Path, joined: str | None = None, left: str | None = None) -> None:
    """Where the run's sample is assigned, hand its ungraded work to the team as it is now:
    the assignment's team plus who joined, less who left (`reporting.team.rebalance`)."""
    from gamut_local.reporting.team import load, rebalance

    old = load(run_dir)
    if old is None:
        return
    team = [a for a in old.annotators if a != left] + ([joined] if joined and joined not in old.annotators else [])
    if not team:
        err.print("no annotator left on the assignment: its ungraded work waits for the next one added")
        return
    rebalance(run_dir, team)
    err.print(f"assignment rebalanced over {', '.join(team)}: only ungraded work moved")


@user_errors
def add(
    run_dir: Path = typer.Argument(..., help="Run directory."),
    name: str = typer.Argument(..., help="Annotator name (lower-case letters, digits, _ -): judge human-NAME."),
    host: LinkHost = VIEW_HOST,
    port: LinkPort = VIEW_PORT,
):
    """Add an annotator and print their sign-in link, once: the token is stored only hashed."""
    from gamut_local.rundir.annotators import add as add_account

    if not run_dir.is_dir():
        from gamut_local.errors import InputError, Problem

        raise InputError([Problem(str(run_dir), None, "", "run directory not found")])
    token = add_account(run_dir, name)
    _rebalance(run_dir, joined=name)
    err.print(f"added annotator {name} (judge human-{name}); give them this link, shown only now "
              "(it signs in once):")
    out.print(_link(host, port, token))


@user_errors
def link(
    run_dir: Path = typer.Argument(..., help="Run directory."),
    name: str = typer.Argument(..., help="Annotator with an active account."),
    host: LinkHost = VIEW_HOST,
    port: LinkPort = VIEW_PORT,
):
    """Print a new sign-in link for an annotator (another browser, a lost cookie): a link signs in
    once; their unused earlier link stops working, their sessions go on."""
    from gamut_local.rundir.annotators import link as new_link

    token = new_link(run_dir, name)
    err.print(f"a new sign-in link for {name}, shown only now (it signs in once):")
    out.print(_link(host, port, token))


def _link(host: str, port: int, token: str) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/signin?token={token}"


@user_errors
def list_cmd(run_dir: Path = typer.Argument(..., help="Run directory.")):
    """Annotators with their created and revoked times (never a token)."""
    from gamut_local.rundir.annotators import list_accounts

    accounts = list_accounts(run_dir)
    if not accounts:
        out.print("no annotators: add one with `gamut-local annotators add RUN NAME`")
    for a in accounts:
        out.print(f"{a.name}\tcreated {a.created}\t" + (f"revoked {a.revoked}" if a.revoked else "active"))


@user_errors
def revoke(
    run_dir: Path = typer.Argument(..., help="Run directory."),
    name: str = typer.Argument(..., help="Annotator to revoke."),
):
    """Revoke an annotator: their link and every session made with it stop working at once
    (their verdicts stay)."""
    from gamut_local.rundir.annotators import revoke as revoke_account

    revoke_account(run_dir, name)
    _rebalance(run_dir, left=name)
    out.print(f"revoked {name}: their link and sessions no longer sign in; their verdicts stay")
