"""The viewer's leaderboard marks a system scored on fewer questions than expected."""

from __future__ import annotations

import json

from gamut_local.rundir.layout import scores_path, verdict_files
from gamut_local.rundir.store import write_jsonl
from tests.support.sample_run import SAMPLE, SYNTHETIC_JUDGE, build_sample_run


def test_an_incomplete_system_is_marked(tmp_path, gamut, client_for):
    run = build_sample_run(tmp_path / "run", seed=0)
    path = run / "verdicts" / SYNTHETIC_JUDGE / "reference-omissive.multimodal.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line]
    last = max(r["question_id"] for r in rows)
    write_jsonl(path, [r for r in rows if r["question_id"] != last])  # one question never judged
    res = gamut("score", *verdict_files(run), "--dataset", SAMPLE / "questions.jsonl", "--out", scores_path(run),
                "--allow-incomplete")
    assert res.exit_code == 0, res.output
    client = client_for(run)
    board = client.get("/api/overview").json()["leaderboard"]
    marks = {(j, r["model"]): (r["complete"], r["n_complete_responses"], r["n_questions"])
             for j, rs in board.items() for r in rs}
    assert marks[(SYNTHETIC_JUDGE, "reference-omissive")] == (False, 12, 13)
    assert [k for k, (complete, *_) in marks.items() if not complete] == [(SYNTHETIC_JUDGE, "reference-omissive")]
    html = client.get("/").text
    assert html.count("incomplete: 12 of 13 questions") == 1 and 'class="incomplete"' in html
