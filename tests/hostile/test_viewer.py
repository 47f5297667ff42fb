"""The viewer's HTTP API as a hostile client uses it: bodies that repeat a key,
nest deeply, hold a lone surrogate, are too large, not UTF-8 or of the wrong shape; writes
from another origin; odd query strings and paths on every read route. Each is a 4xx with a
short JSON reason (writes) or a plain refusal, never a 500, and nothing is written."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")


@pytest.fixture
def run(tmp_path):
    from tests.support.sample_run import build_sample_run

    return build_sample_run(tmp_path / "run", seed=0)


@pytest.fixture
def client(run):
    from starlette.testclient import TestClient

    from gamut_local.viewer.app import create_app
    from gamut_local.viewer.index import open_run

    return TestClient(create_app(open_run(run), annotator="ann"), base_url="http://127.0.0.1:8765")


@pytest.fixture
def cell(client) -> dict:
    c = client.get("/api/queue", params={"pos": 0}).json()
    return {k: c[k] for k in ("question_id", "model", "variant", "check_id")} | {"verdict": "meets"}


def _written(run) -> list:
    return list((run / "verdicts").glob("human-*/*.jsonl"))


def _post(client, raw: bytes, **headers):
    return client.post("/api/verdicts", content=raw, headers={"content-type": "application/json", **headers})


def _refused(res, status: int, *words) -> None:
    assert res.status_code == status, (res.status_code, res.text)
    # The host guard answers in plain text (it refuses pages too); the API in JSON.
    reason = res.json()["error"] if res.headers["content-type"] == "application/json" else res.text
    assert "\n" not in reason and len(reason) < 300, reason
    for w in words:
        assert w in reason, reason


def test_a_repeated_key_is_refused(client, cell, run):
    raw = json.dumps(cell)[:-1] + ', "verdict": "contradicts"}'
    _refused(_post(client, raw.encode()), 400, "'verdict' appears twice")
    assert not _written(run)


@pytest.mark.parametrize("where", ["body", "field"])
def test_deep_nesting_is_refused_not_a_500(client, cell, run, where):
    deep = "[" * 5000 + "]" * 5000
    raw = deep if where == "body" else json.dumps(cell)[:-1] + f', "note": {deep}}}'
    _refused(_post(client, raw.encode()), 400, "nested too deeply")
    raw = json.dumps(cell)[:-1] + ', "note": ' + "[" * 500 + "]" * 500 + "}"  # parses, is not a string
    _refused(_post(client, raw.encode()), 400, "note")
    assert not _written(run)


@pytest.mark.parametrize("escape", ["\\ud800", "\\udfff", "a\\ud83d", "\\ude00b"])
def test_a_lone_surrogate_is_refused(client, cell, run, escape):
    raw = json.dumps(cell)[:-1] + f', "note": "{escape}"}}'
    _refused(_post(client, raw.encode()), 400, "lone surrogate")
    assert not _written(run)


def test_a_surrogate_pair_is_text_and_is_written(client, cell, run):
    raw = json.dumps(cell)[:-1] + ', "note": "\\ud83d\\ude00"}'
    res = _post(client, raw.encode())
    assert res.status_code == 200 and res.json()["record"]["note"] == "\U0001f600"


def test_an_oversize_body_is_refused_declared_or_not(client, cell, run):
    big = json.dumps({**cell, "note": "x" * 20000}).encode()
    _refused(_post(client, big), 400, "larger than")

    def chunks():  # no Content-Length: read no further than the bound
        yield big

    _refused(client.post("/api/verdicts", content=chunks(), headers={"content-type": "application/json"}),
             400, "larger than")
    assert not _written(run)


@pytest.mark.parametrize("raw, words", [
    (b"\xff\xfe{}", ["not UTF-8"]),
    (b"", ["not strict JSON"]),
    (b"NaN", ["expected a JSON object"]),
    (b'"a string"', ["expected a JSON object"]),
    (b'{"question_id": "x"} {"a": 1}', ["not strict JSON"]),
])
def test_bodies_that_are_not_one_json_object(client, run, raw, words):
    _refused(_post(client, raw), 400, *words)
    assert not _written(run)


@pytest.mark.parametrize("change, words", [
    ({"extra": 1}, ["unknown field", "'extra'"]),
    ({"verdict": 1}, ["verdict", "non-empty string"]),
    ({"verdict": ["meets"]}, ["verdict"]),
    ({"model": None}, ["model"]),
    ({"question_id": ""}, ["question_id"]),
    ({"note": 5}, ["note", "int"]),
    ({"note": {"a": "b"}}, ["note"]),
    ({"note": "x" * 2001}, ["note", "2000"]),
])
def test_exact_fields_and_types(client, cell, run, change, words):
    _refused(_post(client, json.dumps({**cell, **change}).encode()), 400, *words)
    assert not _written(run)


def test_a_missing_field_is_named(client, cell, run):
    body = {k: v for k, v in cell.items() if k != "check_id"}
    _refused(_post(client, json.dumps(body).encode()), 400, "check_id")
    assert not _written(run)


@pytest.mark.parametrize("headers", [
    {"sec-fetch-site": "cross-site"},
    {"sec-fetch-site": "same-site"},
    {"sec-fetch-site": "Cross-Site"},
    {"origin": "http://127.0.0.1:9999"},  # another app on this machine
    {"origin": "http://localhost:8765"},  # another name of the same port is another origin
    {"origin": "https://127.0.0.1:8765"},
    {"sec-fetch-site": "same-site", "origin": "http://127.0.0.1:8765"},
])
def test_writes_from_another_origin_are_refused(client, cell, run, headers):
    _refused(_post(client, json.dumps(cell).encode(), **headers), 403, "refused")
    assert not _written(run)


def test_writes_from_the_apps_own_page_are_accepted(client, cell, run):
    for headers in ({"sec-fetch-site": "same-origin", "origin": "http://127.0.0.1:8765"}, {}):
        assert _post(client, json.dumps(cell).encode(), **headers).status_code == 200
    assert len(_written(run)) == 1


def test_reads_are_not_refused_for_sec_fetch_site(client):
    # A link followed from elsewhere is a cross-site GET: it reads, and reading writes nothing.
    assert client.get("/", headers={"sec-fetch-site": "cross-site"}).status_code == 200


@pytest.mark.parametrize("url", [
    "/api/queue?pos=99999999999999999999", "/api/queue?pos=-5", "/api/queue?pos=x", "/api/queue?q=nope",
    "/api/queue?q=%ED%A0%80", "/api/queue?only=%00", "/api/questions?offset=1e99", "/api/questions?sort=nope",
    "/api/questions?domain=%ff", "/api/questions?offset=99999999999", "/api/question/%ED%A0%80",
    "/api/question/%00", "/question/" + "a" * 5000, "/image/%2e%2e", "/figure/%ED%A0%80", "/static/%00",
    "/queue?pos=" + "9" * 5000,
])
def test_odd_queries_and_paths_never_give_a_500(client, url):
    res = client.get(url)
    assert res.status_code in (200, 404), (url, res.status_code, res.text[:200])


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH"])
def test_other_methods_are_not_allowed(client, cell, run, method):
    res = client.request(method, "/api/verdicts", content=json.dumps(cell),
                         headers={"content-type": "application/json"})
    assert res.status_code == 405
    assert not _written(run)


def test_a_bug_in_a_handler_is_one_line_not_a_traceback(run, monkeypatch, capsys):
    from starlette.testclient import TestClient

    from gamut_local.viewer import pages
    from gamut_local.viewer.app import create_app
    from gamut_local.viewer.index import open_run

    def broken(*a, **k):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(pages, "overview", broken)
    res = TestClient(create_app(open_run(run)), base_url="http://127.0.0.1:8765").get("/api/overview")
    assert res.status_code == 500 and res.json() == {"error": "internal error: ZeroDivisionError"}
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and "--debug" in err
    debug = TestClient(create_app(open_run(run), debug=True), base_url="http://127.0.0.1:8765")
    with pytest.raises(ZeroDivisionError):  # --debug: the error goes on to Starlette (and its traceback)
        debug.get("/api/overview")


@pytest.fixture(scope="module")
def viewer(tmp_path_factory):
    """One run for every read (reads write nothing)."""
    pytest.importorskip("starlette")
    pytest.importorskip("httpx")
    from starlette.testclient import TestClient

    from tests.support.sample_run import build_sample_run
    from gamut_local.viewer.app import create_app
    from gamut_local.viewer.index import open_run

    root = tmp_path_factory.mktemp("viewer")
    run = build_sample_run(root / "run", seed=0)
    yield TestClient(create_app(open_run(run), annotator="ann"), base_url="http://127.0.0.1:8765")


ODD_READS = [
    "/api/queue?pos=1&pos=x", "/api/queue?pos=%2B3", "/api/queue?pos=%203%20", "/api/queue?pos=3.0",
    "/api/queue?pos=0x10", "/api/queue?pos=1_000", "/api/queue?only=all&pos=999999", "/api/queue?blind=%ff",
    "/api/queue?q=" + "x" * 20000, "/api/queue?q=&pos=0", "/api/queue?only=all&q=%00",
    "/api/questions?offset=-1", "/api/questions?offset=%EF%BC%91", "/api/questions?sort=&offset=1",
    "/api/questions?sort=" + "%ff" * 3000, "/api/questions?model=%00&variant=%00&domain=%00",
    "/api/questions?variant=text_only&variant=multimodal", "/api/questions?disagree=%ED%A0%80",
    "/api/questions?offset=" + "1" * 4301, "/questions?offset=" + "1" * 4301 + "&sort=%3Cscript%3Ealert(1)",
    "/api/question/%2F", "/api/question/..%2F..%2Fetc%2Fpasswd", "/question/%3Cscript%3E",
    "/image/%00", "/image/" + "%ff" * 300, "/figure/..%2Fmanifest.json", "/figure/", "/static/..%2Fapp.py",
    "/static/" + "a" * 5000, "/api/overview?x=" + "%ED%A0%80" * 100,
]


@pytest.mark.parametrize("url", ODD_READS)
def test_more_odd_reads_never_give_a_500(viewer, url):
    res = viewer.get(url)
    assert res.status_code in (200, 404), (url, res.status_code, res.text[:200])
    assert "<script>alert" not in res.text  # a value from the query is escaped wherever a page shows it


def test_a_query_value_is_escaped_in_the_page(viewer):
    res = viewer.get("/questions", params={"sort": "<script>alert(1)</script>", "model": '"><b>x'})
    assert res.status_code == 200
    assert "<script>alert(1)" not in res.text and '"><b>x' not in res.text
