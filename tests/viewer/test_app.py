"""The viewer's HTTP API over the sample run, checked against the run's own files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gamut_local.data.records import Verdict, load_records, verdict_key
from gamut_local.errors import InputError
from gamut_local.rundir.layout import scores_path, verdict_files


def _cells(run: Path) -> dict:
    """(qid, model, variant, check) -> {judge: verdict}, read straight from the files."""
    out: dict = {}
    for p in verdict_files(run):
        for line in p.read_text().splitlines():
            r = json.loads(line)
            out.setdefault((r["question_id"], r["model"], r["variant"], r["check_id"]), {})[r["judge"]] = r
    return out


def _disagree(judges: dict) -> bool:
    return len({r["verdict"] for r in judges.values() if r["verdict"] != "invalid"}) > 1


def test_overview_numbers_are_the_scores_file(sample_run, client_for):
    o = client_for(sample_run).get("/api/overview").json()
    scores = json.loads(scores_path(sample_run).read_text())["models"]
    got = {(j, r["model"], r["variant"]): (r["gamut_score"], r["ci95"]) for j, rows in o["leaderboard"].items()
           for r in rows}
    assert got == {(m["judge"], m["model"], m["variant"]): (m["gamut_score"], m["ci95"]) for m in scores}
    for rows in o["leaderboard"].values():
        assert [r["gamut_score"] for r in rows] == sorted((r["gamut_score"] for r in rows), reverse=True)
    cells = _cells(sample_run)
    assert o["n_cells"] == len(cells)
    assert o["n_disagree"] == sum(_disagree(j) for j in cells.values()) > 0


@pytest.mark.parametrize("content", [b'{"schema_version": 1, "models": ', b'{"schema_version": 2}', b"\xff\xfe",
                                     b'{"kind": "gamut-local agreement"}'])
def test_a_damaged_scores_file_leaves_the_leaderboard_out_with_a_note(sample_run, client_for, content):
    scores_path(sample_run).write_bytes(content)
    client = client_for(sample_run)
    o = client.get("/api/overview").json()
    assert o["leaderboard"] == {} and o["n_cells"] > 0
    (note,) = [n for n in o["notes"] if "scores.json" in n]
    assert note.startswith("scores/scores.json is not a scores file (") and "score-run" in note
    assert client.get("/").status_code == 200


def test_questions_filter_and_sort_by_disagreement(sample_run, client_for):
    client = client_for(sample_run)
    cells = _cells(sample_run)
    expect = {}
    for (qid, *_), judges in cells.items():
        expect[qid] = expect.get(qid, 0) + _disagree(judges)
    d = client.get("/api/questions", params={"disagree": 1}).json()
    assert {r["question_id"]: r["disagree"] for r in d["rows"]} == {q: n for q, n in expect.items() if n}
    assert [r["disagree"] for r in d["rows"]] == sorted((r["disagree"] for r in d["rows"]), reverse=True)
    food = client.get("/api/questions", params={"domain": "food"}).json()["rows"]
    assert food and all(r["domain"] == "food" for r in food)
    one = client.get("/api/questions", params={"model": "reference-omissive"}).json()["rows"]
    assert sum(r["cells"] for r in one) == sum(1 for k in cells if k[1] == "reference-omissive")
    html = client.get("/questions", params={"disagree": 1}).text
    assert 'id="f-disagree" checked' in html


def test_question_page_shows_every_judge_verdict(sample_run, client_for):
    cells = _cells(sample_run)
    page = client_for(sample_run).get("/api/question/food-espresso").json()
    assert page["question_text_only"] and page["has_image"]
    assert {r["model"] for r in page["responses"]} == {"reference-complete", "reference-omissive",
                                                      "reference-contradicting"}
    for r in page["responses"]:
        assert r["response"]
        for c in r["checks"]:
            judges = cells[("food-espresso", r["model"], r["variant"], c["check_id"])]
            assert {x["judge"]: x["verdict"] for x in c["verdicts"]} == {j: v["verdict"] for j, v in judges.items()}
            assert c["disagree"] == _disagree(judges)
            synth = next(x for x in c["verdicts"] if x["judge"] == "synthetic-judge")
            assert synth["probs"] == judges["synthetic-judge"]["probs"]
    tree = page["rubric"]["tiers"]
    items = [it for t in tree for it in t["items"]]
    assert {it["type"] for it in items} >= {"simple", "process", "flexible_list"}
    assert all(ch["source_item"] == it["id"] for it in items for ch in it["checks"])
    html = client_for(sample_run).get("/question/food-espresso").text
    assert 'id="rubric-tree"' in html and 'src="/image/food-espresso"' in html and "Crema (coffee)" in html


def test_queue_puts_disagreements_first_then_least_certain(sample_run, client_for):
    client = client_for(sample_run)
    cells = _cells(sample_run)
    n_dis = sum(_disagree(j) for j in cells.values())
    first = client.get("/api/queue", params={"pos": 0}).json()
    assert first["total"] == n_dis and first["judges"] == []  # blind by default
    everything = client.get("/api/queue", params={"only": "all", "blind": 0, "pos": 0}).json()
    assert everything["total"] == len(cells) and everything["judges"]
    seen = [client.get("/api/queue", params={"only": "all", "pos": i}).json() for i in range(n_dis + 3)]
    assert all(s["disagree"] for s in seen[:n_dis]) and not any(s["disagree"] for s in seen[n_dis:])
    ent = [s["entropy"] for s in seen[:n_dis]]
    assert ent == sorted(ent, reverse=True)


def test_verdicts_are_appended_and_the_newest_wins(sample_run, client_for):
    client = client_for(sample_run, annotator="ann")
    cell = client.get("/api/queue", params={"pos": 0}).json()
    body = {k: cell[k] for k in ("question_id", "model", "variant", "check_id")}
    assert client.post("/api/verdicts", json={**body, "verdict": "missing"}).status_code == 200
    r = client.post("/api/verdicts", json={**body, "verdict": "meets", "note": "it does say so"})
    assert r.status_code == 200 and r.json()["record"]["revision"] == 2
    path = sample_run / "verdicts" / "human-ann" / f"{cell['model']}.{cell['variant']}.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["verdict"] for x in lines] == ["missing", "meets"]  # history kept
    assert lines[1]["judge"] == "human-ann" and lines[1]["tier"] == cell["tier"]
    newest = load_records([path], Verdict, verdict_key)
    assert [x["verdict"] for x in newest] == ["meets"] and newest[0]["note"] == "it does say so"
    # Reopening resumes: the cell shows the newest verdict and counts as done.
    again = client_for(sample_run, annotator="ann").get("/api/queue", params={"pos": 0}).json()
    assert again["mine"]["verdict"] == "meets" and again["done"] == 1
    assert client_for(sample_run, annotator="ann").get("/api/queue").json()["pos"] == 1  # the first not done
    # Another annotator writes their own file.
    client_for(sample_run, annotator="bob").post("/api/verdicts", json={**body, "verdict": "contradicts"})
    assert (sample_run / "verdicts" / "human-bob").is_dir() and len(path.read_text().splitlines()) == 2


def test_score_reads_human_verdicts_like_any_judge(sample_run, client_for):
    from tests.support.scoring import score_files

    client = client_for(sample_run, annotator="ann")
    cell = client.get("/api/queue", params={"pos": 0}).json()
    body = {k: cell[k] for k in ("question_id", "model", "variant", "check_id")}
    for label in ("contradicts", "meets"):
        client.post("/api/verdicts", json={**body, "verdict": label})
    human = [m for m in score_files(verdict_files(sample_run))["models"] if m["judge"] == "human-ann"]
    assert len(human) == 1 and human[0]["verdict_rates"]["meets"] == 1.0


@pytest.mark.parametrize("kwargs, status", [({"read_only": True, "annotator": "ann"}, 403), ({}, 403)])
def test_read_only_writes_nothing(sample_run, client_for, kwargs, status):
    client = client_for(sample_run, **kwargs)
    cell = client.get("/api/queue", params={"pos": 0}).json()
    body = {k: cell[k] for k in ("question_id", "model", "variant", "check_id")} | {"verdict": "meets"}
    assert client.post("/api/verdicts", json=body).status_code == status
    assert not list((sample_run / "verdicts").glob("human-*"))


def test_bad_verdict_requests_are_refused(sample_run, client_for):
    client = client_for(sample_run, annotator="ann")
    cell = client.get("/api/queue", params={"pos": 0}).json()
    body = {k: cell[k] for k in ("question_id", "model", "variant", "check_id")}
    assert client.post("/api/verdicts", json={**body, "verdict": "great"}).status_code == 400
    assert client.post("/api/verdicts", json={**body, "verdict": "invalid"}).status_code == 400
    assert client.post("/api/verdicts", json={**body, "model": "../../etc", "verdict": "meets"}).status_code == 404
    assert client.post("/api/verdicts", content=json.dumps({**body, "verdict": "meets"}),
                       headers={"content-type": "text/plain"}).status_code == 415
    assert client.post("/api/verdicts", json=[1, 2]).status_code == 400
    assert not list((sample_run / "verdicts").glob("human-*"))


def test_foreign_host_and_origin_are_refused(sample_run, client_for):
    client = client_for(sample_run, annotator="ann")
    assert client.get("/", headers={"host": "evil.example:8765"}).status_code == 403
    assert client.get("/", headers={"host": "localhost:8765"}).status_code == 200
    cell = client.get("/api/queue", params={"pos": 0}).json()
    body = {k: cell[k] for k in ("question_id", "model", "variant", "check_id")} | {"verdict": "meets"}
    assert client.post("/api/verdicts", json=body, headers={"origin": "http://evil.example"}).status_code == 403
    assert client.post("/api/verdicts", json=body, headers={"origin": "null"}).status_code == 403
    assert not list((sample_run / "verdicts").glob("human-*"))
    assert client.post("/api/verdicts", json=body, headers={"origin": "http://127.0.0.1:8765"}).status_code == 200


def test_only_known_files_are_served(sample_run, client_for):
    client = client_for(sample_run)
    img = client.get("/image/food-espresso")
    assert img.status_code == 200 and img.headers["content-type"] == "image/png"
    assert img.content[:8] == b"\x89PNG\r\n\x1a\n"
    for url in ("/image/nope", "/image/..%2F..%2Fmanifest.json", "/static/..%2Fapp.py", "/static/index.py",
                "/figure/..%2Fmanifest.json", "/figure/leaderboard.png", "/question/..%2F..%2Fetc"):
        assert client.get(url).status_code == 404, url
    assert client.get("/static/app.js").status_code == 200
    (sample_run / "figures").mkdir()
    (sample_run / "figures" / "leaderboard.png").write_bytes(img.content)
    assert client.get("/figure/leaderboard.png").content == img.content


def test_bad_annotator_names_are_refused(sample_run, gamut):
    from gamut_local.errors import InputError
    from gamut_local.viewer.app import create_app
    from gamut_local.viewer.index import open_run

    index = open_run(sample_run)
    for name in ("../x", "Ann", "a b", "", "a" * 41, "-x"):
        with pytest.raises(InputError):
            create_app(index, annotator=name)
    res = gamut("view", str(sample_run), "--annotator", "../../x")
    assert res.exit_code == 1 and "is not an annotator name" in res.output and "Traceback" not in res.output


def test_agree_reads_human_verdicts_with_their_history(sample_run, client_for, gamut, tmp_path):
    client = client_for(sample_run, annotator="ann")
    for pos in range(3):
        cell = client.get("/api/queue", params={"pos": pos}).json()
        body = {k: cell[k] for k in ("question_id", "model", "variant", "check_id")}
        for label in ("contradicts", "missing"):  # a change of mind: two records, the newer wins
            assert client.post("/api/verdicts", json={**body, "verdict": label}).status_code == 200
    res = gamut("agree", *verdict_files(sample_run), "--out", tmp_path / "agreement.json")
    assert res.exit_code == 0, res.output
    assert "human-ann" in json.loads((tmp_path / "agreement.json").read_text())["judges"]


def test_questions_pages_keep_their_filters(sample_run, client_for, monkeypatch):
    from gamut_local.viewer import pages

    monkeypatch.setattr(pages, "PAGE_SIZE", 2)
    html = client_for(sample_run).get("/questions", params={"disagree": 1, "domain": ""}).text
    assert 'href="/questions?disagree=1&amp;offset=2"' in html


def test_overview_compares_judges_with_the_humans_so_far(sample_run, client_for):
    client = client_for(sample_run, annotator="ann")
    assert client.get("/api/overview").json()["human_agreement"] is None
    picked = []
    for pos in range(4):
        cell = client.get("/api/queue", params={"pos": pos, "blind": 0}).json()
        gold = next(x["verdict"] for x in cell["judges"] if x["judge"] == "gold")
        body = {k: cell[k] for k in ("question_id", "model", "variant", "check_id")}
        client.post("/api/verdicts", json={**body, "verdict": gold})  # the human sides with gold
        picked.append(cell)
    h = client.get("/api/overview").json()["human_agreement"]
    assert h["n_gold_cells"] == 4 and h["judges"]["gold"]["vs_gold"]["accuracy"] == 1.0
    # On disagreement cells the synthetic judge differs from gold, hence from the human.
    assert h["judges"]["synthetic-judge"]["vs_gold"]["accuracy"] == 0.0
    assert 'id="human-agreement"' in client.get("/").text


def test_the_overview_answers_while_the_run_is_read(sample_run, monkeypatch):
    """`gamut-local view` serves at once (scripts/bench_analysis.py: its first page at paper
    scale): while the run is read in the background the overview shows the scores file's
    leaderboard; every other page waits for the index and then answers as usual."""
    import threading

    from starlette.testclient import TestClient

    import gamut_local.viewer.index as index_module
    from gamut_local.viewer.app import create_app
    from gamut_local.viewer.opening import Opening, run_files

    release, real = threading.Event(), index_module.read_run
    monkeypatch.setattr(index_module, "read_run", lambda found: release.wait(60) and real(found))
    opening = Opening(run_files(sample_run), lambda found: index_module.read_run(found))
    client = TestClient(create_app(opening), base_url="http://127.0.0.1:8765")
    page = client.get("/")
    assert page.status_code == 200 and 'id="opening"' in page.text and "Leaderboard, judge" in page.text
    assert not opening.done.is_set()
    release.set()
    assert client.get("/api/questions").json()["total"] > 0  # waited for the index
    page = client.get("/")
    assert 'id="opening"' not in page.text and "cells graded" in page.text


def test_a_run_that_cannot_be_read_stops_the_server(sample_run):
    """The run is read after the server starts; a bad verdict file found then stops it and
    `serve` raises the problem (the CLI prints it and exits 1), as one found at first does."""
    import socket

    from gamut_local.viewer.app import serve

    bad = verdict_files(sample_run)[0]
    bad.write_bytes(b"not a verdict file at all")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(InputError, match=bad.name):
        serve(sample_run, port=port, echo=lambda line: None)
