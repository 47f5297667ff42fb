"""A team grading one calibration sample through one viewer (`view --team`), as its members'
browsers call the API: each walks only their assignment, the overlap is graded twice and
nothing else is, a member who joins mid-way gets only ungraded work, disagreements on the
overlap go to a third person, whose verdicts are ordinary human verdicts of the sample."""

from __future__ import annotations

import json

import pytest

CELL = ("question_id", "model", "variant", "check_id")
LABEL = {"alice": "meets", "bob": "missing", "carol": "partially_meets"}


@pytest.fixture
def team_run(sample_run, assigned_team):
    return sample_run, assigned_team(sample_run, 4, 0.25)


def _member(app, token):
    from starlette.testclient import TestClient

    c = TestClient(app, base_url="http://127.0.0.1:8765")
    assert c.get("/signin", params={"token": token}).status_code == 200  # redirected to their queue
    return c


def _grade_one(c, name) -> tuple | None:
    page = c.get("/api/sample").json()
    if page["sample"]["responses_done"] == page["sample"]["responses"]:
        return None
    key = tuple(page[k] for k in CELL)
    r = c.post("/api/verdicts", json={**dict(zip(CELL, key)), "verdict": LABEL[name], "sample": "calibration"})
    assert r.status_code == 200, r.text
    return key


def _on_disk(run) -> dict[tuple, dict[str, str]]:
    out: dict = {}
    for p in (run / "verdicts").glob("human-*/*.jsonl"):
        for line in p.read_text().splitlines():
            r = json.loads(line)
            out.setdefault(tuple(r[k] for k in CELL), {})[r["judge"][len("human-"):]] = r["verdict"]
    return out


def test_two_members_grade_their_parts_at_once_and_only_the_overlap_twice(team_run, gamut):
    from gamut_local.reporting.team import load
    from gamut_local.viewer.app import create_app
    from gamut_local.viewer.index import open_run

    run, tokens = team_run
    app = create_app(open_run(run), team=True)
    members = {n: _member(app, t) for n, t in tokens.items()}
    plan = load(run)
    mine = {n: {r for r, who in plan.responses.items() if n in who} for n in members}
    going = set(members)
    while going:  # one check each in turn: both at once, as two browsers
        for n in sorted(going):
            key = _grade_one(members[n], n)
            if key is None:
                going.discard(n)
            else:
                assert (key[1], key[2], key[0]) in mine[n]  # only their assignment is shown
    graded = _on_disk(run)
    twice = {(k[1], k[2], k[0]) for k, who in graded.items() if len(who) > 1}
    overlap = {r for r, who in plan.responses.items() if len(who) == 2}
    assert overlap and twice == overlap  # nothing graded twice outside the overlap, all of it twice
    assert {(k[1], k[2], k[0]) for k in graded} == set(plan.responses)
    progress = members["alice"].get("/api/team").json()["progress"]
    assert progress["team"]["complete"] == progress["team"]["responses"] == 12
    assert {n: x["graded"] for n, x in progress["annotators"].items()} == {n: len(m) for n, m in mine.items()}
    assert "human-alice" in members["alice"].get("/team").text


def test_a_third_member_joins_mid_way_and_adjudicates_the_overlap(team_run, gamut):
    from gamut_local.reporting.team import load
    from gamut_local.viewer.app import create_app
    from gamut_local.viewer.index import open_run

    run, tokens = team_run
    app = create_app(open_run(run), team=True)
    alice, bob = _member(app, tokens["alice"]), _member(app, tokens["bob"])
    for _ in range(6):
        _grade_one(alice, "alice")
        _grade_one(bob, "bob")
    before = load(run)
    res = gamut("annotators", "add", run, "carol")
    assert res.exit_code == 0 and "rebalanced" in res.output, res.output
    carol_token = next(x for x in res.output.splitlines() if x.startswith("http://")).split("token=")[1]
    after = load(run)
    assert after.annotators == ("alice", "bob", "carol")
    done = {n: {(k[1], k[2], k[0]) for k, who in _on_disk(run).items() if n in who} for n in ("alice", "bob")}
    carols = {r for r, who in after.responses.items() if "carol" in who}
    assert carols and not carols & (done["alice"] | done["bob"])  # only ungraded work moved
    carol = _member(app, carol_token)
    members = {"alice": alice, "bob": bob, "carol": carol}
    going = set(members)
    while going:
        for n in sorted(going):
            key = _grade_one(members[n], n)
            if key is None:
                going.discard(n)
            else:
                assert n in after.responses[(key[1], key[2], key[0])]
    disputed = [k for k, who in _on_disk(run).items() if len(set(who.values())) > 1]
    assert disputed
    # Carol adjudicates the overlap responses she was not assigned: alice's and bob's labels shown.
    listed = carol.get("/api/team").json()["disputes"]
    assert listed and all(d["labels"] == {"alice": "meets", "bob": "missing"} for d in listed)
    assert all("carol" not in after.responses[(d["model"], d["variant"], d["question_id"])] for d in listed)
    # Alice sees only what bob and carol dispute: never a cell she graded.
    assert all(set(d["labels"]) == {"bob", "carol"} for d in alice.get("/api/team").json()["disputes"])
    page = carol.get("/api/adjudicate").json()
    assert page["people"] == {"alice": "meets", "bob": "missing"} and page["total"] == len(listed)
    assert "people disagree" in carol.get("/adjudicate").text
    for _ in range(len(listed)):
        page = carol.get("/api/adjudicate").json()
        r = carol.post("/api/verdicts", json={**{k: page[k] for k in CELL}, "verdict": "meets", "sample": "calibration"})
        assert r.status_code == 200, r.text
        assert r.json()["record"]["judge"] == "human-carol" and r.json()["record"]["sample_id"]
    assert carol.get("/api/team").json()["disputes"] == [] and carol.get("/api/adjudicate").json()["cell"] is None
    settled = {k: who for k, who in _on_disk(run).items() if "carol" in who and len(who) == 3}
    assert len(settled) == len(listed)


def test_the_live_leaderboard_shows_the_people_agreement_beside_the_corrected_scores(team_run, gamut, tmp_path):
    """Alice grades as the sample's careful gold verdicts, bob one label off on every cell: the
    people agree less than the judges agree with them, and the overview warns that the people
    are the noisier party; alpha is the krippendorff package's on the same cells."""
    krippendorff = pytest.importorskip("krippendorff")
    from gamut_local.reporting.team import load
    from gamut_local.viewer.app import create_app
    from gamut_local.viewer.index import open_run
    from gamut_local.vocab import JUDGE_LABELS, VERDICTS

    run, tokens = team_run
    gold = {}
    for p in (run / "verdicts" / "gold").glob("*.jsonl"):
        for line in p.read_text().splitlines():
            r = json.loads(line)
            gold[tuple(r[k] for k in CELL)] = r["verdict"]
    off = {lab: JUDGE_LABELS[(i + 1) % len(JUDGE_LABELS)] for i, lab in enumerate(JUDGE_LABELS)}
    label = {"alice": lambda k: gold[k], "bob": lambda k: off[gold[k]]}
    app = create_app(open_run(run), team=True)
    members = {"alice": _member(app, tokens["alice"]), "bob": _member(app, tokens["bob"])}
    assert members["alice"].get("/api/overview").json()["team_agreement"]["n_cells"] == 0
    for n, c in members.items():
        while (page := c.get("/api/sample").json())["sample"]["responses_done"] < page["sample"]["responses"]:
            key = tuple(page[k] for k in CELL)
            r = c.post("/api/verdicts", json={**dict(zip(CELL, key)), "verdict": label[n](key), "sample": "calibration"})
            assert r.status_code == 200, r.text
    t = members["alice"].get("/api/overview").json()["team_agreement"]
    overlap = {r for r, who in load(run).responses.items() if len(who) == 2}
    cells = sorted(k for k in _on_disk(run) if (k[1], k[2], k[0]) in overlap)
    assert t["overlap_responses"] == len(overlap) and t["n_cells"] == len(cells) == t["disagreements"] > 0
    data = [[VERDICTS.index(label[n](k)) for k in cells] for n in ("alice", "bob")]
    for level in ("nominal", "ordinal"):
        assert t["krippendorff_alpha"][level] == pytest.approx(
            krippendorff.alpha(reliability_data=data, level_of_measurement=level, value_domain=range(4)))
    assert max(k for k in t["judge_vs_people"].values() if k is not None) > t["people_kappa"]
    assert t["warning"] and "noisier party" in t["warning"]
    # The corrected scores beside it are `score --correct-with`'s from the same files, to full
    # precision: the team's rule (the first-assigned person's labels) on both paths.
    from gamut_local.rundir.layout import verdict_files
    from tests.support.sample_run import SAMPLE

    out = tmp_path / "scores.json"
    r = gamut("score", *verdict_files(run), "--out", out, "--dataset", SAMPLE / "questions.jsonl",
              "--correct-with", "human-*", "--sample", run / "samples" / "calibration.json")
    assert r.exit_code == 0, r.output
    want = {(m["judge"], m["model"], m["variant"]): m["corrected"] for m in json.loads(out.read_text())["models"]
            if m["corrected"] is not None}
    (board,) = members["alice"].get("/api/overview").json()["corrected"]
    got = {(j, x["model"], x["variant"]): x for j, rows in board["judges"].items() for x in rows}
    assert set(got) == set(want) and got
    for key, row in got.items():
        assert {k: v for k, v in row.items() if k not in ("model", "variant")} == \
            {k: want[key][k] for k in row if k not in ("model", "variant")}, key
    page = members["alice"].get("/").text
    assert page.index("Corrected leaderboard") < page.index("Agreement between people") and 'id="team-warning"' in page
