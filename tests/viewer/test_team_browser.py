"""A team in real browsers: Debian's Chromium, headless, driven by Playwright, one browser
context (its own cookies) per annotator, all on one `view --team`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.live_server import CHROMIUM, chromium, live_server

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                 reason=f"{CHROMIUM} is absent (apt-get install chromium; CI installs it)")]
KEYS = {"alice": "1", "bob": "3", "carol": "2"}


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@pytest.fixture
def team(sample_run, assigned_team):
    from gamut_local.viewer.app import create_app
    from gamut_local.viewer.index import open_run

    tokens = assigned_team(sample_run, 2, 0.5)
    with live_server(create_app(open_run(sample_run), team=True)) as url:
        yield url, sample_run, tokens


def _sign_in(browser, url, token):
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{url}/signin?token={token}")
    page.wait_for_selector("#cell")
    assert page.url == f"{url}/sample"  # the token is not left in the address bar
    return context, page


def _left(page) -> int:
    done, total = map(int, re.match(r"(\d+) of (\d+)", page.inner_text("#progress")).groups())
    return total - done


def _press(page, name) -> tuple:
    d = page.locator("#cell")
    cell = tuple(d.get_attribute(f"data-{k}") for k in ("question", "model", "variant", "check"))
    with page.expect_navigation():
        page.keyboard.press(KEYS[name])
    return cell


def _on_disk(run) -> dict:
    out: dict = {}
    for p in (run / "verdicts").glob("human-*/*.jsonl"):
        for line in p.read_text().splitlines():
            r = json.loads(line)
            out.setdefault((r["question_id"], r["model"], r["variant"], r["check_id"]), {})[r["judge"]] = r["verdict"]
    return out


def test_two_annotators_at_once_then_a_third_joins_and_a_revoked_one_is_refused(browser, team, gamut):
    from gamut_local.reporting.team import load

    url, run, tokens = team
    pages = {n: _sign_in(browser, url, t)[1] for n, t in tokens.items()}
    for _ in range(4):  # a keypress each in turn: both at once
        for n, page in pages.items():
            _press(page, n)
    res = gamut("annotators", "add", run, "carol")  # joins mid-way
    assert res.exit_code == 0 and "rebalanced" in res.output, res.output
    link = next(x for x in res.output.splitlines() if x.startswith("http://"))
    pages["carol"] = _sign_in(browser, url, link.split("token=")[1])[1]
    plan = load(run)
    for page in pages.values():
        page.reload()  # the assignment changed: each queue is shown again
    going = set(pages)
    while going:
        for n in sorted(going):
            page = pages[n]
            if _left(page) == 0:
                going.discard(n)
                continue
            qid, model, variant, _ = _press(page, n)
            assert n in plan.responses[(model, variant, qid)], (n, qid, model, variant)
    graded = _on_disk(run)
    twice = {(k[1], k[2], k[0]) for k, who in graded.items() if len(who) > 1}
    assert twice == {r for r, who in plan.responses.items() if len(who) == 2}  # the overlap, and only it
    assert {(k[1], k[2], k[0]) for k in graded} == set(plan.responses)
    assert all(set(who) <= {f"human-{a}" for a in plan.responses[(k[1], k[2], k[0])]} for k, who in graded.items())
    # The team page: each member's progress, the team's.
    pages["alice"].goto(f"{url}/team")
    rows = pages["alice"].locator("#team-progress tbody tr")
    assert rows.count() == 3 and "6 of 6 responses graded by someone" in pages["alice"].inner_text("#team-total")
    # Revoked: bob's open page can no longer write, and every page is the sign-in page.
    assert gamut("annotators", "revoke", run, "bob").exit_code == 0
    bob = pages["bob"]
    bob.goto(f"{url}/sample")
    assert "Sign in" in bob.inner_text("h1") and bob.locator("#cell").count() == 0
    status = bob.evaluate("""async () => (await fetch('/api/verdicts', {method: 'POST',
        headers: {'Content-Type': 'application/json'}, body: '{}'})).status""")
    assert status == 401
    bob.goto(f"{url}/signin?token={tokens['bob']}")
    assert "does not sign anyone in" in bob.inner_text("body")
    assert _on_disk(run) == graded


def test_a_forged_name_is_refused_and_the_cookie_is_out_of_scripts_reach(browser, team):
    url, run, tokens = team
    context, page = _sign_in(browser, url, tokens["alice"])
    (cookie,) = context.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/"
    assert tokens["alice"] not in cookie["value"] and page.evaluate("document.cookie") == ""
    d = page.locator("#cell")
    body = {"question_id": d.get_attribute("data-question"), "model": d.get_attribute("data-model"),
            "variant": d.get_attribute("data-variant"), "check_id": d.get_attribute("data-check"),
            "verdict": "meets", "sample": "calibration"}
    got = page.evaluate("""async body => { const r = await fetch('/api/verdicts', {method: 'POST',
        headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body)});
        return [r.status, (await r.json()).error || ''] }""", {**body, "annotator": "bob"})
    assert got[0] == 403 and "signed in as alice" in got[1]
    assert not _on_disk(run)
    assert page.inner_text("#signed-in") == "human-alice"
    context.close()
    stranger = browser.new_context().new_page()  # no cookie: the sign-in page, no run data
    stranger.goto(f"{url}/queue")
    assert "Sign in" in stranger.inner_text("h1") and stranger.locator("#cell").count() == 0
