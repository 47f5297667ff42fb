"""What each page shows, as plain dicts (the templates only lay them out; the JSON API returns
the same dicts). Numbers on the overview come from the run's scores file as written."""

from __future__ import annotations

import html
import re

import numpy as np

from gamut_local.analysis.correction import graded_in_full
from gamut_local.analysis.design import probability_of
from gamut_local.viewer.adjudicate import annotated_cells
from gamut_local.viewer.correction import live_boards
from gamut_local.viewer.index import RunIndex
from gamut_local.viewer.opening import leaderboard
from gamut_local.vocab import JUDGE_LABELS, TIERS, VERDICTS

PAGE_SIZE = 200
Response = tuple[str, str, str]  # (model, variant, question_id), as the assignment names them
# Words of the compiler's check templates: never worth highlighting in a response.
_TEMPLATE_WORDS = frozenset("""the response states following about mentions one covers least possibilities for describing
includes this step presents these steps order identifies explains how they relate with respect
relating addresses conveys overall insight required elements valid options process that which
from into their there than then have been were also only other""".split())


def overview(index: RunIndex) -> dict:
    """Leaderboard per judge (the scores file's numbers and CIs), verdict rates, run counts."""
    v, c = index.verdicts, index.cells
    return {
        "run": index.run_dir.name, "opening": False, "n_questions": len(index.questions),
        "n_answers": len(index.answers),
        "n_verdicts": {j: int(n) for j, n in zip(v.judges, np.bincount(v.j, minlength=len(v.judges)))},
        "n_cells": len(c.key), "n_disagree": int(c.disagree.sum()), "n_invalid": int(c.invalid.sum()),
        "humans": {j: len(r) for j, r in index.humans.items()},
        "humans_stale": {j: n for j, r in index.humans.items() if (n := sum(index.is_stale(x) for x in r.values()))},
        "leaderboard": leaderboard(index.scores), "labels": list(VERDICTS),
        "coverage_from": (index.scores or {}).get("coverage_from"),
        "figures": sorted(p.name for p in (index.run_dir / "figures").glob("*.png")),
        "notes": index.notes, "human_agreement": human_agreement(index),
        "corrected": live_boards(index),
    }


def human_agreement(index: RunIndex) -> dict | None:
    """Each model judge against the humans' verdicts so far (`analysis.calibration`, gold =
    the human-* majority), from the cells humans annotated; None before the first."""
    from gamut_local.analysis.calibration import calibrate

    # A stale human verdict (made on another check wording or answer) is not gold.
    records = [r for cells in index.humans.values() for r in cells.values() if not index.is_stale(r)]
    if not records:
        return None
    v, c = index.verdicts, index.cells
    for cell in {index.cell_of(r["question_id"], r["model"], r["variant"], r["check_id"]) for r in records} - {None}:
        qid, model, variant, check_id = index.cell_names(cell)
        for row in range(int(c.start[cell]), int(c.start[cell + 1])):
            records.append({"question_id": qid, "model": model, "variant": variant, "check_id": check_id,
                            "judge": v.judges[v.j[row]], "tier": TIERS[int(v.tier[row])],
                            "verdict": VERDICTS[int(v.code[row])], "probs": _probs(v.probs[row])})
    return calibrate(records, gold="human-*", judges=list(v.judges))


def _system_mask(index: RunIndex, model: str | None, variant: str | None) -> np.ndarray:
    keep = np.array([(not model or m == model) and (not variant or va == variant)
                     for m, va in index.verdicts.systems], dtype=bool)
    return keep[index.cells.s] if len(keep) else np.zeros(len(index.cells.key), dtype=bool)


def questions_list(index: RunIndex, *, domain=None, model=None, variant=None, disagree=False,
                   invalid=False, unannotated=False, judge=None, sort="disagreement", offset=0) -> dict:
    """One row per question with its cell counts under the filters."""
    c, Q = index.cells, len(index.question_ids)
    mask = _system_mask(index, model, variant)
    mine = np.zeros(len(c.key), dtype=bool)
    if judge:
        mine[annotated_cells(index, judge)] = True
    counts = {name: np.bincount(c.q[mask & flag], minlength=Q) for name, flag in
              (("cells", np.ones_like(mask)), ("disagree", c.disagree), ("invalid", c.invalid),
               ("annotated", mine))}
    rows = []
    for qi, qid in enumerate(index.question_ids):
        q = index.questions.get(qid)
        row = {"question_id": qid, "domain": q.domain if q else "(not in dataset)",
               "question": q.question if q else "", **{k: int(v[qi]) for k, v in counts.items()}}
        if ((domain and row["domain"] != domain) or (disagree and not row["disagree"])
                or (invalid and not row["invalid"]) or (unannotated and row["annotated"] >= row["cells"])
                or not row["cells"] and (model or variant)):
            continue
        rows.append(row)
    if sort == "disagreement":
        rows.sort(key=lambda r: (-r["disagree"], -r["invalid"], r["question_id"]))
    total = len(rows)
    return {"rows": rows[offset: offset + PAGE_SIZE], "total": total, "offset": offset, "page_size": PAGE_SIZE,
            "domains": sorted({q.domain for q in index.questions.values()}),
            "models": sorted({m for m, _ in index.verdicts.systems}),
            "variants": sorted({va for _, va in index.verdicts.systems})}


def _probs(row: np.ndarray) -> dict | None:
    return None if np.isnan(row).all() else {lab: float(p) for lab, p in zip(JUDGE_LABELS, row)}


def rubric_tree(index: RunIndex, qid: str) -> dict:
    """Items by tier with their type's fields, the checks each compiled into, and evidence."""
    q = index.questions[qid]
    checks = [ch.model_dump() for ch in index.checks(qid)]
    if q.meta_rubric is None:
        return {"tiers": [], "given_checks": checks, "snippets": {}}
    snippets = {s.id: s.model_dump() for s in q.meta_rubric.snippets}
    tiers = []
    for tier in TIERS:
        items = []
        for item in q.meta_rubric.items:
            if item.tier != tier:
                continue
            d = item.model_dump()
            d["checks"] = [ch for ch in checks if ch["source_item"] == item.id]
            items.append(d)
        tiers.append({"tier": tier, "items": items})
    return {"tiers": tiers, "given_checks": [], "snippets": snippets}


def question_page(index: RunIndex, qid: str, annotator_judge: str | None = None) -> dict:
    """The question, its rubric tree, every response and every judge's verdict per check."""
    q = index.questions[qid]
    v, rows = index.verdicts, index.question_rows(qid)
    checks = index.checks(qid)
    grid: dict[tuple[int, int], list] = {}
    for s, c, j, code, p in zip(v.s[rows].tolist(), v.c[rows].tolist(), v.j[rows].tolist(),
                                v.code[rows].tolist(), v.probs[rows]):
        probs = _probs(p)
        grid.setdefault((s, c), []).append({
            "judge": v.judges[j], "judge_index": j, "verdict": VERDICTS[code], "probs": probs,
            "probs_text": " ".join(f"{x:.2f}" for x in probs.values()) if probs else ""})
    answered = index.answered(qid)
    systems = sorted({s for s, _ in grid} | {index.s_index[a] for a in answered if a in index.s_index})
    extra = sorted(a for a in answered if a not in index.s_index)
    responses = []
    for name in [v.systems[s] for s in systems] + extra:
        s = index.s_index.get(name)
        per_check = []
        for ch in checks:
            ci = index.c_index.get(ch.check_id)
            verdicts = grid.get((s, ci), []) if s is not None and ci is not None else []
            humans = [{"judge": h, "verdict": r[(qid, *name, ch.check_id)]["verdict"],
                       "note": r[(qid, *name, ch.check_id)].get("note"),
                       "stale": index.is_stale(r[(qid, *name, ch.check_id)])}
                      for h, r in index.humans.items() if (qid, *name, ch.check_id) in r]
            labels = {x["verdict"] for x in verdicts if x["verdict"] != "invalid"}
            cols = [None] * len(v.judges)  # one column per judge, for the grid
            for x in verdicts:
                cols[x["judge_index"]] = x
            per_check.append({"check_id": ch.check_id, "tier": ch.tier, "kind": ch.kind, "text": ch.text,
                              "verdicts": verdicts, "cols": cols, "humans": humans, "disagree": len(labels) > 1,
                              "invalid": any(x["verdict"] == "invalid" for x in verdicts)})
        answer = index.answers.get((qid, *name))
        responses.append({"model": name[0], "variant": name[1], "checks": per_check,
                          "response": answer["response"] if answer else None,
                          "n_disagree": sum(x["disagree"] for x in per_check)})
    return {"question_id": qid, "domain": q.domain, "question": q.question,
            "question_text_only": q.question_text_only, "has_image": q.image is not None,
            "rubric": rubric_tree(index, qid), "responses": responses, "judges": v.judges}


def queue_cells(index: RunIndex, only: str = "disagree", question: str | None = None) -> np.ndarray:
    """The queue's cells in order: disagreements first, then the least certain judge first."""
    c = index.cells
    order = c.queue
    if only == "disagree":
        order = order[c.disagree[order]]
    if question:
        qi = index.q_index.get(question, -1)
        order = order[c.q[order] == qi]
    return order


def highlight(text: str, terms: list[str]) -> str:
    """HTML of `text` with each term wrapped in <mark> (escaped first, so nothing else is HTML)."""
    safe = html.escape(text)
    words = sorted({w for w in terms if len(w) >= 4}, key=len, reverse=True)
    if not words:
        return safe
    pattern = re.compile(r"\b(" + "|".join(re.escape(html.escape(w)) for w in words) + r")", re.IGNORECASE)
    return pattern.sub(r"<mark>\1</mark>", safe)


def subject_terms(check_text: str) -> list[str]:
    """The check's content words (its subject, element, step...), template words left out."""
    return [w for w in re.findall(r"[^\W\d_][\w'-]*", check_text.lower()) if w not in _TEMPLATE_WORDS]


def queue_page(index: RunIndex, pos: int, *, only="disagree", question=None, judge=None, blind=True) -> dict:
    """One cell of the queue with everything needed to adjudicate it, and the progress."""
    order = queue_cells(index, only, question)
    mine = annotated_cells(index, judge) if judge else np.zeros(0, dtype=np.int64)
    page = {"only": only, "question_filter": question or "", "sample": None}
    return _cell_page(index, order, pos, mine, judge, blind, page)


def _cell_page(index: RunIndex, order: np.ndarray, pos: int | None, mine: np.ndarray, judge, blind: bool,
               page: dict) -> dict:
    """The cell at `pos` of `order` (None: the first not in `mine`, the cells counted done)."""
    page.update({"total": len(order), "done": int(np.isin(order, mine).sum()), "blind": blind, "pos": 0,
                 "cell": None})
    if not len(order):
        return page
    if pos is None:  # reopening resumes at the first cell you have not annotated
        todo = np.flatnonzero(~np.isin(order, mine))
        pos = int(todo[0]) if len(todo) else 0
    pos = min(max(int(pos), 0), len(order) - 1)
    cell = int(order[pos])
    qid, model, variant, check_id = index.cell_names(cell)
    q = index.questions.get(qid)
    check = next((ch for ch in index.checks(qid) if ch.check_id == check_id), None)
    answer = index.answers.get((qid, model, variant))
    c, v = index.cells, index.verdicts
    rows = slice(int(c.start[cell]), int(c.start[cell + 1]))
    snippets = {s.id: s for s in (q.meta_rubric.snippets if q is not None and q.meta_rubric else [])}
    text = check.text if check else check_id
    later = order[pos + 1:]
    todo = later[~np.isin(later, mine)]
    current = index.humans.get(judge, {}).get((qid, model, variant, check_id)) if judge else None
    page.update({
        "pos": pos, "cell": cell, "question_id": qid, "model": model, "variant": variant, "check_id": check_id,
        "domain": q.domain if q else "", "question": q.question if q else "",
        "question_text_only": q.question_text_only if q else None, "has_image": bool(q and q.image),
        "check": text, "tier": TIERS[int(c.tier[cell])], "kind": check.kind if check else "given",
        "evidence": [snippets[e].model_dump() for e in (check.evidence if check else []) if e in snippets],
        "response_html": highlight(answer["response"], subject_terms(text)) if answer else None,
        "judges": [] if blind else [{"judge": v.judges[j], "verdict": VERDICTS[code], "probs": _probs(p)}
                                    for j, code, p in zip(v.j[rows].tolist(), v.code[rows].tolist(), v.probs[rows])],
        "disagree": bool(c.disagree[cell]), "entropy": float(c.entropy[cell]),
        "mine": None if current is None else {"verdict": current["verdict"], "note": current.get("note"),
                                              "revision": current.get("revision"),
                                              "sample_id": current.get("sample_id")},
        "next_todo": None if not len(todo) else int(pos + 1 + np.flatnonzero(~np.isin(later, mine))[0]),
        "labels": list(JUDGE_LABELS),
    })
    return page


# ---------------------------------------------------------------- the calibration sample
#
# Who has graded what of a sample: per person, the cells they graded in its queue and the drawn
# responses they graded in full by the correction's own rule (`analysis.correction.
# graded_in_full`), so the queue, each person's progress and the team's count what a corrected
# score labels. A person's result is kept up to date from the verdicts written since it was last
# asked (`adjudicate._replace` lists them), not recomputed from all of their verdicts, and kept
# as is while that person's verdicts stay: a verdict replaces its judge's dict, so the dict's
# identity says whether they changed.

def sample_cells(index: RunIndex, design) -> tuple[np.ndarray, np.ndarray, int]:
    """(cells, response number of each, drawn responses without cells): the cells of the
    design's drawn responses in grading order, the design's order of responses (so whatever
    prefix is graded is itself a stratified random sample), each response's checks in its
    question's rubric order. A drawn response no judge graded has no cells to walk."""
    c, v = index.cells, index.verdicts
    S, C = max(len(v.systems), 1), max(len(v.checks), 1)
    cells, number, missing = [], [], 0
    for k, r in enumerate(sorted(design.responses, key=lambda r: r.order)):
        qi, si = index.q_index.get(r.question_id), index.s_index.get((r.model, r.variant))
        lo = hi = 0
        if qi is not None and si is not None:
            base = (qi * S + si) * C
            lo, hi = (int(x) for x in np.searchsorted(c.key, [base, base + C]))
        if lo == hi:
            missing += 1
            continue
        q = index.questions.get(r.question_id)
        rank = {ch.check_id: i for i, ch in enumerate(q.checks_for_variant(r.variant, index.checks(r.question_id)))} \
            if q is not None else {}
        mine = sorted(range(lo, hi), key=lambda i: (rank.get(v.checks[c.c[i]], len(rank)), v.checks[c.c[i]]))
        cells += mine
        number += [k] * len(mine)
    return np.array(cells, dtype=np.int64), np.array(number, dtype=np.int64), missing


def cells_of(index: RunIndex, name: str):
    """`sample_cells` of a sample, computed once (the design and the cells stay), with the
    drawn responses in design order and which have cells; beside it, each response's number
    and the checks a person must grade of it (`_judged`)."""
    key = ("sample_cells", name)
    if key not in index.computed:
        design = index.samples[name]
        order, number, missing = sample_cells(index, design)
        ranked = sorted(design.responses, key=lambda r: r.order)
        responses = [(r.model, r.variant, r.question_id) for r in ranked]
        present = np.bincount(number, minlength=len(responses)) > 0
        index.computed[key] = (order, number, missing, responses, present)
        index.computed[("sample_judged", name)] = ({r: k for k, r in enumerate(responses)},
                                                  _judged(index, order, number, len(responses)))
    return index.computed[key]


def _judged(index: RunIndex, order: np.ndarray, number: np.ndarray, n: int) -> np.ndarray:
    """(responses,) the most verdicts one model judge gave each drawn response (what
    `analysis.correction.judged_checks` reads from the scores)."""
    c, v = index.cells, index.verdicts
    J = max(len(v.judges), 1)
    lo, lens = c.start[order], c.start[order + 1] - c.start[order]
    at = np.arange(int(lens.sum())) + np.repeat(lo - (np.cumsum(lens) - lens), lens)  # each cell's rows
    rows = np.repeat(number, lens) * J + v.j[at]
    return np.bincount(rows, minlength=n * J).reshape(n, J).max(axis=1)


def graded(index: RunIndex, judge: str | None, name: str) -> tuple[np.ndarray, set[Response]]:
    """(cells this judge graded for the sample, the drawn responses they graded in full).

    A cell counts when the judge's current verdict on it (not stale) was made in the sample's
    queue; a response by `graded_in_full` over the judge's current verdicts on it and the checks
    the model judges graded of it, in the queue while none of the judge's newest verdicts on it,
    stale ones included, was made elsewhere."""
    if judge is None:
        return np.zeros(0, dtype=np.int64), set()
    changed = index.computed.get(("changed", judge), [])
    upto = len(changed)  # before the records: a write in between is looked at again next time
    mine = index.humans.get(judge, {})
    key = ("graded", judge, name)
    state = index.computed.get(key)
    if state is not None and state[0] is mine:
        return state[1]
    responses = cells_of(index, name)[3]
    number_of, judged = index.computed[("sample_judged", name)]
    sample_id = index.samples[name].sample_id
    if state is None:
        keys, counted, have, away = list(mine), {}, np.zeros_like(judged), np.zeros_like(judged)
    else:
        keys, counted, have, away = changed[state[2]:upto], dict(state[3]), state[4].copy(), state[5].copy()
    for k in keys:
        at = number_of.get((k[1], k[2], k[0]))
        if at is None:
            continue
        was = counted.pop(k, None)
        if was is not None:
            have[at] -= was[1]
            away[at] -= not was[0]
        r = mine.get(k)
        if r is not None:
            # A stale verdict grades nothing now, but one made elsewhere still says the person
            # came to this response outside the queue, as `analysis.design.check_sample` reads it.
            ok, current = r.get("sample_id") == sample_id, not index.is_stale(r)
            counted[k] = (ok, current, index.cell_of(*k) if ok and current else None)
            have[at] += current
            away[at] += not ok
    full = {responses[i] for i in np.flatnonzero(graded_in_full(have, judged, away == 0)).tolist()}
    cells = np.array(sorted(cell for *_, cell in counted.values() if cell is not None), dtype=np.int64)
    result = (cells, full)
    index.computed[key] = (mine, result, upto, counted, have, away)
    return result



def sample_page(index: RunIndex, name: str, pos: int | None, judge: str | None) -> dict:
    """One cell of the calibration sample's queue, blind, with the sample's progress in whole
    responses (what a correction counts) and in cells."""
    design = index.samples[name]
    order, number, missing, _, _ = cells_of(index, name)
    done, full = graded(index, judge, name)
    info = {"name": name, "sample_id": design.sample_id, "per": design.per, "responses": len(design.responses),
            "responses_done": len(full), "missing": missing, "response": None}
    page = _cell_page(index, order, pos, done, judge, True, {"only": "sample", "question_filter": "",
                                                             "sample": info})
    if page["cell"] is not None:
        k = int(number[page["pos"]])
        mine = np.flatnonzero(number == k)
        info.update(response=k + 1, check=int(page["pos"] - mine[0]) + 1, checks=len(mine),
                    inclusion_probability=probability_of(design).get((page["model"], page["variant"],
                                                                      page["question_id"])))
    return page
