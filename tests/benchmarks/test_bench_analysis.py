"""scripts/bench_analysis.py measures what it says: its run directory holds a verdict store the
judge stage could have written and JSONL with the very same verdicts, and its DuckDB SQL
computes the very GAMUT scores `score` writes, over either (else the ratios would compare
different work). Not timed."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from gamut_local.data.verdict_table import read_verdicts
from tests.reference import read_verdicts_reference
from gamut_local.stages.score import write_scores

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_analysis.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_analysis", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.prime_mb = 0  # the tests time nothing: no memory touched before each process (PRIME_MB)
    return module


@pytest.fixture(scope="module")
def run(bench, tmp_path_factory):
    root = tmp_path_factory.mktemp("bench-run")
    built = bench.build_run(root, questions=23, checks=7, models=3, variants=2, judges=3, seed=4)
    return root, built


def test_the_store_and_the_jsonl_hold_the_same_paper_shaped_verdicts(run):
    root, built = run
    units = sorted((root / "verdicts").glob("*/*.parquet"))
    assert built["verdicts"] == 23 * 7 * 3 * 2 * 3 and len(units) == 3 * 3 * 2
    table = read_verdicts([root / "verdicts"])
    reference = read_verdicts_reference(sorted((root / "jsonl").glob("*/*.jsonl")))
    assert len(table) == built["verdicts"] and table.judges == ["gold", "judge-1", "judge-2"]
    for name in ("judges", "models", "questions", "checks", "judge", "model", "variant", "question", "check",
                 "tier", "verdict", "settings_hashes", "settings_hash", "check_hashes", "check_hash",
                 "answer_hashes", "answer_hash"):
        x, y = getattr(table, name), getattr(reference, name)
        assert (np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y), name
    assert np.array_equal(table.probs, reference.probs, equal_nan=True)
    assert (table.verdict == 4).any() and not (table.verdict[table.judge == 0] == 4).any()


@pytest.mark.parametrize("reader", ["duckdb_parquet", "duckdb_json_auto"])
def test_duckdb_sql_computes_the_same_scores(bench, run, tmp_path, reader):
    duckdb = pytest.importorskip("duckdb")
    root, _ = run
    doc = write_scores(tmp_path / "scores.json", [root / "verdicts"])
    ours = {(m.judge, m.model, m.variant): m.gamut_score for m in doc.models}
    function, pattern = bench.DUCKDB_READERS[reader]
    sql = bench.GAMUT_SQL.replace("READER", function)
    files = sorted(str(p) for p in root.glob(pattern))
    theirs = {r[:3]: r[3] for r in duckdb.connect().execute(sql, [files]).fetchall()}
    assert theirs == pytest.approx(ours, abs=1e-9)
    assert json.loads((tmp_path / "scores.json").read_text())["schema_version"] == 2


def test_duckdb_sql_with_the_dataset_computes_what_score_dataset_writes(bench, run, tmp_path):
    """The comparator for `score --dataset` does its dataset work: verdicts whose check is worded
    otherwise now are left out as stale (by the same check hash), the rest scored per system and
    per domain, and the verdicts the dataset does not back counted (none here)."""
    duckdb = pytest.importorskip("duckdb")
    root, _ = run
    dataset = tmp_path / "dataset.jsonl"
    lines = [json.loads(line) for line in (root / "dataset.jsonl").read_text().splitlines()]
    for q in lines[:5]:  # five questions' first check reworded since they were judged
        q["checks"][0]["text"] = "It says something else."
    dataset.write_text("".join(json.dumps(q) + "\n" for q in lines))
    doc = write_scores(tmp_path / "scores.json", [root / "verdicts"], dataset, allow_incomplete=True)
    assert sum(sum(r.values()) for r in doc.stale_verdicts.values()) == 5 * 3 * 2 * 3
    ours = {(m.judge, m.model, m.variant, None): m.gamut_score for m in doc.models}
    ours |= {(d.judge, d.model, d.variant, d.domain): d.gamut_score for d in doc.domains}
    files = sorted(str(p) for p in root.glob("verdicts/*/*.parquet"))
    rows = duckdb.connect().execute(bench.GAMUT_DATASET_SQL, [str(dataset), files]).fetchall()
    assert {r[:4]: r[4] for r in rows} == pytest.approx(ours, abs=1e-9)
    assert {r[5] for r in rows} == {0}


def test_the_answers_are_the_ones_the_verdicts_graded_and_duckdb_with_them_computes_what_score_run_writes(
        bench, run, tmp_path):
    """The comparator for `score` as `score-run` reads (the dataset and the answers) does that work
    too: as built, no verdict is stale; verdicts on an answer edited since are left out by the
    same answer hash, and the rest scored as `score` scores them."""
    duckdb = pytest.importorskip("duckdb")
    root, _ = run
    answers = sorted((root / "answers").glob("*.jsonl"))
    assert len(answers) == 3 * 2
    doc = write_scores(tmp_path / "as-built.json", [root / "verdicts"], root / "dataset.jsonl", answers=answers)
    assert doc.stale_verdicts == {}
    edited = tmp_path / answers[0].name
    rows = [json.loads(line) for line in answers[0].read_text().splitlines()]
    for r in rows[:4]:  # four answers edited since they were judged
        r["response"] += " Edited."
    edited.write_text("".join(json.dumps(r) + "\n" for r in rows))
    given = [edited, *answers[1:]]
    doc = write_scores(tmp_path / "scores.json", [root / "verdicts"], root / "dataset.jsonl", answers=given,
                       allow_incomplete=True)
    assert sum(sum(r.values()) for r in doc.stale_verdicts.values()) == 4 * 7 * 3
    ours = {(m.judge, m.model, m.variant, None): m.gamut_score for m in doc.models}
    ours |= {(d.judge, d.model, d.variant, d.domain): d.gamut_score for d in doc.domains}
    files = sorted(str(p) for p in root.glob("verdicts/*/*.parquet"))
    rows = duckdb.connect().execute(bench.GAMUT_RUN_SQL, [str(root / "dataset.jsonl"), list(map(str, given)),
                                                          files]).fetchall()
    assert {r[:4]: r[4] for r in rows} == pytest.approx(ours, abs=1e-9)


def test_the_timed_commands_run_as_a_user_runs_them_and_cache_nothing(bench, run, tmp_path, monkeypatch):
    """Each command succeeds (timed_process raises otherwise) and no cache folder appears."""
    root, _ = run
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    out = bench.time_commands(root)
    assert set(out) == {"score", "score_dataset", "score_no_dataset", "agree", "report_fresh", "report_current",
                        "view_first_page"}
    assert all(r["seconds"] > 0 and r["peak_rss_mb"] > 0 and 0 <= r["system_seconds"] <= r["cpu_seconds"]
               for r in out.values())
    assert (root / "report.md").is_file() and (root / "scores" / "agreement.json").is_file()
    assert not (tmp_path / "xdg" / "gamut-local").exists() and not (tmp_path / "home" / ".cache" / "gamut-local").exists()


def test_the_jsonl_commands_read_the_jsonl_column_wise_and_score_as_the_store(bench, run, tmp_path, monkeypatch):
    """`--jsonl`: the old run's `verdicts/` holds the very JSONL files, whose scores are the
    store's, read with no file going to the strict reader; each timed command succeeds, and the
    ratios and targets come out for each."""
    from gamut_local.data import verdict_table as vt

    root, _ = run
    old = bench.old_run(root)
    assert sorted(p.relative_to(old / "verdicts") for p in old.glob("verdicts/*/*.jsonl")) == \
        sorted(p.relative_to(root / "jsonl") for p in root.glob("jsonl/*/*.jsonl"))
    monkeypatch.setattr(vt, "strict_tables", lambda *_: pytest.fail("read record by record"))
    jsonl = write_scores(tmp_path / "jsonl.json", [old / "verdicts"])
    store = write_scores(tmp_path / "store.json", [root / "verdicts"])
    assert [(m.judge, m.model, m.variant, m.gamut_score) for m in jsonl.models] == \
        [(m.judge, m.model, m.variant, m.gamut_score) for m in store.models]
    monkeypatch.undo()
    out = bench.time_jsonl_commands(root, old)
    assert set(out) == {"score_jsonl", "agree_jsonl", "import_jsonl", "report_jsonl_fresh"}
    # Each command's read of the JSONL is timed inside it, and is part of its whole time.
    assert all(0 < r["read_phase"]["seconds"] < r["seconds"] and r["read_phase"]["cpu_seconds"] > 0 for r in out.values())
    assert (old / "report.md").is_file() and not (root.parent / f"{root.name}-outputs").exists()
    same = {"seconds": 1.0, "cpu_seconds": 1.0}
    results = {"duckdb_json_auto": same, "duckdb_json_to_store": same, "duckdb_json_with_dataset_and_answers": same,
               "gamut_local": out}
    bench.jsonl_targets(results)
    assert all({"ratio_to_duckdb_json_auto", "meets_target", "read_meets_target"} <= set(r) for r in out.values())
    assert all(r["read_phase"]["ratio_to_duckdb_json_auto"] == round(r["read_phase"]["seconds"], 2) for r in out.values())
    assert {"ratio_to_duckdb_json_to_store", "meets_target_against_the_same_work"} <= set(out["import_jsonl"])
    assert "ratio_to_duckdb_json_with_dataset_and_answers" in out["report_jsonl_fresh"]


def test_duckdb_over_the_jsonl_with_the_dataset_and_answers_computes_what_the_old_runs_report_reads(bench, run, tmp_path):
    """The comparator for a fresh `report` of the old run reads what it reads: the JSONL, the
    dataset and the answers, each verdict looked up in them; its scores are `score`'s of them."""
    import subprocess
    import sys

    root, _ = run
    answers = sorted((root / "answers").glob("*.jsonl"))
    jsonl = sorted(str(p) for p in root.glob("jsonl/*/*.jsonl"))
    doc = write_scores(tmp_path / "scores.json", [root / "jsonl"], root / "dataset.jsonl", answers=answers)
    ours = {(m.judge, m.model, m.variant, None): m.gamut_score for m in doc.models}
    ours |= {(d.judge, d.model, d.variant, d.domain): d.gamut_score for d in doc.domains}
    script = bench.DUCKDB_DATASET_SCRIPT.replace("print(len(", "print(json.dumps(")
    res = subprocess.run([sys.executable, "-c", script, str(root / "dataset.jsonl"), json.dumps(list(map(str, answers))),
                          *jsonl], capture_output=True, text=True, check=True, timeout=300)
    rows = json.loads(res.stdout)
    assert {tuple(r[:4]): r[4] for r in rows} == pytest.approx(ours, abs=1e-9)


def test_duckdbs_import_comparator_writes_each_verdict_once_in_a_file_per_unit(bench, run, tmp_path):
    """The comparator for `verdicts import` writes what import writes: every JSONL verdict, once,
    in Parquet files per (judge, model, variant); and the reader's script reads them all."""
    import subprocess
    import sys

    duckdb = pytest.importorskip("duckdb")
    root, built = run
    jsonl = sorted(str(p) for p in root.glob("jsonl/*/*.jsonl"))
    subprocess.run([sys.executable, "-c", bench.DUCKDB_TO_STORE_SCRIPT, str(tmp_path / "out"), *jsonl],
                   check=True, timeout=300)
    written = sorted(tmp_path.glob("out/**/*.parquet"))
    assert len(written) == len(list(root.glob("verdicts/*/*.parquet")))
    counts = duckdb.connect().execute("SELECT count(*), count(DISTINCT (judge, model, variant, question_id, check_id)) "
                                      "FROM read_parquet(?, hive_partitioning = true)", [list(map(str, written))]).fetchone()
    assert counts == (built["verdicts"], built["verdicts"])
    res = subprocess.run([sys.executable, "-c", bench.READER_SCRIPT, *jsonl], capture_output=True, text=True,
                         check=True, timeout=300)
    assert int(res.stdout) == built["verdicts"]


def test_each_figure_is_the_median_of_its_rounds_and_memory_the_largest(bench):
    runs = [{"seconds": s, "cpu_seconds": c, "system_seconds": c / 2, "peak_rss_mb": m}
            for s, c, m in ((3.0, 1.0, 10.0), (1.0, 5.0, 30.0), (2.0, 2.0, 20.0))]
    assert bench.median_of(runs) == {"seconds": 2.0, "cpu_seconds": 2.0, "system_seconds": 1.0, "peak_rss_mb": 30.0,
                                     "rounds": 3}
    for r, read in zip(runs, (0.5, 0.25, 0.75)):
        r["read_phase"] = {"seconds": read, "cpu_seconds": 2 * read}
    assert bench.median_of(runs)["read_phase"] == {"seconds": 0.5, "cpu_seconds": 1.0}


def test_the_primer_touches_the_memory_asked_for_in_a_process_of_its_own(bench, monkeypatch):
    import subprocess

    seen = []
    monkeypatch.setattr(subprocess, "run", lambda argv, check: seen.append(argv))
    monkeypatch.setattr(bench, "prime_mb", 3)
    bench.prime()
    monkeypatch.setattr(bench, "prime_mb", 0)
    bench.prime()
    ((*_, code),) = seen
    assert code == "import numpy; numpy.ones(393216)"  # 3 MB of 8-byte floats, and nothing for 0


def test_no_rounds_is_refused_before_anything_is_built(tmp_path):
    import subprocess
    import sys

    res = subprocess.run([sys.executable, str(SCRIPT), "--rounds", "0", "--dir", str(tmp_path / "run")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "--rounds must be at least 1, not 0" in res.stderr
    assert not (tmp_path / "run").exists()


def test_a_negative_primer_is_refused_before_anything_is_built(tmp_path):
    import subprocess
    import sys

    res = subprocess.run([sys.executable, str(SCRIPT), "--prime-mb", "-1", "--dir", str(tmp_path / "run")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "--prime-mb must be 0 or more, not -1" in res.stderr
    assert not (tmp_path / "run").exists()
