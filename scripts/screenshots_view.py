"""Screenshots of `gamut-local view` for docs/viewer.md, taken by Debian's Chromium (headless,
through Playwright) over the sample run that the viewer's tests use (no model needed):

    .venv/bin/python scripts/screenshots_view.py [--out docs]

Writes view-overview.png, view-question.png and view-queue.png.
"""

from __future__ import annotations

import argparse
import tempfile
import sys
from pathlib import Path

from gamut_local.rundir.layout import scores_path, verdict_files
from gamut_local.stages.score import write_scores
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for tests.support
from tests.support.live_server import chromium, live_server
from tests.support.sample_run import build_sample_run
from gamut_local.viewer.app import create_app
from gamut_local.viewer.index import open_run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("docs"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = build_sample_run(Path(tmp) / "sample-view")
        write_scores(scores_path(run), verdict_files(run), seed=0)
        app = create_app(open_run(run), annotator="alice")
        with live_server(app) as url, chromium() as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(url + "/queue?only=disagree&pos=0")
            for key in "31342":  # a few verdicts in, so progress and the overview show them
                with page.expect_navigation():
                    page.keyboard.press(key)
            page.screenshot(path=str(args.out / "view-queue.png"), full_page=True)
            page.goto(url + "/")
            page.screenshot(path=str(args.out / "view-overview.png"), full_page=True)
            page.goto(url + "/question/food-espresso")
            page.wait_for_function("document.getElementById('question-image').complete")
            page.screenshot(path=str(args.out / "view-question.png"),
                            clip={"x": 0, "y": 0, "width": 1280, "height": 1500}, full_page=True)
    for name in ("overview", "question", "queue"):
        print(args.out / f"view-{name}.png")


if __name__ == "__main__":
    main()
