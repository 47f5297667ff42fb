"""scripts/bench_analysis.py measures what it says: its run directory holds verdict files the
judge stage could have written, and its DuckDB SQL computes the very GAMUT scores `score`
writes (else the ratios would compare different work). Not timed."""

import importlib.util
import json
from pathlib import Path

import pytest

from gamut_local.data.verdict_table import read_verdicts, read_verdicts_reference
from gamut_local.stages.score import write_scores

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_analysis.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_analysis", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def run(bench, tmp_path_factory):
    root = tmp_path_factory.mktemp("bench-run")
    built = bench.build_run(root, questions=23, checks=7, models=3, variants=2, judges=3, seed=4)
    return root, built, sorted((root / "verdicts").glob("*/*.jsonl"))


def test_the_run_is_paper_shaped_and_valid(run):
    root, built, files = run
    assert built["verdicts"] == 23 * 7 * 3 * 2 * 3 and len(files) == 3 * 3 * 2
    table = read_verdicts(files)
    assert len(table) == built["verdicts"] and table.judges == ["gold", "judge-1", "judge-2"]
    assert len(read_verdicts_reference(files)) == len(table)  # every record passes the reference
    assert (table.verdict == 4).any() and not (table.verdict[table.judge == 0] == 4).any()


@pytest.mark.parametrize("reader", ["duckdb_sql_score_auto", "duckdb_sql_score_columns"])
def test_duckdb_sql_computes_the_same_scores(bench, run, tmp_path, reader):
    duckdb = pytest.importorskip("duckdb")
    root, _, files = run
    doc = write_scores(tmp_path / "scores.json", files)
    ours = {(m.judge, m.model, m.variant): m.gamut_score for m in doc.models}
    sql = bench.GAMUT_SQL.replace("READER", bench.DUCKDB_READERS[reader])
    theirs = {r[:3]: r[3] for r in duckdb.connect().execute(sql, [[str(f) for f in files]]).fetchall()}
    assert theirs == pytest.approx(ours, abs=1e-9)
    assert json.loads((tmp_path / "scores.json").read_text())["schema_version"] == 2


@pytest.mark.parametrize("state", ["cold", "warm"])
def test_the_timed_commands_run_as_a_user_runs_them(bench, run, state):
    """Each command succeeds (timed_process raises otherwise); warm starts from the columns
    the judge stage would have cached, cold from an empty cache."""
    root, _, files = run
    out = bench.time_commands(root, [str(f) for f in files], state)
    assert set(out) == {"score", "agree", "report_fresh", "report_current"}
    assert all(r["seconds"] > 0 and r["peak_rss_mb"] > 0 for r in out.values())
    cached = list((root / f"cache-{state}" / "verdict-tables").glob("v*/*.arrow"))
    assert len(cached) == (len(files) if state == "warm" else 0)  # cold: emptied before each command
    assert (root / "report.md").is_file() and (root / "scores" / "agreement.json").is_file()


def test_one_file_per_judge_holds_the_same_verdicts(bench, run, tmp_path):
    _, built, files = run
    bench.build_run(tmp_path, questions=23, checks=7, models=3, variants=2, judges=3, seed=4, one_file_per_judge=True)
    merged = sorted((tmp_path / "verdicts").glob("*/*.jsonl"))
    assert [p.relative_to(tmp_path).as_posix() for p in merged] == [
        f"verdicts/{j}/all.jsonl" for j in ("gold", "judge-1", "judge-2")]
    a, b = (read_verdicts(paths, cache="off") for paths in (files, merged))
    rows = [sorted(zip(t.judge, t.model, t.variant, t.question, t.check, t.verdict)) for t in (a, b)]
    assert len(b) == built["verdicts"] and rows[0] == rows[1]
