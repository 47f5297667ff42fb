"""The calibration sample's queue and the live corrected leaderboard, over the sample run with a
drawn sample, checked against the design file and against `score --correct-with`."""

from __future__ import annotations

import json

import pytest

from gamut_local.rundir.layout import verdict_files

CELL = ("question_id", "model", "variant", "check_id")


@pytest.fixture
def sampled(sample_run):
    from gamut_local.stages.sample import draw_sample

    path, design, _ = draw_sample(sample_run, 4, per="model", seed=1)
    return sample_run, path, design


def _gold(run) -> dict:
    """The sample's hand-made verdicts: what a careful human says of each cell."""
    out = {}
    for p in (run / "verdicts" / "gold").glob("*.jsonl"):
        for line in p.read_text().splitlines():
            r = json.loads(line)
            out[tuple(r[k] for k in CELL)] = r["verdict"]
    return out


def _grade(client, run, stop=None) -> list[tuple]:
    """Grade the queue as a human would (the gold verdict of each cell shown) until it says
    every drawn response is graded (or `stop` cells); the cells in the order shown."""
    gold, shown = _gold(run), []
    while stop is None or len(shown) < stop:
        page = client.get("/api/sample").json()
        if page["sample"]["responses_done"] == page["sample"]["responses"]:
            break
        key = tuple(page[k] for k in CELL)
        assert page["judges"] == []  # blind
        r = client.post("/api/verdicts", json={**dict(zip(CELL, key)), "verdict": gold[key], "sample": "calibration"})
        assert r.status_code == 200, r.text
        shown.append(key)
    return shown


def test_the_queue_walks_each_drawn_response_in_full_in_the_designs_order(sampled, client_for):
    from gamut_local.data.dataset import load_questions
    from tests.support.sample_run import SAMPLE

    run, _, design = sampled
    client = client_for(run, annotator="ann")
    first = client.get("/api/sample").json()
    assert first["sample"]["responses"] == len(design.responses) == 12 and first["done"] == 0
    shown = _grade(client, run)
    # Responses in the design's order, each graded check by check before the next starts.
    order = [(r.question_id, r.model, r.variant) for r in sorted(design.responses, key=lambda r: r.order)]
    assert list(dict.fromkeys(k[:3] for k in shown)) == order
    questions = {q.question_id: q for q in load_questions(SAMPLE / "questions.jsonl")}
    for qid, model, variant in order:
        checks = [k[3] for k in shown if k[:3] == (qid, model, variant)]
        assert checks == [c.check_id for c in questions[qid].checks_for_variant(variant)]  # rubric order, once each
    # What is on disk: each verdict carries the sample's id and its response's inclusion probability.
    prob = {(s.model, s.variant): s.inclusion_probability for s in design.strata}
    records = [json.loads(x) for p in (run / "verdicts" / "human-ann").glob("*.jsonl") for x in p.read_text().splitlines()]
    assert len(records) == len(shown)
    assert all(r["sample_id"] == design.sample_id and r["inclusion_probability"] == prob[(r["model"], r["variant"])]
               for r in records)
    assert prob[("reference-complete", "multimodal")] == 4 / 13
    last = client.get("/api/sample").json()
    assert (last["sample"]["responses_done"], last["done"], last["total"]) == (12, len(shown), len(shown))


def test_progress_counts_whole_responses_and_reopening_resumes_at_the_next_ungraded_check(sampled, client_for):
    from gamut_local.viewer.app import create_app
    from gamut_local.viewer.index import open_run
    from starlette.testclient import TestClient

    run, _, _ = sampled
    client = client_for(run, annotator="ann")
    n_first = client.get("/api/sample").json()["sample"]["checks"]
    shown = _grade(client, run, stop=n_first + 2)
    page = client.get("/api/sample").json()
    assert page["sample"]["responses_done"] == 1 and page["done"] == n_first + 2
    assert (page["sample"]["response"], page["sample"]["check"]) == (2, 3)
    # A new viewer process over the same files resumes where the files say.
    again = TestClient(create_app(open_run(run), annotator="ann"), base_url="http://127.0.0.1:8765")
    resumed = again.get("/api/sample").json()
    assert tuple(resumed[k] for k in CELL) == tuple(page[k] for k in CELL) and shown[-1] != tuple(page[k] for k in CELL)
    assert "response <b id=\"response-number\">2 of 12</b>" in again.get("/sample").text


def test_a_verdict_from_the_disagreement_queue_does_not_count_for_the_sample(sampled, client_for):
    run, _, design = sampled
    client = client_for(run, annotator="ann")
    page = client.get("/api/sample").json()
    key = {k: page[k] for k in CELL}
    assert client.post("/api/verdicts", json={**key, "verdict": "meets"}).status_code == 200  # no sample: the queue
    after = client.get("/api/sample").json()
    assert after["done"] == 0 and tuple(after[k] for k in CELL) == tuple(key.values())
    assert "made outside this sample" in client.get("/sample").text
    # A response the sample did not draw is refused in the sample's queue, and nothing is written.
    drawn = {(r.question_id, r.model, r.variant) for r in design.responses}
    cells = {tuple(json.loads(x)[k] for k in CELL) for p in verdict_files(run) for x in p.read_text().splitlines()}
    undrawn = next(c for c in sorted(cells) if c[:3] not in drawn)
    before = sorted(p.read_bytes() for p in (run / "verdicts" / "human-ann").glob("*.jsonl"))
    r = client.post("/api/verdicts", json={**dict(zip(CELL, undrawn)), "verdict": "meets", "sample": "calibration"})
    assert r.status_code == 400 and "did not draw" in r.json()["error"]
    assert sorted(p.read_bytes() for p in (run / "verdicts" / "human-ann").glob("*.jsonl")) == before


def test_the_live_corrected_leaderboard_is_what_score_correct_with_writes(sampled, client_for, gamut, tmp_path):
    from tests.support.sample_run import SAMPLE

    run, path, _ = sampled
    client = client_for(run, annotator="ann")
    (board,) = client.get("/api/overview").json()["corrected"]
    assert board["judges"] == {} and "no human verdicts" in board["error"]
    _grade(client, run)
    (board,) = client.get("/api/overview").json()["corrected"]
    out = tmp_path / "scores.json"
    r = gamut("score", *verdict_files(run), "--out", out, "--dataset", SAMPLE / "questions.jsonl",
              "--correct-with", "human-*", "--sample", path)
    assert r.exit_code == 0, r.output
    want = {(m["judge"], m["model"], m["variant"]): m["corrected"] for m in json.loads(out.read_text())["models"]
            if m["corrected"] is not None}
    got = {(j, x["model"], x["variant"]): x for j, rows in board["judges"].items() for x in rows}
    assert set(got) == set(want) and len(got) == 6  # two model judges, three systems
    for key, row in got.items():
        assert {k: v for k, v in row.items() if k not in ("model", "variant")} == \
            {k: want[key][k] for k in row if k not in ("model", "variant")}, key  # full precision, the same numbers
    assert any(x["score"] is not None for x in got.values())
    html = client.get("/").text
    assert "Corrected leaderboard" in html and html.count('class="board corrected-board"') == 2
