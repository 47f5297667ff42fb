"""Team mode (`gamut-local view RUN --team`): annotators sign in, and every write is theirs.

An annotator opens the link `gamut-local annotators add` (or `annotators link`) printed
(`/signin?token=...`); the token is checked against the run's accounts and used up
(`rundir.annotators.sign_in`: hashes only, compared in constant time), and a session begins: a
random id whose hash the run's accounts file keeps (so a restarted viewer still knows it), sent
as a cookie that is `HttpOnly` (no script reads it), `SameSite=Strict` (no other site's page
sends it) and `Path=/`. Its name is made from the run's identity, so viewers of two runs on one
machine do not overwrite each other's cookies, and an id of another run's team is unknown here.
The link signs in once: opened again (forwarded, from the history) it is refused.

`TeamGuard` answers every request but the sign-in page and the static files: without a valid
session, a page is the sign-in page (401) and an API call a 401 JSON error; with one, the
request carries the annotator's name (`scope["state"]["annotator"]`), which is the only
name writes are made under. Revoking an account ends its sessions at once: the accounts file
is looked at (a `stat`) on every request and read again when it changed.
"""

from __future__ import annotations

import html
import os
import threading
from pathlib import Path

from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from gamut_local.errors import InputError, Problem
from gamut_local.hashing import short_hash
from gamut_local.rundir.annotators import Team, read_team, session_in, sign_in, team_path

OPEN_PATHS = ("/signin", "/static/")
AFTER_SIGNIN = "/sample"


class Sessions:
    """The run's accounts as the file holds them now, and this process's sessions."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir).resolve()
        self._team, self._stamp = Team(None, ()), None
        self._mutex = threading.Lock()
        self.team()  # a damaged accounts file stops the viewer before it serves
        if not self._team.active():
            raise InputError([Problem(str(team_path(self.run_dir)), None, "", "no active annotator: add one with "
                                      f"`gamut-local annotators add {self.run_dir} NAME` (it prints their link)")])

    def team(self) -> Team:
        """The accounts, read again whenever the file changed (size, time or inode)."""
        try:
            st = os.stat(team_path(self.run_dir))
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        except FileNotFoundError:
            stamp = None
        with self._mutex:
            if stamp != self._stamp:
                try:
                    self._team = read_team(self.run_dir) if stamp else Team(None, ())
                except InputError:  # damaged meanwhile: nobody is signed in until it is fixed
                    self._team = Team(None, ())
                self._stamp = stamp
            return self._team

    @property
    def cookie(self) -> str:
        # ascii(): a directory name that is not UTF-8 still hashes.
        return "gamut-team-" + short_hash(ascii(str(self.run_dir)), str(self.team().team_id), chars=16)

    def sign_in(self, token: str) -> tuple[str, str] | None:
        """(session id, annotator) for an unused link's token (used up now), or None."""
        got = sign_in(self.run_dir, token)
        return None if got is None else (got[1], got[0])

    def who(self, sid: str | None) -> str | None:
        """The annotator of a session that is still good: begun on this run's team, its
        account active (the accounts file holds the session's hash)."""
        account = session_in(self.team(), sid) if sid else None
        return None if account is None else account.name

    def annotators(self) -> list[str]:
        return sorted(self.team().active())


def _cookie(scope, name: str) -> str | None:
    for k, v in scope["headers"]:
        if k == b"cookie":
            for part in v.decode("latin-1").split(";"):
                key, _, value = part.strip().partition("=")
                if key == name:
                    return value
    return None


SIGNIN_PAGE = """<!doctype html><html lang="en"><meta charset="utf-8"><title>sign in · gamut-local view</title>
<link rel="stylesheet" href="/static/style.css"><main id="signin"><h1>Sign in</h1><p>{message}</p>
<p>This viewer serves a team of annotators. Open the sign-in link the run's owner gave you
(<code>gamut-local annotators add RUN NAME</code> prints it; <code>annotators link</code> a new one).
A link signs in once.</p></main></html>"""


def signin_page(message: str, status: int) -> HTMLResponse:
    return HTMLResponse(SIGNIN_PAGE.format(message=html.escape(message)), status,
                        headers={"Referrer-Policy": "no-referrer", "Cache-Control": "no-store"})


class TeamGuard:
    """ASGI guard: a request without a good session gets the sign-in page or a 401, never a
    page of the run or a write; with one it carries the annotator's name."""

    def __init__(self, app, sessions: Sessions):
        self.app, self.sessions = app, sessions

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and not scope["path"].startswith(OPEN_PATHS):
            name = self.sessions.who(_cookie(scope, self.sessions.cookie))
            if name is None:
                why = "you are not signed in (or your account was revoked)"
                answer = JSONResponse({"error": f"{why}: open your sign-in link"}, 401) \
                    if scope["path"].startswith("/api/") else signin_page(why.capitalize() + ".", 401)
                await answer(scope, receive, send)
                return
            scope.setdefault("state", {})["annotator"] = name
        await self.app(scope, receive, send)


def signin(request) -> Response:
    """`/signin?token=`: a session for the token's annotator, and on to their queue. A sign-in
    that another site's page started (`Sec-Fetch-Site` cross-site or same-site) is refused: a
    link carrying someone else's token would otherwise sign the visitor in as them, and their
    verdicts would be written under that name. A link pasted or opened from outside the
    browser comes as `none`."""
    if request.headers.get("sec-fetch-site", "").strip().lower() in ("cross-site", "same-site"):
        return signin_page("Open your sign-in link yourself (paste it into the address bar): a sign-in "
                           "started by another site's page is refused.", 403)
    sessions: Sessions = request.app.state.view.team
    got = sessions.sign_in(request.query_params.get("token", ""))
    if got is None:
        return signin_page("This link does not sign anyone in: a link signs in once, and this one was used, "
                           "replaced, revoked or mistyped. Ask the run's owner for a new one "
                           "(`gamut-local annotators link RUN NAME`).", 403)
    sid, _ = got
    response = RedirectResponse(AFTER_SIGNIN, 303, headers={"Referrer-Policy": "no-referrer",
                                                            "Cache-Control": "no-store"})
    response.set_cookie(sessions.cookie, sid, httponly=True, samesite="strict", path="/")
    return response


def body_names_another(body: dict, annotator: str) -> str | None:
    """Why a verdict body that names an annotator or judge other than the signed-in one is
    refused (None where it names none, or this one)."""
    for field, mine in (("annotator", annotator), ("judge", f"human-{annotator}")):
        if body.get(field) is not None and body[field] != mine:
            return (f"refused: you are signed in as {annotator}; verdicts are written only as the signed-in "
                    f"annotator ({field} {body[field]!r} in the request)")
    return None
