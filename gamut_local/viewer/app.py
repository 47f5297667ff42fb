"""The Starlette app: routes, the local-only guard, and `serve` for the command line.

Safe by default: `serve` binds 127.0.0.1 only (another address only in team mode, `--team`,
where each annotator signs in: `viewer.team`); every request whose Host (or Origin, when sent)
is not this machine's loopback name (in team mode on another address, the one name it was
started for) is refused, so a web page elsewhere cannot reach the app through DNS rebinding;
writes need a JSON body (a cross-site form cannot send one without a preflight we never
answer) and, for defence in depth, come from this app's own pages: a write
whose Origin is another (another port on localhost too) or whose `Sec-Fetch-Site` says it
crossed sites is refused. Bodies are read by `viewer.body`, strictly. An unexpected error in a
handler is a one-line 500 and one line on the console, its traceback only with `--debug`.
No request path reaches the file system: images are looked up by
question id in the dataset, figures by name among the run's `figures/*.png`, static files by
name in a fixed list.
"""

from __future__ import annotations

import html
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING
from pathlib import Path
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from gamut_local.errors import InputError, Problem
from gamut_local.rundir.human import check_annotator, human_judge
from gamut_local.viewer.body import BodyError, read_json_body
from gamut_local.viewer.opening import NotOpen, Opening, overview_opening, run_files
from gamut_local.viewer import team_routes
from gamut_local.viewer.team import Sessions, TeamGuard, body_names_another, signin

if TYPE_CHECKING:
    from gamut_local.viewer.index import RunIndex

HERE = Path(__file__).parent
# How long a page that needs the verdicts waits for the background read before it answers
# 503 "still reading" (and reloads itself): a small run is read well within it.
WAIT_S = 20.0
BUSY_RETRY_S = 5  # Retry-After of a verdict refused because another process writes the person's file
LOCAL_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
STATIC = {"app.js": "text/javascript", "style.css": "text/css"}
IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
               ".webp": "image/webp", ".bmp": "image/bmp"}


def _hostname(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):  # [::1]:8765
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _foreign_write(headers: dict[str, str]) -> bool:
    """A write not sent by this app's own pages: Sec-Fetch-Site says it crossed origins
    (`same-site` is another port or subdomain), or Origin is not exactly this Host."""
    if headers.get("sec-fetch-site", "").strip().lower() in ("cross-site", "same-site"):
        return True
    origin = headers.get("origin")
    return origin is not None and origin.strip().lower() != f"http://{headers.get('host', '').strip().lower()}"


class LocalOnly:
    """ASGI guard: refuse requests addressed to any name but this machine's loopback (or, in
    team mode on another address, the one name the viewer was started for), and writes that
    come from another origin."""

    def __init__(self, app, names=LOCAL_NAMES):
        self.app, self.names = app, frozenset(names)
        self.refusal = "refused: this app answers only requests to " + (
            "localhost" if self.names == LOCAL_NAMES else ", ".join(sorted(self.names)))

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            origin = headers.get("origin")
            bad_origin = origin is not None and not (
                origin.startswith("http://") and _hostname(origin[len("http://"):]) in self.names)
            if _hostname(headers.get("host", "")) not in self.names or bad_origin:
                await PlainTextResponse(self.refusal, 403)(
                    scope, receive, send)
                return
            if scope["method"] not in SAFE_METHODS and _foreign_write(headers):
                await JSONResponse({"error": "refused: writes come only from this app's own pages"}, 403)(
                    scope, receive, send)
                return
        await self.app(scope, receive, send)


class NoTraceback:
    """ASGI guard: an exception in a handler (a bug: bad input is answered before) becomes a
    500 with one line of JSON and one line on the console; `debug` lets it through, with its
    traceback, as Starlette and uvicorn print it."""

    def __init__(self, app, debug: bool = False):
        self.app, self.debug = app, debug

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or self.debug:
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking)
        except Exception as e:  # noqa: BLE001 - the point: no traceback reaches the console
            print(f"internal error on {scope.get('method')} {scope.get('path')}: {type(e).__name__}: {e} "
                  "(run `gamut-local --debug view ...` for the traceback)", file=sys.stderr)
            if not started:
                await JSONResponse({"error": f"internal error: {type(e).__name__}"}, 500)(scope, receive, send)


def _templates():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(HERE / "templates")),
                             autoescape=jinja2.select_autoescape(["html"]), trim_blocks=True, lstrip_blocks=True)
    env.filters["pct"] = lambda x: "—" if x is None else f"{100 * x:.1f}%"
    env.filters["num"] = lambda x, d=1: "—" if x is None else f"{x:.{d}f}"
    return env


def _flag(request: Request, name: str, default: bool = False) -> bool:
    v = request.query_params.get(name)
    return default if v is None else v not in ("", "0", "false", "off")


def _int(request: Request, name: str, default: int = 0) -> int:
    try:
        return max(int(request.query_params.get(name, default)), 0)
    except ValueError:
        return default


@dataclass
class View:
    """What every handler needs: the opened run, who annotates, and the templates."""

    opening: Opening
    annotator: str | None
    judge: str | None
    writable: bool
    read_only: bool
    env: object
    wait_s: float = WAIT_S
    team: Sessions | None = None  # team mode: who writes is the request's signed-in annotator

    @property
    def index(self) -> RunIndex:
        """The opened run (waits while it is being read, at most `wait_s`; then NotOpen)."""
        return self.opening.result(self.wait_s)

    def who(self, request: Request) -> tuple[str | None, str | None, bool]:
        """(annotator, their judge, whether this request may write): the viewer's annotator,
        or in team mode the one signed in (`viewer.team.TeamGuard` put the name there)."""
        if self.team is None:
            return self.annotator, self.judge, self.writable
        name = request.scope.get("state", {}).get("annotator")
        return name, (human_judge(name) if name else None), bool(name) and not self.read_only

    def render(self, name: str, request: Request, **ctx) -> HTMLResponse:
        annotator, judge, writable = self.who(request)
        base = {"run": self.opening.run_dir.name, "annotator": annotator, "judge": judge,
                "writable": writable, "read_only": self.read_only, "team": self.team is not None}
        return HTMLResponse(self.env.get_template(name).render(**base, **ctx))


def not_open(request: Request, e: NotOpen) -> Response:
    """503 for a page that needs the run before it can be given: still being read (with
    Retry-After, and a page that reloads itself), or refused (the problems, one per line)."""
    headers = {"Retry-After": str(e.retry_s)} if e.retry_s else {}
    if _api(request):
        return JSONResponse({"error": e.message}, 503, headers=headers)
    if e.retry_s:
        page = (f'<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="{e.retry_s}">'
                f"<title>reading the run</title><p>{html.escape(e.message)}</p>")
        return HTMLResponse(page, 503, headers=headers)
    return PlainTextResponse("\n".join(e.lines) + "\n", 503)


def _view(request: Request) -> View:
    return request.app.state.view


def _pages():
    # The pages (numpy, the index) are imported after the server starts: `view` answers its
    # first page meanwhile (`opening.overview_opening`), and the run is read in the background.
    from gamut_local.viewer import pages

    return pages


def _api(request: Request) -> bool:
    return request.url.path.startswith("/api/")


def overview(request):
    v = _view(request)
    # While the run is being read, the overview is what needs no verdicts: the first page at once.
    data = _pages().overview(v.index) if v.opening.done.is_set() else overview_opening(v.opening.run_dir)
    if not data["opening"]:  # the people's agreement on a team's overlap, beside the corrected scores
        from gamut_local.viewer.team_pages import live_agreement

        data["team_agreement"] = live_agreement(v.index)
    return JSONResponse(data) if _api(request) else v.render("overview.html", request, o=data)


def questions(request):
    v, p = _view(request), request.query_params
    filters = {"domain": p.get("domain") or None, "model": p.get("model") or None,
               "variant": p.get("variant") or None, "disagree": _flag(request, "disagree"),
               "invalid": _flag(request, "invalid"), "unannotated": _flag(request, "unannotated"),
               "sort": p.get("sort", "disagreement"), "offset": _int(request, "offset")}
    data = _pages().questions_list(v.index, judge=v.who(request)[1], **filters)
    if _api(request):
        return JSONResponse(data)
    kept = {k: x for k, x in p.items() if k != "offset" and x}
    following = urlencode({**kept, "offset": filters["offset"] + _pages().PAGE_SIZE})
    return v.render("questions.html", request, d=data, f=filters, next_page=f"/questions?{following}")


def question(request):
    v, qid = _view(request), request.path_params["qid"]
    if qid not in v.index.questions:
        return PlainTextResponse("no such question in this run's dataset", 404)
    data = _pages().question_page(v.index, qid, v.who(request)[1])
    return JSONResponse(data) if _api(request) else v.render("question.html", request, q=data)


def queue(request):
    v = _view(request)
    only = "all" if request.query_params.get("only") == "all" else "disagree"
    pos = _int(request, "pos") if "pos" in request.query_params else None
    data = _pages().queue_page(v.index, pos, only=only, question=request.query_params.get("q"),
                            judge=v.who(request)[1], blind=_flag(request, "blind", True))
    return JSONResponse(data) if _api(request) else v.render("queue.html", request, c=data)


def sample(request):
    v = _view(request)
    if v.team is not None:
        return team_routes.sample(request)
    names = sorted(v.index.samples)
    name = request.query_params.get("name") or (names[0] if len(names) == 1 else None)
    if name is not None and name not in v.index.samples:
        return PlainTextResponse("no such calibration sample in this run", 404)
    pos = _int(request, "pos") if "pos" in request.query_params else None
    data = {"samples": names, "cell": None, "sample": None} if name is None else \
        _pages().sample_page(v.index, name, pos, v.who(request)[1])
    return JSONResponse(data) if _api(request) else v.render("queue.html", request, c=data, samples=names)


async def post_verdict(request):
    v = _view(request)
    annotator, _, writable = v.who(request)
    if not writable:
        why = "read-only" if v.read_only else "no --annotator given"
        return JSONResponse({"error": f"this viewer writes nothing ({why})"}, 403)
    from gamut_local.viewer.adjudicate import TEAM_FIELDS, VERDICT_FIELDS, Busy, record_verdict

    try:
        body = await read_json_body(request, VERDICT_FIELDS if v.team is None else TEAM_FIELDS)
        if v.team is not None:  # a body naming someone else is refused, never believed
            if (why := body_names_another(body, annotator)) is not None:
                return JSONResponse({"error": why}, 403)
            body = {k: body[k] for k in VERDICT_FIELDS}
        # In a worker thread: a write waiting for the person's file lets pages be served.
        rec = await run_in_threadpool(record_verdict, v.index, annotator, body)
    except BodyError as e:
        return JSONResponse({"error": e.reason}, e.status)
    except Busy as e:
        return JSONResponse({"error": str(e)}, 503, headers={"Retry-After": str(BUSY_RETRY_S)})
    except InputError as e:
        return JSONResponse({"error": "; ".join(str(p) for p in e.problems)}, 400)
    except LookupError as e:
        return JSONResponse({"error": str(e)}, 404)
    return JSONResponse({"record": rec})


def image(request):
    from gamut_local.data.records import resolve_image

    index = _view(request).index
    q = index.questions.get(request.path_params["qid"])
    if q is None or not q.image:
        return Response(status_code=404)
    try:
        path = resolve_image(q.image, index.dataset)
    except (FileNotFoundError, ValueError):
        return Response(status_code=404)
    kind = IMAGE_TYPES.get(path.suffix.lower())
    if kind is None or not path.is_file():
        return Response(status_code=404)
    return FileResponse(path, media_type=kind)


def figure(request):
    run_dir = _view(request).opening.run_dir
    found = {p.name: p for p in (run_dir / "figures").glob("*.png")}
    path = found.get(request.path_params["name"])
    if path is None or not path.resolve().is_relative_to(run_dir):
        return Response(status_code=404)
    return FileResponse(path, media_type="image/png")


def static(request):
    name = request.path_params["name"]
    if name not in STATIC:
        return Response(status_code=404)
    return FileResponse(HERE / "static" / name, media_type=STATIC[name])


ROUTES = [Route("/", overview), Route("/api/overview", overview),
          Route("/questions", questions), Route("/api/questions", questions),
          Route("/question/{qid}", question), Route("/api/question/{qid}", question),
          Route("/queue", queue), Route("/api/queue", queue),
          Route("/sample", sample), Route("/api/sample", sample),
          Route("/api/verdicts", post_verdict, methods=["POST"]),
          Route("/signin", signin),
          Route("/image/{qid}", image), Route("/figure/{name}", figure), Route("/static/{name}", static)]


def create_app(index: RunIndex | Opening, *, annotator: str | None = None, read_only: bool = False,
               debug: bool = False, wait_s: float = WAIT_S, team: bool = False,
               host: str = "127.0.0.1") -> Starlette:
    """The app over an opened run (or one being opened: `opening.Opening`). Without an annotator
    (or with read_only) nothing is written. `team`: annotators sign in (`viewer.team`) and each
    writes as themselves; `host`: the name requests must be addressed to, beyond loopback
    (team mode only). `debug`: an internal error shows its traceback (`gamut-local --debug view`)."""
    check_host(host, team, annotator)
    judge = human_judge(check_annotator(annotator)) if annotator is not None else None
    env = _templates()
    for name in ("overview.html", "questions.html", "question.html", "queue.html", "team.html"):
        env.get_template(name)  # compiled now, not on a user's first request
    opening = index if isinstance(index, Opening) else Opening.of(index)
    sessions = Sessions(opening.run_dir) if team else None
    names = LOCAL_NAMES if _hostname(host) in LOCAL_NAMES else {_hostname(host)}
    guards = [Middleware(LocalOnly, names=names), Middleware(NoTraceback, debug=debug)]
    if sessions is not None:
        guards.append(Middleware(TeamGuard, sessions=sessions))
    app = Starlette(routes=ROUTES + (team_routes.TEAM_ROUTES if team else []), middleware=guards, exception_handlers={NotOpen: not_open},
                    debug=debug)
    app.state.view = View(opening, annotator, judge, judge is not None and not read_only, read_only, env, wait_s,
                          sessions)
    return app


def check_host(host: str, team: bool, annotator: str | None = None) -> None:
    """Beyond loopback only in team mode, and only a name people address (not a wildcard);
    team mode signs each annotator in, so it takes no --annotator."""
    if team and annotator is not None:
        raise InputError([Problem("--annotator", None, "", "--team signs each annotator in: leave --annotator out")])
    name = _hostname(host)
    if name in LOCAL_NAMES:
        return
    if not team:
        raise InputError([Problem("--host", None, "", f"{host!r} is beyond this machine: serving others "
                                  "needs --team (each annotator signs in)")])
    if name in ("0.0.0.0", "::", ""):
        raise InputError([Problem("--host", None, "", f"{host!r} is every address: give the address or name "
                                  "annotators will open (requests to any other name are refused)")])


def serve(run_dir: Path, *, port: int = 8765, annotator: str | None = None, read_only: bool = False,
          dataset: Path | None = None, echo=print, debug: bool = False, team: bool = False,
          host: str = "127.0.0.1") -> None:
    """Find the run's files (a bad run stops here), serve on 127.0.0.1 at once while the run is
    read in the background, and until interrupted. A run that cannot be read stops the server
    and raises its problems, as a bad run found at first does."""
    import uvicorn

    if annotator is not None:
        check_annotator(annotator)
    check_host(host, team, annotator)
    found = run_files(run_dir, dataset)
    if team:
        Sessions(found.run_dir)  # no account (or a damaged file) stops here, before the run is read
    server = None

    def opened(opening: Opening) -> None:
        if opening.error is not None:
            if server is not None:
                server.should_exit = True
            return
        cells = opening.index.cells
        echo(f"{len(cells.key):,} (response, check) cells, {int(cells.disagree.sum()):,} with judges disagreeing")

    def read(found):  # numpy, the dataset and the store are imported here, in the background
        from gamut_local.viewer.index import read_run

        return read_run(found)

    opening = Opening(found, read, on_done=opened)
    app = create_app(opening, annotator=annotator, read_only=read_only, debug=debug, team=team, host=host)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
    if opening.error is not None:  # failed before the server existed
        raise opening.error
    mode = "read-only" if read_only or (annotator is None and not team) else \
        f"annotating as human-{annotator}" if not team else \
        f"team of {len(app.state.view.team.annotators())}: each signs in with their link"
    shown = f"[{host}]" if ":" in host else host
    echo(f"http://{shown}:{port}/ ({mode}; reading the run's verdicts)")
    server.run()
    if opening.done.is_set() and opening.error is not None:
        raise opening.error
