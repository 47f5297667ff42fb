"""One rule says when a person has graded a drawn response of the calibration sample in full,
and the viewer (each person's progress, the team's, the queue's next response) and the
correction (`analysis.correction.graded_responses`: labels, `annotators assign`, the reports)
read it alike: the same run's files give the same responses, person by person, on the cases
where a person's verdicts are more or fewer than the checks the judges graded, are revised,
were made in another queue (stale ones too), or adjudicate one cell of someone else's response."""

from __future__ import annotations

import json

import pytest

from gamut_local.analysis.design import probability_of, read_sample
from tests.support.sample_run import build_sample_run


@pytest.fixture
def drawn(tmp_path):
    from gamut_local.stages.sample import draw_sample

    run = build_sample_run(tmp_path / "run", seed=0)
    draw_sample(run, 4, per="model", seed=1)
    design = read_sample(run / "samples" / "calibration.json")
    responses = [(r.model, r.variant, r.question_id) for r in sorted(design.responses, key=lambda r: r.order)]
    return run, design, responses


def _model_checks(run, resp, drop=lambda check: False) -> list[dict]:
    """The gold judge's verdicts of `resp` by check; the model judges' verdicts on the checks
    `drop` names are taken out of the run."""
    model, variant, qid = resp
    gold = []
    for path in (run / "verdicts").glob(f"*/{model}.{variant}.jsonl"):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        gold += [r for r in rows if r["question_id"] == qid and path.parent.name == "gold"]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows if r["question_id"] != qid or not drop(r["check_id"])))
    return sorted(gold, key=lambda r: r["check_id"])


def _human(run, design, who: str, records: list[dict], queue: bool = True) -> None:
    for r in records:
        resp = (r["model"], r["variant"], r["question_id"])
        mine = {**r, "judge": f"human-{who}", "raw": None, "probs": None}
        if queue:
            mine.update(sample_id=design.sample_id, inclusion_probability=probability_of(design)[resp])
        path = run / "verdicts" / f"human-{who}" / f"{r['model']}.{r['variant']}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write(json.dumps(mine) + "\n")


def _both(run, name="calibration"):
    """(the viewer's, the correction's) {annotator: responses graded in full}."""
    from gamut_local.reporting.team import design_of, graded_by
    from gamut_local.viewer.index import open_run
    from gamut_local.viewer.team_pages import _graded_by, team_progress

    index = open_run(run)
    people = sorted(j[len("human-"):] for j in index.humans)
    viewer = _graded_by(index, name)
    progress = team_progress(index, name, people)["annotators"]
    assert {n: p["graded"] for n, p in progress.items()} == {n: len(viewer.get(n, ())) for n in people}
    return viewer, graded_by(run, design_of(run, name))


def test_every_case_of_graded_in_full_is_the_same_in_the_viewer_and_the_correction(drawn):
    run, design, (r0, r1, r2, r3, r4, r5, *_) = drawn
    # r0: alice grades every check; bob all but one; a revision of bob's first check.
    g0 = _model_checks(run, r0)
    _human(run, design, "alice", g0)
    _human(run, design, "bob", g0[:1] + g0[:-1])
    # r1, r4: the model judges did not grade the last check; carol grades every check of r1,
    # dave all the judged ones, erin (alone on r4) the unjudged one instead of a judged one.
    for r, people in ((r1, {"carol": slice(None), "dave": slice(-1)}), (r4, {"erin": slice(1, None)})):
        g = _model_checks(run, r)
        _model_checks(run, r, drop=lambda c, last=g[-1]["check_id"]: c == last)
        for who, part in people.items():
            _human(run, design, who, g[part])
    # r2: no model judge graded it; alice grades it anyway.
    g2 = _model_checks(run, r2)
    _model_checks(run, r2, drop=lambda c: True)
    _human(run, design, "alice", g2)
    # r3: frank graded one check in another queue first, then every check in the sample's;
    # gina every check but one in the sample's queue and that one elsewhere; alice one check
    # (an adjudication).
    g3 = _model_checks(run, r3)
    _human(run, design, "frank", g3[:1], queue=False)
    _human(run, design, "frank", g3)
    _human(run, design, "gina", g3[:-1])
    _human(run, design, "gina", g3[-1:], queue=False)
    _human(run, design, "alice", g3[:1])
    # r5: the judges did not grade the last check; ivan grades the others but the first in the
    # sample's queue, the last too, and the first elsewhere, on an answer since changed (stale):
    # it counts as no verdict, yet says he came to r5 outside the queue.
    g5 = _model_checks(run, r5)
    _model_checks(run, r5, drop=lambda c, last=g5[-1]["check_id"]: c == last)
    _human(run, design, "ivan", g5[1:])
    _human(run, design, "ivan", [{**g5[0], "answer_hash": "0" * 12}], queue=False)
    viewer, correction = _both(run)
    assert viewer == correction
    # Erin's verdicts are counted, not matched check by check (`graded_in_full`).
    assert correction == {"alice": {r0}, "bob": set(), "carol": {r1}, "dave": {r1}, "erin": {r4},
                          "frank": {r3}, "gina": set(), "ivan": set()}
    # The live corrected leaderboard labels the same responses: every system's count is theirs.
    from gamut_local.viewer.correction import sample_board
    from gamut_local.viewer.index import open_run

    labeled = set().union(*correction.values())
    board = sample_board(open_run(run), "calibration")
    assert board["error"] is None, board
    for rows in board["judges"].values():
        assert {(r["model"], r["variant"]): r["n_labeled"] for r in rows} == {
            (r["model"], r["variant"]): sum((m, v) == (r["model"], r["variant"]) for m, v, _ in labeled)
            for r in rows}


def test_the_viewers_kept_count_follows_each_verdict_written_as_a_fresh_reading_does(drawn):
    """The incremental path (`pages.graded` updated from the verdicts written) against the
    rule over all of the files, after each change of the person's mind about where a verdict
    of theirs was made."""
    from gamut_local.viewer.adjudicate import record_verdict
    from gamut_local.viewer.pages import graded
    from gamut_local.viewer.index import open_run

    run, design, (r0, r1, *_) = drawn
    index = open_run(run)
    assert graded(index, "human-hana", "calibration")[1] == set()  # the state the writes update
    checks = _model_checks(run, r0)
    cell = {k: checks[0][k] for k in ("question_id", "model", "variant", "check_id")}
    steps = [[{**cell, "check_id": c["check_id"], "sample": "calibration"} for c in checks],  # all of r0
             [cell],  # its first check again, in another queue
             [{**cell, "sample": "calibration"}]]  # and once more in the sample's
    for step, want in zip(steps, [{r0}, set(), {r0}]):
        for body in step:
            record_verdict(index, "hana", {**body, "verdict": "meets"})
        cells, kept = graded(index, "human-hana", "calibration")
        fresh_cells, fresh = graded(open_run(run), "human-hana", "calibration")
        viewer, correction = _both(run)
        assert kept == fresh == correction.get("hana", set()) == viewer.get("hana", set()) == want
        assert cells.tolist() == fresh_cells.tolist()
