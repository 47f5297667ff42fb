"""Team mode's routes: the calibration sample's queue as the signed-in annotator's part of it,
the team page (progress of each annotator and of the team, the cells to adjudicate), and the
adjudication queue, which writes ordinary human verdicts in the sample's queue.
"""

from __future__ import annotations

from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from gamut_local.rundir.human import human_judge


def _sample_name(request, index):
    names = sorted(index.samples)
    name = request.query_params.get("name") or (names[0] if len(names) == 1 else None)
    return names, name


def _pos(request):
    try:
        return max(int(request.query_params["pos"]), 0) if "pos" in request.query_params else None
    except ValueError:
        return None


def sample(request):
    """`/sample` in team mode: the signed-in annotator's assigned responses only."""
    from gamut_local.viewer.team_pages import team_sample_page

    v = request.app.state.view
    index, api = v.index, request.url.path.startswith("/api/")
    names, name = _sample_name(request, index)
    if name is not None and name not in index.samples:
        return PlainTextResponse("no such calibration sample in this run", 404)
    annotator = v.who(request)[0]
    data = {"samples": names, "cell": None, "sample": None} if name is None else \
        team_sample_page(index, name, _pos(request), annotator)
    return JSONResponse(data) if api else v.render("queue.html", request, c=data, samples=names)


def team(request):
    """Progress per annotator and for the team, and what this annotator may adjudicate."""
    from gamut_local.viewer.team_pages import disputes, team_progress

    v = request.app.state.view
    index = v.index
    names, name = _sample_name(request, index)
    if name is not None and name not in index.samples:
        return PlainTextResponse("no such calibration sample in this run", 404)
    annotator = v.who(request)[0]
    data = {"samples": names, "sample": name, "annotator": annotator, "progress": None, "disputes": []}
    if name in index.samples:
        data["progress"] = team_progress(index, name, v.team.annotators())
        data["disputes"] = disputes(index, name, annotator)
    if request.url.path.startswith("/api/"):
        return JSONResponse(data)
    return v.render("team.html", request, t=data)


def adjudicate(request):
    """One disputed cell of the overlap, its two labels shown, graded by a third person in the
    sample's queue (the verdict carries the sample's id, as any made there)."""
    import numpy as np

    from gamut_local.viewer.pages import _cell_page
    from gamut_local.viewer.team_pages import disputes

    v = request.app.state.view
    index = v.index
    names, name = _sample_name(request, index)
    if name not in index.samples:
        return PlainTextResponse("no such calibration sample in this run", 404)
    annotator = v.who(request)[0]
    found = disputes(index, name, annotator)
    cells = np.array([index.cell_of(d["question_id"], d["model"], d["variant"], d["check_id"]) for d in found],
                     dtype=np.int64)
    info = {"name": name, "sample_id": index.samples[name].sample_id, "adjudication": True,
            "responses": len(found), "responses_done": 0, "missing": 0, "response": None}
    page = _cell_page(index, cells, _pos(request), np.zeros(0, np.int64), human_judge(annotator), True,
                      {"only": "adjudicate", "question_filter": "", "sample": info})
    page["people"] = found[page["pos"]]["labels"] if page["cell"] is not None else {}
    if request.url.path.startswith("/api/"):
        return JSONResponse(page)
    return v.render("queue.html", request, c=page, samples=names)


TEAM_ROUTES = [Route("/team", team), Route("/api/team", team),
               Route("/adjudicate", adjudicate), Route("/api/adjudicate", adjudicate)]
