"""The viewer in a real browser: Debian's Chromium, headless, driven by Playwright."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.live_server import CHROMIUM, chromium, live_server

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                 reason=f"{CHROMIUM} is absent (apt-get install chromium; CI installs it)")]


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@pytest.fixture
def served(sample_run):
    from gamut_local.viewer.app import create_app
    from gamut_local.viewer.index import open_run

    with live_server(create_app(open_run(sample_run), annotator="tester")) as url:
        yield url, sample_run


def _cell(page) -> tuple:
    d = page.locator("#cell")
    return tuple(d.get_attribute(f"data-{k}") for k in ("question", "model", "variant", "check"))


def test_annotate_three_cells_with_the_keyboard(browser, served):
    url, run = served
    page = browser.new_page()
    page.goto(f"{url}/questions")
    page.check("#f-disagree")
    page.click("#apply")
    page.wait_for_url("**disagree=1**")
    counts = page.locator("table.questions tbody tr td:nth-child(5)").all_inner_texts()
    assert counts and all(int(n) > 0 for n in counts)
    page.click("#adjudicate")
    page.wait_for_selector("#cell")
    assert page.locator(".judges").count() == 0  # blind by default
    done = {}
    for key, label in (("1", "meets"), ("3", "missing"), ("4", "contradicts")):
        cell = _cell(page)
        pos = int(page.locator("#cell").get_attribute("data-pos"))
        with page.expect_navigation():
            page.keyboard.press(key)
        assert int(page.locator("#cell").get_attribute("data-pos")) == pos + 1
        done[cell] = label
    page.reload()
    assert "3 of" in page.inner_text("#progress")
    for pos, (cell, label) in enumerate(done.items()):
        page.goto(f"{url}/queue?only=disagree&pos={pos}")
        assert _cell(page) == cell
        assert page.inner_text("#mine-verdict") == label
        assert page.locator(f'.choice.chosen[data-label="{label}"]').count() == 1
    on_disk = {}
    for p in (run / "verdicts" / "human-tester").glob("*.jsonl"):
        for line in p.read_text().splitlines():
            r = json.loads(line)
            assert r["judge"] == "human-tester" and p.name == f"{r['model']}.{r['variant']}.jsonl"
            on_disk[(r["question_id"], r["model"], r["variant"], r["check_id"])] = r["verdict"]
    assert on_disk == done
    page.close()


def test_question_page_shows_image_and_rubric_tree(browser, served):
    from gamut_local.data.dataset import load_questions
    from gamut_local.rubric.compiler import checks_for
    from tests.support.sample_run import SAMPLE

    url, _ = served
    q = next(q for q in load_questions(SAMPLE / "questions.jsonl") if q.question_id == "food-espresso")
    page = browser.new_page()
    page.goto(f"{url}/question/food-espresso")
    img = page.locator("#question-image")
    img.wait_for()
    page.wait_for_function("document.getElementById('question-image').complete")
    assert page.evaluate("document.getElementById('question-image').naturalWidth") > 0
    tree = page.locator("#rubric-tree")
    assert tree.locator(".tier").count() == 3
    assert tree.locator(".item").count() == len(q.meta_rubric.items)
    assert tree.locator(".check").count() == len(checks_for(q))
    assert q.question in page.inner_text("body") and q.question_text_only in page.inner_text("body")
    assert page.locator("section.response").count() == 3
    assert page.locator("tr.disagree").count() > 0
    page.close()


def test_read_only_writes_nothing_and_blind_mode_can_be_lifted(browser, sample_run):
    from gamut_local.viewer.app import create_app
    from gamut_local.viewer.index import open_run

    with live_server(create_app(open_run(sample_run), annotator="tester", read_only=True)) as url:
        page = browser.new_page()
        page.goto(f"{url}/queue")
        assert page.locator(".badge", has_text="read-only").count() == 1
        page.keyboard.press("1")
        page.wait_for_function("document.getElementById('status').textContent.includes('writes nothing')")
        assert page.locator(".judges").count() == 0
        page.uncheck('input[name="blind"][type="checkbox"]')
        page.click("text=Apply")
        page.wait_for_url("**blind=0**")
        assert page.locator(".judges .v").count() >= 2  # both judges' verdicts, now shown
        page.close()
    assert not list((sample_run / "verdicts").glob("human-*"))


def test_grade_a_drawn_response_in_the_calibration_queue(browser, sample_run):
    """Keys 1-4 walk one drawn response check by check, blind; the progress moves from "0 of"
    to "1 of" responses; the overview's corrected leaderboard counts the labeled response."""
    from gamut_local.stages.sample import draw_sample
    from gamut_local.viewer.app import create_app
    from gamut_local.viewer.index import open_run

    _, design, _ = draw_sample(sample_run, 1, per="model", seed=3)
    with live_server(create_app(open_run(sample_run), annotator="tester")) as url:
        page = browser.new_page()
        page.goto(f"{url}/")
        page.click("text=Calibration sample")
        page.wait_for_selector("#cell")
        assert "0 of 3 responses graded in full" in page.inner_text("#progress")
        assert page.locator(".judges").count() == 0 and page.locator('input[name="blind"]').count() == 0
        first = _cell(page)[:3]
        assert first == (design.responses[0].question_id, design.responses[0].model, design.responses[0].variant)
        n = int(page.inner_text(".where").split(", check 1 of ")[1].split()[0])
        for k in range(n):
            assert _cell(page)[:3] == first and f"check {k + 1} of {n}" in page.inner_text(".where")
            with page.expect_navigation():
                page.keyboard.press("3" if k % 2 else "1")
        assert "1 of 3 responses graded in full" in page.inner_text("#progress")
        assert page.inner_text("#response-number") == "2 of 3" and _cell(page)[:3] != first
        page.goto(f"{url}/")
        board = page.locator('table.corrected-board[data-judge="synthetic-judge"]')
        assert "1 / 13" in board.inner_text()
        page.close()
    records = [json.loads(x) for p in (sample_run / "verdicts" / "human-tester").glob("*.jsonl")
               for x in p.read_text().splitlines()]
    assert len(records) == n and {r["sample_id"] for r in records} == {design.sample_id}
    assert [r["verdict"] for r in records] == ["missing" if k % 2 else "meets" for k in range(n)]
