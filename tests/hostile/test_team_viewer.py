"""`view --team` as a hostile client meets it: no session, a wrong or revoked token, a session
of another viewer, a body naming another annotator, another Host or Origin. Each is refused
(401/403) and nothing is written under any name but the signed-in annotator's."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

CELL = ("question_id", "model", "variant", "check_id")


@pytest.fixture
def run(tmp_path):
    from gamut_local.stages.sample import draw_sample
    from tests.support.sample_run import build_sample_run

    run = build_sample_run(tmp_path / "run", seed=0)
    draw_sample(run, 2, per="model", seed=1)
    return run


@pytest.fixture
def tokens(run):
    from gamut_local.rundir import annotators

    return {n: annotators.add(run, n) for n in ("alice", "bob")}


def _app(run, host="127.0.0.1", **kw):
    from gamut_local.viewer.app import create_app
    from gamut_local.viewer.index import open_run

    return create_app(open_run(run), team=True, host=host, **kw)


def _client(app, host="127.0.0.1"):
    from starlette.testclient import TestClient

    return TestClient(app, base_url=f"http://{host}:8765", follow_redirects=False)


def _signed_in(app, token, host="127.0.0.1"):
    c = _client(app, host)
    r = c.get("/signin", params={"token": token})
    assert r.status_code == 303 and r.headers["location"] == "/sample", r.text
    return c


def _humans(run) -> list[dict]:
    return [json.loads(x) for p in sorted((run / "verdicts").glob("human-*/*.jsonl")) for x in p.read_text().splitlines()]


def _cell(c) -> dict:
    page = c.get("/api/sample").json()
    return {k: page[k] for k in CELL}


def test_without_a_session_every_page_is_the_sign_in_page_and_nothing_is_written(run, tokens):
    c = _client(_app(run))
    for path in ("/", "/questions", "/queue", "/sample", "/team", "/adjudicate", "/question/food-espresso"):
        r = c.get(path)
        assert r.status_code == 401 and "Sign in" in r.text and "food-espresso" not in r.text, path
    assert c.get("/api/overview").status_code == 401
    r = c.post("/api/verdicts", json={"question_id": "x", "model": "m", "variant": "multimodal", "check_id": "c",
                                      "verdict": "meets"})
    assert r.status_code == 401 and "sign-in link" in r.json()["error"]
    assert c.get("/static/style.css").status_code == 200  # the sign-in page's style
    assert c.get("/signin", params={"token": tokens["alice"][:-2]}).status_code == 403
    assert c.get("/signin").status_code == 403
    assert not _humans(run)


def test_the_session_cookie_is_httponly_strict_and_not_the_token(run, tokens):
    c = _client(_app(run))
    r = c.get("/signin", params={"token": tokens["alice"]})
    cookie = r.headers["set-cookie"]
    flags = {x.strip().lower() for x in cookie.split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/"} <= flags, cookie
    assert tokens["alice"] not in cookie and r.headers["referrer-policy"] == "no-referrer"
    assert c.get("/sample").status_code == 200 and "human-alice" in c.get("/sample").text


@pytest.mark.parametrize("site", ["cross-site", "same-site", " Cross-Site "])
def test_a_sign_in_started_by_another_sites_page_is_refused(run, tokens, site):
    """Login CSRF: a page elsewhere linking to /signin with someone's token signs no one in."""
    c = _client(_app(run))
    r = c.get("/signin", params={"token": tokens["alice"]}, headers={"Sec-Fetch-Site": site})
    assert r.status_code == 403 and "set-cookie" not in r.headers and "another site" in r.text
    assert c.get("/sample").status_code == 401
    r = c.get("/signin", params={"token": tokens["alice"]}, headers={"Sec-Fetch-Site": "none"})
    assert r.status_code == 303 and c.get("/sample").status_code == 200


def test_writes_are_made_as_the_signed_in_annotator_and_a_forged_name_is_refused(run, tokens):
    app = _app(run)
    alice = _signed_in(app, tokens["alice"])
    cell = _cell(alice)
    for forged in ({"annotator": "bob"}, {"judge": "human-bob"}, {"annotator": "alice", "judge": "human-bob"}):
        r = alice.post("/api/verdicts", json={**cell, "verdict": "meets", "sample": "calibration", **forged})
        assert r.status_code == 403 and "signed in as alice" in r.json()["error"], forged
    assert not _humans(run)
    r = alice.post("/api/verdicts", json={**cell, "verdict": "missing", "sample": "calibration", "annotator": "alice"})
    assert r.status_code == 200, r.text
    (rec,) = _humans(run)
    assert rec["judge"] == "human-alice" and rec["verdict"] == "missing"
    assert (run / "verdicts" / "human-alice").is_dir() and not (run / "verdicts" / "human-bob").exists()


def test_a_revoked_annotator_is_refused_at_once(run, tokens):
    from gamut_local.rundir import annotators

    app = _app(run)
    bob = _signed_in(app, tokens["bob"])
    cell = _cell(bob)
    annotators.revoke(run, "bob")
    assert bob.get("/sample").status_code == 401
    r = bob.post("/api/verdicts", json={**cell, "verdict": "meets", "sample": "calibration"})
    assert r.status_code == 401
    assert _client(app).get("/signin", params={"token": tokens["bob"]}).status_code == 403
    assert not _humans(run)
    new = annotators.add(run, "bob")  # a new account: a new token signs in, the old one stays refused
    assert _signed_in(app, new).get("/sample").status_code == 200


def test_a_link_signs_in_once_and_a_new_one_is_given_by_the_owner(run, tokens, gamut):
    """Opened again (forwarded, from the history, by whoever saw it) a used link signs no one in;
    `annotators link` gives a new one, which ends no session already begun."""
    from gamut_local.rundir import annotators

    app = _app(run)
    alice = _signed_in(app, tokens["alice"])
    again = _client(app).get("/signin", params={"token": tokens["alice"]})
    assert again.status_code == 403 and "signs in once" in again.text and "set-cookie" not in again.headers
    assert annotators.verify(run, tokens["alice"]) is None
    account = next(a for a in annotators.list_accounts(run) if a.name == "alice")
    assert account.token_sha256 is None and len(account.sessions) == 1
    assert tokens["alice"] not in (run / "team" / "annotators.json").read_text()
    res = gamut("annotators", "link", run, "alice", "--port", "9001")
    assert res.exit_code == 0 and "signs in once" in res.output, res.output
    new = res.output.strip().splitlines()[-1].split("token=")[1]
    laptop = _signed_in(app, new)
    assert alice.get("/sample").status_code == 200 and laptop.get("/sample").status_code == 200
    unused = annotators.link(run, "bob")  # an unused earlier link stops working when replaced
    assert _client(app).get("/signin", params={"token": tokens["bob"]}).status_code == 403
    assert _signed_in(app, unused).get("/sample").status_code == 200
    res = gamut("annotators", "link", run, "carol")
    assert res.exit_code == 1 and "no active account 'carol'" in res.output and "Traceback" not in res.output
    before = (run / "team" / "annotators.json").read_bytes()
    assert _client(app).get("/signin", params={"token": new}).status_code == 403
    assert (run / "team" / "annotators.json").read_bytes() == before  # a refused sign-in writes nothing


def test_a_session_outlives_its_viewer_and_ends_with_its_account(run, tokens):
    from gamut_local.rundir import annotators

    first = _signed_in(_app(run), tokens["alice"])
    (name, value), = first.cookies.items()
    other = _client(_app(run))  # the viewer restarted: the run keeps the session's hash
    other.cookies.set(name, value)
    assert other.get("/sample").status_code == 200
    annotators.revoke(run, "alice")
    assert other.get("/sample").status_code == 401 and first.get("/sample").status_code == 401
    account = next(a for a in annotators.list_accounts(run) if a.name == "alice")
    assert account.sessions == () and account.token_sha256 is None
    forged = _client(_app(run))
    forged.cookies.set(name, "x" * 43)
    assert forged.get("/sample").status_code == 401


def test_a_session_of_another_run_signs_in_no_one(run, tokens, tmp_path):
    from gamut_local.rundir import annotators
    from tests.support.sample_run import build_sample_run

    first = _signed_in(_app(run), tokens["alice"])
    (name, value), = first.cookies.items()
    run2 = build_sample_run(tmp_path / "run2", seed=0)
    annotators.add(run2, "alice")
    app2 = _app(run2)
    assert app2.state.view.team.cookie != name  # its own cookie name: the two runs' cookies do not collide
    third = _client(app2)
    third.cookies.set(app2.state.view.team.cookie, value)
    assert third.get("/sample").status_code == 401


def test_beyond_loopback_only_in_team_mode_and_only_the_name_it_serves(run, tokens, gamut):
    from gamut_local.errors import InputError
    from gamut_local.viewer.app import create_app
    from gamut_local.viewer.index import open_run

    with pytest.raises(InputError, match="needs --team"):
        create_app(open_run(run), annotator="alice", host="10.1.2.3")
    res = gamut("view", run, "--host", "10.1.2.3", "--annotator", "alice")
    assert res.exit_code == 1 and "needs --team" in res.output and "Traceback" not in res.output
    res = gamut("view", run, "--host", "0.0.0.0", "--team")
    assert res.exit_code == 1 and "every address" in res.output
    app = _app(run, host="10.1.2.3")
    c = _signed_in(app, tokens["alice"], host="10.1.2.3")
    assert c.get("/sample").status_code == 200
    r = _client(app, "127.0.0.1").get("/signin", params={"token": tokens["alice"]})
    assert r.status_code == 403 and "10.1.2.3" in r.text  # rebinding: another name is refused
    cell = _cell(c)
    body = {**cell, "verdict": "meets", "sample": "calibration"}
    for headers in ({"origin": "http://evil.example"}, {"origin": "http://10.1.2.3:9999"},
                    {"sec-fetch-site": "cross-site"}):
        assert c.post("/api/verdicts", json=body, headers=headers).status_code == 403, headers
    assert not _humans(run)
    assert c.post("/api/verdicts", json=body, headers={"origin": "http://10.1.2.3:8765"}).status_code == 200


def test_team_mode_needs_an_account(run):
    from gamut_local.errors import InputError

    with pytest.raises(InputError, match="no active annotator"):
        _app(run)


@pytest.mark.parametrize("path", ["/team?name=nope", "/adjudicate?name=nope", "/adjudicate?pos=-5", "/adjudicate?pos=x",
                                  "/sample?pos=99999", "/sample?pos=abc", "/sample?name=%00", "/api/team?name=",
                                  "/api/adjudicate?pos=1e9", "/team?name=calibration&name=other"])
def test_odd_queries_on_the_team_pages_are_answered_not_a_500(run, tokens, path):
    c = _signed_in(_app(run), tokens["alice"])
    r = c.get(path)
    assert r.status_code in (200, 404), (path, r.status_code, r.text[:200])
    assert not _humans(run)
