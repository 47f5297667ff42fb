"""`report` on run directories holding only verdict files: what it writes and what it names as missing."""

import csv
import json

import numpy as np
import pytest
from PIL import Image

from gamut_local.analysis.comparisons import variant_comparison
from gamut_local.errors import InputError
from gamut_local.rundir.store import write_json, write_jsonl
from gamut_local.stages.compare import compare_scores_file
from gamut_local.stages.report import write_report
from tests.support.scoring import score_records
from tests.support.synthetic import make_records

DOMAINS = ("food", "plants", "animals")


def _write_run(root, records, *, dataset=True):
    for judge in sorted({r["judge"] for r in records}):
        for model, variant in sorted({(r["model"], r["variant"]) for r in records}):
            rows = [r for r in records if (r["judge"], r["model"], r["variant"]) == (judge, model, variant)]
            if rows:
                write_jsonl(root / "verdicts" / judge / f"{model}.{variant}.jsonl", rows)
    if dataset:
        qids = sorted({r["question_id"] for r in records})
        checks = sorted({(r["check_id"], r["tier"]) for r in records})
        write_jsonl(root / "dataset.jsonl", [{
            "question_id": q, "domain": DOMAINS[i % 3], "question": "What is this?",
            "checks": [{"check_id": c, "text": "It says so.", "tier": t, "kind": "simple",
                        "source_item": "i0", "evidence": []} for c, t in checks]}
            for i, q in enumerate(qids)])
        write_json(root / "manifest.json", {"config": {"dataset": "dataset.jsonl"}})
    return root


def _csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    records = make_records(seed=11, models=("m1", "m2", "m3", "m4"),
                           variants=("multimodal", "text_only"), questions=24)
    root = _write_run(tmp_path_factory.mktemp("run"), records)
    return root, records, write_report(root)


def test_full_run_writes_every_file(full_run):
    root, _, report = full_run
    assert report == root / "report.md"
    for name in ("leaderboard", "tiers", "verdicts", "domains", "judge_scatter", "confusion", "variants"):
        png = root / "figures" / f"{name}.png"
        with Image.open(png) as im:
            assert im.format == "PNG" and im.width > 300 and im.height > 200
        assert f"figures/{name}.png" in report.read_text()
    for name in ("leaderboard.csv", "tiers.csv", "verdicts.csv", "neighbours.csv", "domains.csv",
                 "judge_scores.csv", "variants.csv", "variants.json", "agreement.json", "report.json"):
        assert (root / "tables" / name).stat().st_size > 0
    text = report.read_text()
    assert "Nothing: every section was computed." in text
    assert "Krippendorff's alpha across all judges" in text and "Calibration against human" in text


def test_leaderboard_matches_score_module(full_run):
    root, records, _ = full_run
    scored = score_records(records)
    expected = {(m["judge"], m["model"], m["variant"]): m for m in scored["models"]}
    rows = _csv(root / "tables" / "leaderboard.csv")
    assert len(rows) == len(expected) == 3 * 8
    for r in rows:
        m = expected[(r["judge"], r["model"], r["variant"])]
        assert float(r["gamut_score"]) == m["gamut_score"]
        assert [float(r["ci95_low"]), float(r["ci95_high"])] == m["ci95"]
    for judge in ("gold", "judge-a", "judge-b"):
        ranks = [r for r in rows if r["judge"] == judge]
        scores = [float(r["gamut_score"]) for r in ranks]
        assert scores == sorted(scores, reverse=True)
        assert [int(r["rank"]) for r in ranks] == list(range(1, 9))


def test_neighbour_paired_bootstrap(full_run):
    root, _, _ = full_run
    rows = _csv(root / "tables" / "neighbours.csv")
    board = _csv(root / "tables" / "leaderboard.csv")
    for judge in ("gold", "judge-a", "judge-b"):
        mine = [r for r in rows if r["judge"] == judge]
        order = [b["label"] for b in board if b["judge"] == judge]
        assert [(r["higher"], r["lower"]) for r in mine] == list(zip(order[:-1], order[1:]))
        for r in mine:
            lo, hi = float(r["ci95_low"]), float(r["ci95_high"])
            assert lo <= float(r["diff"]) + 0.01 and float(r["diff"]) - 0.01 <= hi
            assert r["distinguishable"] == str(lo > 0 or hi < 0)
    # m1 is far better than m4 in the synthetic data, so some neighbour gap is not all noise.
    assert any(r["distinguishable"] == "True" for r in rows)


def test_variant_comparison_table(full_run):
    root, records, _ = full_run
    variants = json.loads((root / "tables" / "variants.json").read_text())
    gold = {(m["model"], m["variant"]): m["gamut_score"]
            for m in score_records([r for r in records if r["judge"] == "gold"])["models"]}
    g = variants["gold"]
    assert g["n_models"] == 4
    for m in g["models"]:
        assert m["gain"] == pytest.approx(gold[(m["model"], "text_only")] - gold[(m["model"], "multimodal")], abs=0.02)
    from scipy import stats as sps
    mm = [m["multimodal"] for m in g["models"]]
    gain = [m["gain"] for m in g["models"]]
    assert g["pearson_r_multimodal_gain"] == pytest.approx(sps.pearsonr(mm, gain).statistic, abs=0.02)


def test_verdict_only_run_with_one_judge_names_what_is_missing(tmp_path):
    records = make_records(seed=12, judges=(("qwen", 0.9),), questions=8)
    _write_run(tmp_path, records, dataset=False)
    text = write_report(tmp_path).read_text()
    missing = text.split("## What this report could not compute")[1]
    assert "one judge (`qwen`)" in missing
    assert "no manifest.json" in missing
    assert "no model was scored in both variants" in missing
    assert not (tmp_path / "figures" / "confusion.png").exists()
    assert not (tmp_path / "figures" / "domains.png").exists()
    assert not (tmp_path / "tables" / "agreement.json").exists()
    assert (tmp_path / "figures" / "leaderboard.png").exists()
    assert (tmp_path / "figures" / "verdicts.png").exists()


def test_dataset_option_and_model_missing_for_one_judge(tmp_path):
    records = make_records(seed=13, judges=(("a", 0.9), ("b", 0.7)), questions=9)
    records = [r for r in records if not (r["judge"] == "b" and r["model"] == "m-tiny")]
    _write_run(tmp_path, records)
    (tmp_path / "manifest.json").unlink()
    text = write_report(tmp_path, tmp_path / "dataset.jsonl").read_text()
    assert "Judge `b` graded no response of m-tiny; left out of its leaderboard." in text
    assert "m-tiny/multimodal" in text  # left out of the rank statistics, with the reason
    domains = _csv(tmp_path / "tables" / "domains.csv")
    assert {d["domain"] for d in domains} == set(DOMAINS)
    assert "gold" in text.split("## What this report could not compute")[1]


def test_the_report_is_titled_after_the_run_not_its_folder(tmp_path):
    # A run whose output_dir is `runs` was titled "runs" (the folder), not the run's name.
    records = make_records(seed=14, judges=(("a", 0.9),), questions=4)
    run_dir = _write_run(tmp_path / "runs", records, dataset=False)
    write_json(run_dir / "manifest.json", {"config": {"name": "my-bench", "dataset": "none.jsonl"}})
    assert write_report(run_dir).read_text().startswith("# GAMUT report: `my-bench`")
    (run_dir / "manifest.json").unlink()  # a run directory made by hand: its folder names it
    assert write_report(run_dir).read_text().startswith("# GAMUT report: `runs`")


def test_report_errors(gamut, tmp_path):
    with pytest.raises(InputError, match="no verdict files"):
        write_report(tmp_path)
    res = gamut("report", str(tmp_path / "nowhere"))
    assert res.exit_code == 1 and "run directory not found" in res.output
    _write_run(tmp_path, make_records(seed=14, judges=(("a", 1.0),), questions=3), dataset=False)
    (tmp_path / "manifest.json").write_text("{not json")
    res = gamut("report", str(tmp_path))
    assert res.exit_code == 1 and "manifest.json" in res.output and "Traceback" not in res.output


def test_report_cli(gamut, tmp_path):
    _write_run(tmp_path, make_records(seed=15, questions=6))
    res = gamut("report", str(tmp_path))
    assert res.exit_code == 0, res.output
    assert (tmp_path / "report.md").exists()


def test_variant_comparison_degenerate_and_compare_cli(gamut, tmp_path):
    none = variant_comparison([("a", "multimodal"), ("b", "multimodal")], [10.0, 20.0])
    assert none["n_models"] == 0 and none["pearson_r_multimodal_gain"] is None
    one = variant_comparison([("a", "multimodal"), ("a", "text_only"), ("b", "multimodal")],
                             [10.0, 15.0, np.nan])
    assert one["n_models"] == 1 and one["mean_gain"] == 5.0
    assert "at least 2" in one["notes"]["kendall_tau_b_rankings"]
    constant_gain = variant_comparison([("a", "multimodal"), ("a", "text_only"),
                                        ("b", "multimodal"), ("b", "text_only")], [10, 15, 20, 25])
    assert constant_gain["pearson_r_multimodal_gain"] is None
    assert constant_gain["kendall_tau_b_rankings"] == 1.0

    records = make_records(seed=16, judges=(("a", 0.9),), variants=("multimodal", "text_only"), questions=6)
    scores = tmp_path / "scores.json"
    write_json(scores, score_records(records, n_boot=20))
    assert compare_scores_file(scores).judges["a"].n_models == 4
    res = gamut("compare", str(scores), "--out", str(tmp_path / "cmp.json"))
    assert res.exit_code == 0, res.output
    assert "mean gain" in res.output and json.loads((tmp_path / "cmp.json").read_text())["a"]["n_models"] == 4
    (tmp_path / "bad.json").write_text('{"models": [{"judge": "a"}]}')
    res = gamut("compare", str(tmp_path / "bad.json"))
    assert res.exit_code == 1 and "models.0: missing model, variant, gamut_score" in res.output


def test_manifest_extra_verdicts_are_read_like_the_run_command_does(tmp_path):
    records = make_records(seed=17, judges=(("gold", 1.0), ("small-judge", 0.6)), questions=6)
    run = _write_run(tmp_path / "run", [r for r in records if r["judge"] == "small-judge"])
    gold = tmp_path / "elsewhere" / "gold.jsonl"
    write_jsonl(gold, [r for r in records if r["judge"] == "gold"])
    write_json(run / "manifest.json", {"config": {
        "dataset": str((run / "dataset.jsonl").resolve()),
        "extra_verdicts": [str(gold.resolve()), str(tmp_path / "gone.jsonl")]}})
    with pytest.raises(InputError) as e:  # a judge left out unasked would skew the report
        write_report(run)
    ((problem,),) = [e.value.problems]
    assert (problem.file, problem.field) == (str(run / "manifest.json"), "config.extra_verdicts.1")
    assert not (run / "report.md").exists()
    warned = []
    text = write_report(run, allow_missing=True, warn=warned.append).read_text()
    assert "Calibration against human (`gold`) verdicts" in text
    assert f"extra verdict file {tmp_path / 'gone.jsonl'}, which is not readable" in text
    assert text.startswith("> **Warning:** ") and len(warned) == 1 and "gone.jsonl" in warned[0]
    agreement = json.loads((run / "tables" / "agreement.json").read_text())
    assert agreement["judges"] == ["gold", "small-judge"] and "small-judge" in agreement["vs_gold"]


def _mtimes(root):
    return {p.relative_to(root): p.stat().st_mtime_ns
            for sub in ("scores", "figures") for p in (root / sub).iterdir()}


def test_report_reuses_current_scores_and_agreement(tmp_path, monkeypatch):
    import gamut_local.stages.report as report_stage

    records = make_records(seed=18, judges=(("gold", 1.0), ("judge-a", 0.7)), questions=8)
    root = _write_run(tmp_path, records)
    write_report(root)
    first = _mtimes(root)
    assert {"scores/scores.json", "scores/scores.responses.parquet", "scores/agreement.json"} <= \
        {str(p) for p in first if p.parts[0] == "scores"}
    board = (root / "tables" / "leaderboard.csv").read_text()

    def no_reading(*args, **kwargs):
        raise AssertionError("read the verdicts although scores and agreement are current")
    monkeypatch.setattr(report_stage, "read_verdicts_and_dataset", no_reading)
    write_report(root)
    again = _mtimes(root)
    assert {p: t for p, t in again.items() if p.parts[0] == "scores"} == \
        {p: t for p, t in first.items() if p.parts[0] == "scores"}  # nothing recomputed
    assert (root / "tables" / "leaderboard.csv").read_text() == board
    monkeypatch.undo()

    # A changed verdict file: same size and mtime would be trusted, so change the content.
    path = root / "verdicts" / "judge-a" / "m-large.multimodal.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    for r in rows:
        r["verdict"] = "contradicts"
    write_jsonl(path, rows)
    write_report(root)
    scores = json.loads((root / "scores" / "scores.json").read_text())
    large = next(m for m in scores["models"] if (m["judge"], m["model"]) == ("judge-a", "m-large"))
    assert large["gamut_score"] == -100.0
    assert (root / "tables" / "leaderboard.csv").read_text() != board


def _damage(scores_dir, how):
    """Spoil a run's per-response file (or scores.json's name for it) in one way."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path, doc = scores_dir / "scores.responses.parquet", scores_dir / "scores.json"
    table = pq.ParquetFile(path).read()
    column = table.column_names.index("score")
    if how == "not_parquet":
        path.write_text("garbage")
    elif how == "other_columns":
        pq.write_table(pa.table({"x": [1, 2]}), path)
    elif how == "rows_dropped":
        pq.write_table(table.slice(0, 3), path)
    elif how == "scores_nan":
        pq.write_table(table.set_column(column, "score", pa.array(np.full(len(table), np.nan))), path)
    elif how == "score_a_string":
        pq.write_table(table.set_column(column, "score", table["score"].cast(pa.string())), path)
    elif how == "one_score_edited":
        scores = table["score"].to_numpy().copy()
        scores[0] = scores[0] / 2 + 0.25
        pq.write_table(table.set_column(column, "score", pa.array(scores)), path)
    else:  # the name scores.json gives for its per-response file
        record = json.loads(doc.read_text())
        record["responses_file"] = {"name_escapes": "../../etc/passwd", "name_of_another_file": "agreement.json"}[how]
        doc.write_text(json.dumps(record))


@pytest.mark.parametrize("how", ["not_parquet", "other_columns", "rows_dropped", "scores_nan", "score_a_string",
                                 "one_score_edited", "name_escapes", "name_of_another_file"])
def test_a_damaged_per_response_file_is_not_current(tmp_path, how):
    """The report trusts scores/ only while it is what score wrote: a damaged or hand-edited
    per-response file is computed again from the verdicts, never read as the scores (or a crash)."""
    records = make_records(seed=23, judges=(("gold", 1.0), ("judge-a", 0.7)), questions=6)
    root = _write_run(tmp_path, records)
    write_report(root)
    written = {name: (root / "scores" / name).read_bytes() for name in ("scores.json", "scores.responses.parquet")}
    board = (root / "tables" / "leaderboard.csv").read_text()
    _damage(root / "scores", how)
    write_report(root)
    assert {name: (root / "scores" / name).read_bytes() for name in written} == written
    assert (root / "tables" / "leaderboard.csv").read_text() == board


def test_report_reads_what_score_wrote(gamut, tmp_path, monkeypatch):
    import gamut_local.stages.report as report_stage

    records = make_records(seed=19, judges=(("judge-a", 0.9),), questions=7)
    root = _write_run(tmp_path, records)
    files = sorted(str(p) for p in (root / "verdicts").glob("*/*.jsonl"))
    res = gamut("score", *files, "--out", root / "scores" / "scores.json", "--dataset", root / "dataset.jsonl")
    assert res.exit_code == 0, res.output
    monkeypatch.setattr(report_stage, "read_verdicts_and_dataset", lambda *a, **k: pytest.fail("re-read the verdicts"))
    write_report(root)
    board = _csv(root / "tables" / "leaderboard.csv")
    want = {(m["model"], m["variant"]): m["gamut_score"] for m in score_records(records)["models"]}
    assert {(r["model"], r["variant"]): float(r["gamut_score"]) for r in board} == want
    # A different seed is not the same scores: computed again.
    with pytest.raises(pytest.fail.Exception):
        write_report(root, seed=1)


def test_data_files_keep_full_precision(full_run):
    root, records, _ = full_run
    exact = {(m["judge"], m["model"], m["variant"]): m["gamut_score"] for m in score_records(records)["models"]}
    for r in _csv(root / "tables" / "leaderboard.csv"):
        assert float(r["gamut_score"]) == exact[(r["judge"], r["model"], r["variant"])]
    report = json.loads((root / "tables" / "report.json").read_text())
    assert report["schema_version"] == 2 and len(report["inputs"]) == len(list((root / "verdicts").glob("*/*")))
    alpha = json.loads((root / "scores" / "agreement.json").read_text())["krippendorff_alpha"]["ordinal"]
    assert len(repr(alpha).split(".")[-1]) > 6  # not the 4 or 6 decimals of before
    text = (root / "report.md").read_text()
    assert f"{alpha:.3f}" in text and repr(alpha) not in text  # rounded only for people


def test_a_report_never_imports_pandas(tmp_path):
    """pandas costs 0.3 s to import, and pyarrow pulls it in on some paths (`read_table`)."""
    import subprocess
    import sys

    records = make_records(seed=19, judges=(("gold", 1.0), ("judge-a", 0.7)), questions=6)
    root = _write_run(tmp_path, records)
    code = ("import sys; from gamut_local.stages.report import write_report; "
            "write_report(sys.argv[1]); write_report(sys.argv[1]); print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"
    assert (root / "scores" / "scores.responses.parquet").is_file()



def test_a_fresh_report_reads_its_dataset_and_answers_in_processes_of_their_own(tmp_path):
    """The drawing workers start once the verdicts are read: before it, their pool's thread made
    `rubric.workers.beside` take threads, where validating the dataset and hashing the answers
    took turns with the verdict read."""
    import subprocess
    import sys

    from tests.support.sample_run import build_sample_run

    root = build_sample_run(tmp_path / "run")  # two judges, the dataset and the answers
    code = """
import sys, threading
from gamut_local.rubric import workers
from gamut_local.stages.report import write_report
workers.cores = lambda: 2
real, seen = workers.beside, []
def spy(*calls):
    seen.append((threading.active_count(), len(calls)))
    return real(*calls)
workers.beside = spy
write_report(sys.argv[1], allow_incomplete=True)
print(seen)
"""
    out = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0:2] == ["[(1,", "2)]"]  # one read, of both inputs, where no other thread ran
    assert any((root / "figures").glob("*.png"))  # and the workers drew the figures


@pytest.mark.parametrize("gone", [(), ("scores.json",), ("agreement.json",), ("scores.json", "agreement.json")])
def test_a_report_reads_the_verdicts_once_for_what_is_not_current(tmp_path, monkeypatch, gone):
    """What score and agree wrote is read where current; what is missing is computed, scores
    and agreement from one read of the verdicts (the slow part at paper scale)."""
    import gamut_local.stages.report as report_stage

    records = make_records(seed=25, judges=(("gold", 1.0), ("judge-a", 0.7)), questions=6)
    root = _write_run(tmp_path, records)
    write_report(root)
    board = (root / "tables" / "leaderboard.csv").read_text()
    for name in gone:
        (root / "scores" / name).unlink()
    reads = []
    real = report_stage.read_verdicts_and_dataset
    monkeypatch.setattr(report_stage, "read_verdicts_and_dataset", lambda *a, **k: reads.append(1) or real(*a, **k))
    write_report(root)
    assert len(reads) == (1 if gone else 0)
    assert all((root / "scores" / name).is_file() for name in ("scores.json", "agreement.json"))
    assert (root / "tables" / "leaderboard.csv").read_text() == board
