"""scripts/bench_view.py builds what it claims (not timed): its paper-shaped run, made small,
opens in the viewer with every verdict line it wrote, and its question page has every cell."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_view.py"


def test_bench_view_run_opens_in_the_viewer(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_view", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    from gamut_local.viewer import pages
    from gamut_local.viewer.index import open_run

    shape = bench.build(tmp_path, 14)
    index = open_run(tmp_path)
    assert len(index.verdicts.code) == shape["verdicts"] and len(index.verdicts.judges) == 3
    assert len(index.answers) == 14 * 28
    page = pages.question_page(index, shape["page_question"])
    assert len(page["responses"]) == 28
    assert all(len(c["verdicts"]) == 3 for r in page["responses"] for c in r["checks"])
    assert len(page["responses"][0]["checks"]) == shape["page_checks"]
