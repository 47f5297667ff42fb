"""The scoring path's output files: full precision against an independent implementation of
the formula, the per-response parquet read back by pyarrow, pandas and DuckDB, and the typed
scores.json (schema_version, inputs with content hashes)."""

import hashlib
import json
from collections import defaultdict

import numpy as np
import pytest

from gamut_local.analysis.outputs import ScoresFile
from gamut_local.analysis.scoring import response_columns, score_table, scores_from_columns
from gamut_local.data.verdict_table import read_verdicts
from gamut_local.data.reading import read_responses
from gamut_local.rundir.store import write_jsonl
from tests.support.synthetic import make_records

WEIGHTS = {"answer_critical": 0.6, "valuable": 0.3, "context": 0.1}


def plain_gamut(records):
    """GAMUT score per (judge, model, variant), written out longhand from the paper."""
    by_response = defaultdict(list)
    for r in records:
        by_response[(r["judge"], r["model"], r["variant"], r["question_id"])].append(r)
    per_system = defaultdict(list)
    for key, rows in by_response.items():
        total = weight = 0.0
        for tier, w in WEIGHTS.items():
            n = defaultdict(int)
            for r in rows:
                if r["tier"] == tier:
                    n["missing" if r["verdict"] == "invalid" else r["verdict"]] += 1
            den = n["meets"] + n["partially_meets"] + n["missing"] + 2 * n["contradicts"]
            if den:
                total += w * (n["meets"] + 0.5 * n["partially_meets"] - 2 * n["contradicts"]) / den
                weight += w
        if weight:
            per_system[key[:3]].append(total / weight)
    return {k: 100 * sum(v) / len(v) for k, v in per_system.items()}


@pytest.fixture(scope="module")
def scored(tmp_path_factory, gamut_cli):
    root = tmp_path_factory.mktemp("scores")
    records = make_records(seed=21, models=("m1", "m2", "m3"), variants=("multimodal", "text_only"), questions=17)
    paths = []
    for judge in ("gold", "judge-a", "judge-b"):
        paths.append(root / f"{judge}.jsonl")
        write_jsonl(paths[-1], [r for r in records if r["judge"] == judge])
    out = root / "scores.json"
    res = gamut_cli("score", *map(str, paths), "--out", str(out))
    assert res.exit_code == 0, res.output
    return records, paths, out


@pytest.fixture(scope="module")
def gamut_cli():
    # conftest's `gamut`, at module scope so the scores are computed once for these tests.
    from typer.testing import CliRunner

    from gamut_local.cli.main import app

    runner = CliRunner()
    return lambda *args: runner.invoke(app, [str(a) for a in args])


def test_scores_are_full_precision(scored):
    records, _, out = scored
    want = plain_gamut(records)
    doc = json.loads(out.read_text())
    assert len(doc["models"]) == len(want) == 18
    for m in doc["models"]:
        # Exact to the last bits, not to the 2 decimals the file used to keep.
        assert m["gamut_score"] == pytest.approx(want[(m["judge"], m["model"], m["variant"])], abs=1e-9)
    assert any(len(repr(m["gamut_score"]).split(".")[-1]) > 4 for m in doc["models"])


def test_scores_file_is_typed_and_names_its_inputs(scored):
    _, paths, out = scored
    doc = ScoresFile.model_validate_json(out.read_text())
    assert doc.schema_version == 2 and doc.bootstrap.n_boot == 1000 and doc.formula.partial_credit == 0.5
    assert [i.path for i in doc.inputs] == [str(p) for p in paths]
    assert [i.sha256 for i in doc.inputs] == [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]
    assert doc.responses_file == "scores.responses.parquet"


def test_per_response_parquet_reads_back_in_pyarrow_pandas_and_duckdb(scored):
    records, _, out = scored
    parquet = out.with_name("scores.responses.parquet")
    doc = json.loads(out.read_text())
    want = {(m["judge"], m["model"], m["variant"]): m["gamut_score"] for m in doc["models"]}
    import pandas as pd

    frame = pd.read_parquet(parquet)
    assert len(frame) == 3 * 6 * 17
    assert set(frame.columns) >= {"judge", "model", "variant", "question_id", "score", "answer_critical",
                                  "n_meets", "n_invalid"}
    got = (100 * frame.groupby(["judge", "model", "variant"])["score"].mean()).to_dict()
    assert got == pytest.approx(want, abs=1e-9)
    duckdb = pytest.importorskip("duckdb")
    rows = duckdb.sql(f"SELECT judge, model, variant, 100 * avg(score) FROM '{parquet}' GROUP BY ALL").fetchall()
    assert {r[:3]: r[3] for r in rows} == pytest.approx(want, abs=1e-9)
    counts = duckdb.sql(f"SELECT sum(n_meets + n_partially_meets + n_missing + n_contradicts + n_invalid) "
                        f"FROM '{parquet}'").fetchall()[0][0]
    assert counts == len(records)


def test_per_response_parquet_has_nulls_where_nothing_was_graded_and_plain_strings(tmp_path, gamut_cli):
    """A response without a check of a tier has no tier score: null in the Parquet file, as in
    its JSONL form and the docs, so DuckDB's avg skips it (a NaN there made the whole average
    NaN). Strings read as plain strings everywhere (no categoricals in pandas)."""
    duckdb = pytest.importorskip("duckdb")
    base = {"model": "m", "variant": "text_only", "judge": "j"}
    rows = [{**base, "question_id": "q1", "check_id": "c1", "tier": "answer_critical", "verdict": "meets"},
            {**base, "question_id": "q2", "check_id": "c1", "tier": "answer_critical", "verdict": "missing"},
            {**base, "question_id": "q2", "check_id": "c2", "tier": "context", "verdict": "meets"}]
    write_jsonl(tmp_path / "v.jsonl", rows)
    assert gamut_cli("score", tmp_path / "v.jsonl", "--out", tmp_path / "s.json").exit_code == 0
    parquet = tmp_path / "s.responses.parquet"
    got = duckdb.sql(f"SELECT question_id, context IS NULL, avg(context) OVER () FROM '{parquet}' ORDER BY 1").fetchall()
    assert got == [("q1", True, 1.0), ("q2", False, 1.0)]
    import pandas as pd

    frame = pd.read_parquet(parquet)
    assert frame["context"].isna().tolist() == [True, False]
    assert not isinstance(frame["model"].dtype, pd.CategoricalDtype) and frame["model"].tolist() == ["m", "m"]
    assert np.isnan(read_responses(parquet)["context"][0])


def test_scores_rebuilt_from_the_parquet_equal_the_computed_ones(scored):
    _, paths, out = scored
    scores = score_table(read_verdicts(paths))
    back = scores_from_columns(read_responses(out.with_name("scores.responses.parquet")), scores.judges,
                               seed=0, n_boot=1000, formula=scores.formula)
    assert back.systems == scores.systems and back.questions == scores.questions
    np.testing.assert_array_equal(back.score, scores.score)
    np.testing.assert_array_equal(back.tier_scores, scores.tier_scores)
    np.testing.assert_array_equal(back.counts, scores.counts)
    cols = response_columns(scores)
    assert len(cols["judge"]) == int(scores.present.sum())


def test_responses_written_as_jsonl_read_back_as_the_scores(scored, tmp_path, monkeypatch):
    import gamut_local.reporting.tables as tables
    from gamut_local.reporting.current import current_scores as read_current_scores
    from gamut_local.stages.score import write_scores

    _, paths, out = scored
    monkeypatch.setattr(tables, "_has_pyarrow", lambda: False)
    doc = write_scores(tmp_path / "scores.json", paths)
    assert doc.responses_file == "scores.responses.jsonl"
    assert [m.gamut_score for m in doc.models] == [m["gamut_score"] for m in json.loads(out.read_text())["models"]]
    again = read_current_scores(tmp_path / "scores.json", paths, None, seed=0, n_boot=1000)
    assert again is not None
    np.testing.assert_array_equal(again[1].score, score_table(read_verdicts(paths)).score)
