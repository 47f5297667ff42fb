"""What team mode shows beside the ordinary pages: each annotator's part of the calibration
sample (`rundir.assignments`: only the responses assigned to them, in the design's order),
the progress of each annotator and of the team, and the cells of the overlap where two
people disagree, for a third person to adjudicate.

An adjudication is an ordinary human verdict, made in the sample's queue (it carries the
sample's id) by an annotator assigned neither of the disagreeing verdicts' response; the
correction's rule for several people reads it as such. Without an assignment file every
signed-in annotator walks the whole sample, as in single-annotator mode.

Who has graded what is `pages.graded`'s: the correction's rule, kept up to date per person.
"""

from __future__ import annotations

import os

import numpy as np

from gamut_local.rundir.human import human_judge, is_human
from gamut_local.viewer.index import RunIndex
from gamut_local.viewer.pages import Response, _cell_page, cells_of, graded



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


def _assigned(index: RunIndex, a, annotator: str, name: str):
    """(mask over the sample's responses, their set) of those assigned to the annotator."""
    key = ("assigned", annotator, name)
    got = index.computed.get(key)
    if got is None or got[0] is not a:
        responses = cells_of(index, name)[3]
        mask = np.array([annotator in a.responses.get(r, ()) for r in responses], dtype=bool)
        got = index.computed[key] = (a, mask, {r for r, m in zip(responses, mask) if m})
    return got[1], got[2]


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
    mine, assigned = _assigned(index, a, annotator, name)
    keep = mine[number] if len(number) else np.zeros(0, dtype=bool)
    sub, sub_number = order[keep], number[keep]
    if pos is None:
        todo = queue(a, annotator, full)
        if ("response_number", name) not in index.computed:
            index.computed[("response_number", name)] = {r: k for k, r in enumerate(responses)}
        first = index.computed[("response_number", name)]
        nums = [first[r] for r in todo if r in first and present[first[r]]]
        at = np.flatnonzero(np.isin(sub_number, nums[:1]) & ~np.isin(sub, done))
        pos = int(at[0]) if len(at) else 0
    info = {"name": name, "sample_id": a.sample_id, "per": index.samples[name].per,
            "responses": int(mine.sum()), "responses_done": len(full & assigned),
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
    queue), not yet adjudicated, that `annotator` may adjudicate: they graded neither verdict
    and are not assigned the response. With an assignment, the correction's rule
    (`analysis.correction.team_rule`): the response's assignees disagree and nobody else has
    graded the cell; without one, two people's verdicts differ and there is no third."""
    design = index.samples[name]
    a = assignments_of(index)
    if a is not None and a.sample_id != design.sample_id:
        a = None
    by_cell: dict[tuple, dict] = {}
    for judge, cells in list(index.humans.items()):
        if not is_human(judge):
            continue
        for key, r in cells.items():
            if r.get("sample_id") == design.sample_id and not index.is_stale(r):
                by_cell.setdefault(key, {})[judge[len("human-"):]] = r["verdict"]
    out = []
    for (qid, model, variant, check_id), got in sorted(by_cell.items()):
        who = a.responses.get((model, variant, qid), ()) if a is not None else tuple(got)
        if annotator in who or annotator in got or len(who) != 2 or set(got) != set(who):
            continue
        if len(set(got.values())) < 2:
            continue
        out.append({"question_id": qid, "model": model, "variant": variant, "check_id": check_id,
                    "labels": dict(sorted(got.items()))})
    return out


def _overlap_judges(index: RunIndex, pairs: dict) -> dict[str, dict]:
    """{model judge: {(model, variant, question, check): verdict code}} on the overlap's cells."""
    v, c = index.verdicts, index.cells
    out: dict[str, dict] = {j: {} for j in v.judges}
    for (model, variant, qid) in pairs:
        qi, si = index.q_index.get(qid), index.s_index.get((model, variant))
        if qi is None or si is None:
            continue
        base = (qi * max(len(v.systems), 1) + si) * max(len(v.checks), 1)
        lo, hi = (int(x) for x in np.searchsorted(c.key, [base, base + max(len(v.checks), 1)]))
        for cell in range(lo, hi):
            for row in range(int(c.start[cell]), int(c.start[cell + 1])):
                out[v.judges[v.j[row]]][(model, variant, qid, v.checks[c.c[cell]])] = int(v.code[row])
    return out


def live_agreement(index: RunIndex) -> dict | None:
    """The agreement between people on the assignment's overlap, from the verdicts the viewer
    holds (`analysis.human_agreement`: Krippendorff's alpha, Cohen's kappa per pair), beside
    each model judge's mean kappa against the same people on the same cells; `warning` where
    the people agree with each other less than a judge agrees with them (then the "truth" the
    correction uses is the noisier party). None without an assignment of one of the run's
    samples. Computed again only after a verdict is written."""
    a = assignments_of(index)
    name = next((n for n, d in index.samples.items() if a is not None and d.sample_id == a.sample_id), None)
    if name is None:
        return None
    got = index.computed.get("live_agreement")
    if got is not None and got[0] == (index.humans_version, id(a)):
        return got[1]
    from gamut_local.analysis import human_agreement

    pairs = {r: who for r, who in a.responses.items() if len(who) > 1}
    records = [r for j, cells in list(index.humans.items()) if is_human(j)
               for r in cells.values() if not index.is_stale(r)]
    graded_by = _graded_by(index, name)
    judges = _overlap_judges(index, pairs)
    out = human_agreement.overlap_agreement(a, records, a.sample_id, graded_by, judges)
    out = {"sample": name, **out}
    k, above = out["people_kappa"], out["noisier_truth"]
    out["warning"] = None if not above else (
        f"the people agree with each other (mean Cohen's kappa {k:.3f}) less than {', '.join(above)} agrees "
        "with them: the human labels the correction takes as the truth are the noisier party")
    index.computed["live_agreement"] = ((index.humans_version, id(a)), out)
    return out
