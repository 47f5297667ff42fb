"""The reading commands (score, score-run, agree, compare, report, validate) on missing,
empty, torn and inconsistent inputs: a message naming the file, never a traceback (class 6),
never a silent score of verdicts the dataset does not back (class 4), and the torn-tail
rule every reader shares (class 3)."""

from __future__ import annotations

import json

import pytest


def test_score_of_a_missing_file(world, expect):
    expect(1, "score", world.root / "nope.jsonl", "--out", world.root / "s.json", named=["nope.jsonl", "file not found"])


def test_validate_of_an_empty_file(world, expect):
    world.dataset.write_text("\n\n")
    expect(1, "validate", world.dataset, named=["data.jsonl", "file is empty"])


def test_agree_given_the_same_file_twice(world, expect):
    v = world.verdicts(world.root / "v.jsonl")
    out = expect(1, "agree", v, v, "--out", world.root / "a.json", named=["v.jsonl:1", "duplicate"])
    assert not (world.root / "a.json").exists() and "nothing was written" in out


def test_compare_of_a_file_that_is_not_scores(world, expect):
    (world.root / "s.json").write_text(json.dumps([1, 2]))
    expect(1, "compare", world.root / "s.json", named=["s.json", "models"])
    expect(1, "compare", world.root / "gone.json", named=["gone.json", "file not found"])


def test_score_run_without_verdicts(world, expect):
    expect(1, "score-run", "--config", world.config(), named=["verdicts", "run judge first"])


def test_report_of_a_missing_run_directory(world, expect):
    expect(1, "report", world.root / "nope", named=["nope", "run directory not found"])


def test_limit_below_one_is_refused(world, expect):
    expect(1, "generate", "--config", world.config(), "--limit", "0", named=["--limit"], loads=0)


def _human_file_with_a_torn_tail(world):
    """A person's verdicts (append-only JSONL, the viewer's) with the last append cut short."""
    f = world.verdicts(world.run_dir / "verdicts" / "human-ann" / "cand.text_only.jsonl", judge="human-ann",
                       model="cand", qids=("q1",))
    with open(f, "ab") as fh:
        fh.write(b'{"question_id": "q2", "judge": "hu')
    return f


def test_report_reads_past_a_torn_verdict_line_with_a_note(world, expect):
    cfg = world.config(chunk_size=3)
    expect(0, "run", "--config", cfg, inputs_change=True)
    _human_file_with_a_torn_tail(world)
    expect(0, "report", world.run_dir, named=["note:", "torn last line"], inputs_change=True)
    expect(0, "score-run", "--config", cfg, named=["torn last line"], inputs_change=True)


def test_score_with_dataset_refuses_verdicts_it_does_not_back(world, expect):
    v = world.verdicts(world.root / "v.jsonl", qids=("q1", "q99"))
    rows = [json.loads(line) for line in v.read_text().splitlines()]
    rows[0]["check_id"] = "c9"  # a check q1 does not have
    rows[1]["tier"] = "context"  # c2 is `valuable` in the dataset
    world.write_jsonl(v, rows)
    out = expect(1, "score", v, "--dataset", world.dataset, "--out", world.root / "s.json",
                 named=["v.jsonl:1: check_id", "v.jsonl:2: tier", "v.jsonl:4: question_id", "'q99' is not in the dataset"])
    assert not (world.root / "s.json").exists() and "nothing was written" in out


def test_report_and_agree_refuse_verdicts_the_dataset_does_not_back(world, expect):
    """Every reader given a dataset checks the verdicts against it, not `score` alone: `report`
    once scored a person's verdict on a question the dataset lacks as a question of its own."""
    expect(0, "run", "--config", world.config(chunk_size=3), inputs_change=True)
    human = world.verdicts(world.run_dir / "verdicts" / "human-ann" / "cand.text_only.jsonl", judge="human-ann",
                           model="cand", qids=("q99",))
    named = [f"{human}:1: question_id", "'q99' is not in the dataset"]
    report = (world.run_dir / "report.md").read_bytes()
    expect(1, "report", world.run_dir, named=named)
    assert (world.run_dir / "report.md").read_bytes() == report
    expect(1, "agree", world.run_dir / "verdicts", "--dataset", world.dataset, "--out", world.root / "a.json",
           named=named)
    assert not (world.root / "a.json").exists()


def test_score_refuses_one_judge_under_two_settings(world, expect):
    a = world.verdicts(world.root / "a.jsonl", judge="j", qids=("q1", "q2"), settings_hash="aaaa")
    b = world.verdicts(world.root / "b.jsonl", judge="j", qids=("q3", "q4"), settings_hash="bbbb")
    expect(1, "score", a, b, "--out", world.root / "s.json", named=["b.jsonl:1", "settings_hash", "other settings"])


def test_viewer_index_reads_past_a_torn_verdict_line(world, expect):
    pytest.importorskip("pyarrow")
    from gamut_local.viewer.index import open_run

    expect(0, "run", "--config", world.config(chunk_size=3), inputs_change=True)
    _human_file_with_a_torn_tail(world)
    index = open_run(world.run_dir)
    assert len(index.cells.key) == 12 and len(index.humans["human-ann"]) == 3
