"""What team mode shows beside the ordinary pages: each annotator's part of the calibration
sample (`rundir.assignments`: only the responses assigned to them, in the design's order),
the progress of each annotator and of the team, and the cells of the overlap where two
people disagree, for a third person to adjudicate.

An adjudication is an ordinary human verdict, made in the sample's queue (it carries the
sample's id) by an annotator assigned neither of the disagreeing verdicts' response; the
correction's rule for several people reads it as such. Without an assignment file every
signed-in annotator walks the whole sample, as in single-annotator mode.

Per-annotator results are kept until that annotator's verdicts change: a verdict replaces
its judge's dict (`adjudicate._replace`), so the dict's identity says whether they did.
"""

from __future__ import annotations

import os

import numpy as np

from gamut_local.rundir.human import human_judge, is_human
from gamut_local.viewer.index import RunIndex
from gamut_local.viewer.pages import _cell_page, sample_cells

Response = tuple[str, str, str]  # (model, variant, question_id), as the assignment names them


def cells_of(index: RunIndex, name: str):
    """`pages.sample_cells` of a sample, computed once (the design and the cells stay), with
    the drawn responses in design order, which have cells, and the response of each cell."""
    key = ("sample_cells", name)
    if key not in index.computed:
        design = index.samples[name]
        order, number, missing = sample_cells(index, design)
        ranked = sorted(design.responses, key=lambda r: r.order)
        responses = [(r.model, r.variant, r.question_id) for r in ranked]
        present = np.bincount(number, minlength=len(responses)) > 0
        index.computed[key] = (order, number, missing, responses, present)
        response_of = np.full(len(index.cells.key), -1, dtype=np.int64)
        response_of[order] = number
        index.computed[("sample_response_of", name)] = (response_of, np.bincount(number, minlength=len(responses)))
    return index.computed[key]


def assignments_of(index: RunIndex):
    """The run's assignment (None without one), read again when its file changes."""
    try:
        from gamut_local.rundir import assignments
    except ImportError:  # assignments are not part of this build
        return None
    path = assignments.path_of(index.run_dir)
    try:
        st = os.stat(path)
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
    except FileNotFoundError:
        return None
    got = index.computed.get("assignments")
    if got is None or got[0] != stamp:
        got = index.computed["assignments"] = (stamp, assignments.load(index.run_dir))
    return got[1]


def graded(index: RunIndex, judge: str, name: str) -> tuple[np.ndarray, set[Response]]:
    """(cells this judge graded for the sample, responses they graded in full): the rule of
    `pages.sample_done`, kept up to date from the records that changed since it was last
    asked (a write replaces the judge's dict; the old one is the state then)."""
    mine = index.humans.get(judge, {})
    _, _, _, responses, present = cells_of(index, name)
    response_of, need = index.computed[("sample_response_of", name)]
    sample_id = index.samples[name].sample_id
    key = ("graded", judge, name)
    state = index.computed.get(key)
    if state is not None and state[0] is mine:
        return state[1]
    seen, done, have = (state[2], set(state[3]), state[4].copy()) if state is not None else ({}, set(), np.zeros_like(need))
    for k, r in mine.items():
        if seen.get(k) is r:
            continue
        cell = index.cell_of(*k)
        if cell is None or response_of[cell] < 0:
            continue
        ok = r.get("sample_id") == sample_id and not index.is_stale(r)
        if ok and cell not in done:
            done.add(cell)
            have[response_of[cell]] += 1
        elif not ok and cell in done:
            done.discard(cell)
            have[response_of[cell]] -= 1
    full = {responses[k] for k in np.flatnonzero(present & (have == need)).tolist()}
    result = (np.array(sorted(done), dtype=np.int64), full)
    index.computed[key] = (mine, result, mine, done, have)
    return result


def _graded_by(index: RunIndex, name: str) -> dict[str, set[Response]]:
    return {j[len("human-"):]: graded(index, j, name)[1] for j in list(index.humans) if is_human(j)}


def team_sample_page(index: RunIndex, name: str, pos: int | None, annotator: str) -> dict:
    """The annotator's part of the sample's queue: their assigned responses only (all of the
    sample without an assignment), starting at the first of `assignments.queue`."""
    from gamut_local.viewer.pages import sample_page

    a = assignments_of(index)
    if a is None or a.sample_id != index.samples[name].sample_id:
        return sample_page(index, name, pos, human_judge(annotator))
    from gamut_local.analysis.assignment import queue

    order, number, missing, responses, present = cells_of(index, name)
    done, full = graded(index, human_judge(annotator), name)
    mine = np.array([annotator in a.responses.get(r, ()) for r in responses], dtype=bool)
    keep = mine[number] if len(number) else np.zeros(0, dtype=bool)
    sub, sub_number = order[keep], number[keep]
    if pos is None:
        todo = queue(a, annotator, full)
        first = {r: k for k, r in enumerate(responses)}
        nums = [first[r] for r in todo if r in first and present[first[r]]]
        at = np.flatnonzero(np.isin(sub_number, nums[:1]) & ~np.isin(sub, done))
        pos = int(at[0]) if len(at) else 0
    info = {"name": name, "sample_id": a.sample_id, "per": index.samples[name].per,
            "responses": int(mine.sum()), "responses_done": len(full & {r for r, m in zip(responses, mine) if m}),
            "missing": missing, "response": None, "assigned": True}
    page = _cell_page(index, sub, pos, done, human_judge(annotator), True,
                      {"only": "sample", "question_filter": "", "sample": info})
    if page["cell"] is not None:
        k = int(sub_number[page["pos"]])
        same = np.flatnonzero(sub_number == k)
        info.update(response=int(np.searchsorted(np.unique(sub_number), k)) + 1,
                    check=int(page["pos"] - same[0]) + 1, checks=len(same),
                    inclusion_probability=None)
    return page


def team_progress(index: RunIndex, name: str, annotators: list[str]) -> dict:
    """Per annotator and for the team: assigned and graded responses (`assignments.progress`),
    or without an assignment, responses each graded in full."""
    graded_by = _graded_by(index, name)
    a = assignments_of(index)
    if a is None or a.sample_id != index.samples[name].sample_id:
        per = {n: {"assigned": None, "graded": len(graded_by.get(n, ()))} for n in annotators}
        labeled = set().union(*graded_by.values()) if graded_by else set()
        return {"assigned": False, "annotators": per,
                "team": {"responses": len(index.samples[name].responses), "labeled": len(labeled)}}
    from gamut_local.analysis.assignment import progress

    out = progress(a, graded_by)
    return {"assigned": True, **out}


def disputes(index: RunIndex, name: str, annotator: str) -> list[dict]:
    """Cells of the sample that two people graded differently (current verdicts made in its
    queue), that `annotator` has not graded and whose response is not assigned to them:
    what they may adjudicate. A cell with a third verdict is settled and left out."""
    design = index.samples[name]
    a = assignments_of(index)
    by_cell: dict[tuple, list] = {}
    for judge, cells in list(index.humans.items()):
        if not is_human(judge):
            continue
        for key, r in cells.items():
            if r.get("sample_id") == design.sample_id and not index.is_stale(r):
                by_cell.setdefault(key, []).append((judge[len("human-"):], r["verdict"]))
    out = []
    for (qid, model, variant, check_id), got in sorted(by_cell.items()):
        names = {n for n, _ in got}
        if len(got) != 2 or len({v for _, v in got}) < 2 or annotator in names:
            continue
        if a is not None and annotator in a.responses.get((model, variant, qid), ()):
            continue
        out.append({"question_id": qid, "model": model, "variant": variant, "check_id": check_id,
                    "labels": dict(sorted(got))})
    return out
