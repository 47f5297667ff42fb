"""Coverage through the commands: a run with one shard's verdicts missing is flagged with the
right counts, every comparison (score, agree, compare, report) is refused, and with
--allow-incomplete it is made on the questions every system has. No model: the sample's gold
verdicts and a seeded synthetic judge (`testing.sample_run`), or synthetic records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gamut_local.analysis.comparisons import variant_comparison
from gamut_local.rundir.layout import Shard, scores_path, verdict_files
from gamut_local.rundir.store import write_json, write_jsonl
from tests.support.scoring import score_records
from tests.support.sample_run import SAMPLE, SYNTHETIC_JUDGE, build_sample_run
from tests.support.synthetic import make_records

DATASET = SAMPLE / "questions.jsonl"
GAP = ("reference-omissive", "multimodal")


def _questions() -> list[str]:
    return [json.loads(line)["question_id"] for line in DATASET.read_text().splitlines() if line]


def _drop_shard(run: Path, judge: str, shard: Shard) -> tuple[list[dict], set[str]]:
    """Remove `judge`'s verdicts of GAP on the shard's questions, as if that job had failed;
    return every record the judge had and the questions removed."""
    path = run / "verdicts" / judge / f"{GAP[0]}.{GAP[1]}.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line]
    gone = shard.select(_questions())
    write_jsonl(path, [r for r in rows if r["question_id"] not in gone])
    return rows, gone


@pytest.fixture
def shard_run(tmp_path):
    run = build_sample_run(tmp_path / "run", seed=0)
    rows, gone = _drop_shard(run, SYNTHETIC_JUDGE, Shard(1, 2))
    return run, rows, gone


def _counts(rows: list[dict], gone: set[str]) -> dict:
    """The row `score` must write for GAP, counted straight from the records."""
    return {"n_questions": 13, "n_expected": len(rows), "n_complete_responses": 13 - len(gone),
            "n_missing_verdicts": sum(r["question_id"] in gone for r in rows), "complete": False}


def test_score_flags_the_failed_shard_and_refuses(shard_run, gamut, tmp_path):
    run, rows, gone = shard_run
    assert len(gone) == 6
    out = tmp_path / "s.json"
    res = gamut("score", *verdict_files(run), "--dataset", DATASET, "--out", out)
    assert res.exit_code == 1 and not out.exists()
    want = _counts(rows, gone)
    assert (f"judge 'synthetic-judge', reference-omissive (multimodal): 7 of 13 questions complete, "
            f"{want['n_missing_verdicts']} of {want['n_expected']} expected verdicts missing") in res.output
    assert "--allow-incomplete" in res.output and "Traceback" not in res.output

    res = gamut("score", *verdict_files(run), "--dataset", DATASET, "--out", out, "--allow-incomplete")
    assert res.exit_code == 0, res.output
    assert "INCOMPLETE: 7/13 questions" in res.output
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == 2 and doc["coverage_from"] == "dataset"
    by = {(m["judge"], m["model"], m["variant"]): m for m in doc["models"]}
    got = by[(SYNTHETIC_JUDGE, *GAP)]
    assert {k: got[k] for k in want} == want
    # Every other system of both judges is complete; gold's checks are the dataset's.
    assert all(m["complete"] and m["n_missing_verdicts"] == 0 for k, m in by.items() if k != (SYNTHETIC_JUDGE, *GAP))
    assert by[("gold", *GAP)]["n_expected"] == len(rows)


def test_report_and_agree_refuse_then_compare_on_the_common_questions(shard_run, gamut, tmp_path):
    run, rows, gone = shard_run
    res = gamut("report", run)
    assert res.exit_code == 1 and "7 of 13 questions complete" in res.output
    assert not (run / "report.md").exists() and not scores_path(run).exists()
    res = gamut("agree", *verdict_files(run), "--out", tmp_path / "a.json")
    assert res.exit_code == 1 and "reference-omissive (multimodal)" in res.output

    res = gamut("report", run, "--allow-incomplete")
    assert res.exit_code == 0, res.output
    tables = json.loads((run / "tables" / "report.json").read_text())
    kept = [q for q in _questions() if q not in gone]
    synthetic = [json.loads(line) for p in (run / "verdicts" / SYNTHETIC_JUDGE).glob("*.jsonl")
                 for line in p.read_text().splitlines() if line]
    # The hand computation: the judge's scores of the kept questions alone.
    alone = {(m["model"], m["variant"]): m["gamut_score"]
             for m in score_records([r for r in synthetic if r["question_id"] in kept], n_boot=10)["models"]}
    board = [r for r in tables["leaderboard"] if r["judge"] == SYNTHETIC_JUDGE]
    assert {(r["model"], r["variant"]): r["gamut_score"] for r in board} == pytest.approx(alone, abs=1e-12)
    assert {r["n_questions"] for r in board} == {7}
    assert [r["complete"] for r in board if (r["model"], r["variant"]) == GAP] == [False]
    assert [r["rank"] for r in board] == [1, 2, 3]
    gold = [r for r in tables["leaderboard"] if r["judge"] == "gold"]
    assert {r["n_questions"] for r in gold} == {13} and all(r["complete"] for r in gold)
    (pair,) = tables["agreement"]["pairs"]
    assert pair["n_questions"] == 7
    md = (run / "report.md").read_text()
    assert "**Incomplete:**" in md and "reference-omissive *" in md and "Pilot" not in md

    res = gamut("agree", *verdict_files(run), "--out", tmp_path / "a.json", "--allow-incomplete")
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "a.json").read_text())["pairs"][0]["n_questions"] == 7

    # Again: the scores are read back from the per-response file, expected grid included.
    first, stamp = (run / "tables" / "leaderboard.csv").read_text(), scores_path(run).stat().st_mtime_ns
    assert gamut("report", run, "--allow-incomplete").exit_code == 0
    assert scores_path(run).stat().st_mtime_ns == stamp
    assert (run / "tables" / "leaderboard.csv").read_text() == first
    res = gamut("report", run)  # still incomplete as read back
    assert res.exit_code == 1 and "7 of 13 questions complete" in res.output


def test_compare_refuses_then_uses_the_common_questions(tmp_path, gamut):
    records = make_records(seed=4, judges=(("j", 0.9),), models=("m1", "m2", "m3"),
                           variants=("multimodal", "text_only"), questions=8)
    lost = [r for r in records if not (r["model"] == "m2" and r["variant"] == "text_only"
                                       and r["question_id"] == "q007" and r["check_id"] in ("c0", "c1"))]
    paths = []
    for (m, v) in sorted({(r["model"], r["variant"]) for r in lost}):
        paths.append(tmp_path / "verdicts" / f"{m}.{v}.jsonl")
        write_jsonl(paths[-1], [r for r in lost if (r["model"], r["variant"]) == (m, v)])
    out = tmp_path / "s.json"
    res = gamut("score", *paths, "--out", out, "--allow-incomplete")
    assert res.exit_code == 0, res.output
    assert "coverage judged without the dataset" in res.output
    res = gamut("compare", out)
    assert res.exit_code == 1 and "judge 'j', m2 (text_only): 7 of 8 questions complete, 2 of 48" in res.output
    res = gamut("compare", out, "--allow-incomplete", "--out", tmp_path / "c.json")
    assert res.exit_code == 0, res.output
    got = json.loads((tmp_path / "c.json").read_text())["j"]
    common = score_records([r for r in records if r["question_id"] != "q007"], n_boot=10)["models"]
    want = variant_comparison([(m["model"], m["variant"]) for m in common], [m["gamut_score"] for m in common])
    assert got["n_questions"] == 7 and "7 of 8 questions" in got["notes"]["coverage"]
    assert [m["model"] for m in got["models"]] == [m["model"] for m in want["models"]]
    for g, w in zip(got["models"], want["models"]):
        assert [g[k] for k in ("multimodal", "text_only", "gain")] == pytest.approx(
            [w[k] for k in ("multimodal", "text_only", "gain")], abs=1e-12)
    assert got["mean_gain"] == pytest.approx(want["mean_gain"], abs=1e-12)


def test_a_pilot_report_says_it_is_a_pilot(tmp_path, gamut):
    run = build_sample_run(tmp_path / "run", seed=1)
    first = Shard(limit=3).select(_questions())
    for p in verdict_files(run):
        rows = [json.loads(line) for line in p.read_text().splitlines() if line]
        write_jsonl(p, [r for r in rows if r["question_id"] in first])
    manifest = json.loads((run / "manifest.json").read_text())
    write_json(run / "manifest.json", {**manifest, "stages": {"judge": {"seconds": 1.0, "result": [], "limit": 3}}})
    res = gamut("report", run)
    assert res.exit_code == 0, res.output
    md = (run / "report.md").read_text()
    assert "**Pilot run** (`--limit 3`)" in md and "**Incomplete:**" in md
    assert json.loads((run / "tables" / "report.json").read_text())["pilot"] == 3
    write_json(run / "manifest.json", manifest)  # the same verdicts, no pilot recorded: refused
    assert gamut("report", run).exit_code == 1
