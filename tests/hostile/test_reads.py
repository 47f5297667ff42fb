"""The reading commands (score, score-run, agree, compare, report, validate) on missing,
empty, torn and inconsistent inputs: a message naming the file, never a traceback (class 6),
never a silent score of verdicts the dataset does not back (class 4), and the torn-tail
rule every reader shares (class 3); compare, agree and report on scores and verdicts of
the wrong shape; the two verdict readers alike on lone surrogates."""

from __future__ import annotations

import json

import pytest

from gamut_local.errors import InputError


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


# ---------------------------------------------------------------- store files rewritten by another tool

def _rewritten(world, name: str, column: str, change) -> object:
    """A store unit of the world's verdicts, then rewritten by pyarrow as a person or another
    tool might (pyarrow keeps the schema-version metadata): `change(table, column)` -> table."""
    import pyarrow.parquet as pq

    from gamut_local.rundir import verdict_store

    rows = [json.loads(line) for line in world.verdicts(world.root / "v.jsonl").read_text().splitlines()]
    unit = world.root / "store" / "gold" / f"{name}.text_only.parquet"
    verdict_store.replace_unit(unit, rows)
    pq.write_table(change(pq.read_table(unit), column), unit)
    return unit


def _value_at(row: int, value):
    """Set one row's value of a dictionary column (rows counted from 1)."""
    import pyarrow as pa

    def change(table, column):
        values = table.column(column).to_pylist()
        values[row - 1] = value
        field = pa.field(column, table.schema.field(column).type)  # nullable: another tool's may be
        return table.set_column(table.schema.get_field_index(column), field,
                                pa.array(values, type=pa.string()).dictionary_encode() if pa.types.is_dictionary(field.type)
                                else pa.array(values, type=field.type))
    return change


def _retyped(typ):
    import pyarrow as pa

    def change(table, column):
        return table.set_column(table.schema.get_field_index(column), pa.field(column, typ),
                                table.column(column).cast(pa.string()).cast(typ) if typ != pa.int64() else
                                pa.array(range(table.num_rows), type=typ))
    return change


def _kinds():
    import pyarrow as pa

    return {
        "a verdict outside the labels": ("verdict", _value_at(5, "great"), ":5: verdict", "'great' is not one of"),
        "a tier outside the tiers": ("tier", _value_at(2, "critical"), ":2: tier", "'critical' is not one of"),
        "a variant outside the variants": ("variant", _value_at(7, "audio"), ":7: variant", "'audio' is not one of"),
        "a judge name that escapes its folder": ("judge", _value_at(3, "../../etc"), ":3: judge",
                                                 "cannot be used in a file name"),
        "an empty check id": ("check_id", _value_at(4, ""), ":4: check_id", "must be a non-empty string"),
        "a missing question id": ("question_id", _value_at(6, None), ":6: question_id", "must be a non-empty string"),
        "a probability that is not finite": ("p_meets", _value_at(8, float("inf")), ":8: p_meets", "finite number"),
        "verdicts as numbers": ("verdict", _retyped(pa.int64()), ": verdict", "a column of type int64"),
        "verdicts as plain strings": ("verdict", _retyped(pa.string()), ": verdict", "a column of type string"),
        "no verdict column": ("verdict", lambda t, c: t.drop_columns([c]), ": verdict", "no such column"),
    }


@pytest.mark.parametrize("kind", list(_kinds()))
def test_a_store_file_rewritten_with_bad_values_is_refused_naming_the_row(world, expect, kind):
    """The writer validates every record, but a file of this schema version may be rewritten
    afterwards: every reader checks the writer's rules column-wise and names file, row and
    field (these once ended in 'internal error: KeyError')."""
    column, change, where, why = _kinds()[kind]
    unit = _rewritten(world, "m", column, change)
    if not column.startswith("p_"):  # score reads no probabilities (export reads every column)
        out = expect(1, "score", unit, "--out", world.root / "s.json", named=[f"{unit}{where}", why])
        assert not (world.root / "s.json").exists() and "nothing was written" in out
    expect(1, "verdicts", "export", unit, "--out", world.root / "e.jsonl", named=[f"{unit}{where}", why])
    assert not (world.root / "e.jsonl").exists()


def test_a_store_file_with_a_damaged_page_is_refused_naming_it(world, expect):
    import pyarrow.parquet as pq

    unit = _rewritten(world, "m", "verdict", lambda t, c: t)
    chunk = pq.ParquetFile(unit).metadata.row_group(0).column(6)  # verdict's pages; the footer stays whole
    assert chunk.path_in_schema == "verdict"
    end = chunk.dictionary_page_offset + chunk.total_compressed_size
    data = bytearray(unit.read_bytes())
    for i in range(end - 8, end):  # the end of its column chunk
        data[i] ^= 0xFF
    unit.write_bytes(bytes(data))
    expect(1, "score", unit, "--out", world.root / "s.json", named=[str(unit), "not a readable Parquet file"])


@pytest.mark.parametrize("meta, field, why", [
    (b"{not json", "schema_version", "is not a JSON object"),
    (b"[1, 2]", "schema_version", "is not a JSON object"),
    (b'{"schema_version": true}', "schema_version", "has verdict-store schema version True"),
    (b'{"schema_version": 1, "through_part": "x"}', "through_part", "'x' is not a part number"),
    (b'{"schema_version": 1, "through_part": -1}', "through_part", "-1 is not a part number"),
])
def test_a_store_file_with_garbled_metadata_is_refused_naming_it(world, expect, meta, field, why):
    """The metadata says which parts a compacted file already holds: readers trust it to count
    nothing twice, so a garbled one is refused (these once ended in 'internal error')."""
    from gamut_local.rundir import verdict_store

    unit = _rewritten(world, "m", "verdict", lambda t, c: t.replace_schema_metadata({verdict_store.META_KEY: meta}))
    out = expect(1, "score", unit, "--out", world.root / "s.json", named=[f"{unit}: {field}", why])
    assert not (world.root / "s.json").exists() and "nothing was written" in out


def _scores(world, models) -> object:
    path = world.root / "s.json"
    path.write_text(json.dumps({"models": models}))
    return path


def _m(judge="j", model="m", variant="text_only", score=50.0):
    return {"judge": judge, "model": model, "variant": variant, "gamut_score": score}


@pytest.mark.parametrize("bad, field", [(_m(judge=["j"]), "models.1.judge"), (_m(model={"a": 1}), "models.1.model"),
                                        (_m(variant=3), "models.1.variant"), (_m(score=True), "models.1.gamut_score"),
                                        (_m(judge=""), "models.1.judge")])
def test_compare_names_a_field_of_the_wrong_type(world, expect, bad, field):
    path = _scores(world, [_m(variant="multimodal"), bad])
    expect(1, "compare", path, "--out", world.root / "c.json", named=["s.json", field])
    assert not (world.root / "c.json").exists()


def test_compare_refuses_one_system_scored_twice(world, expect):
    path = _scores(world, [_m(variant="multimodal"), _m(score=40.0), _m(score=60.0)])
    expect(1, "compare", path, "--out", world.root / "c.json",
           named=["s.json", "models.2", "appears twice", "first at models.1"])
    assert not (world.root / "c.json").exists()


def test_compare_refuses_a_scores_file_with_a_repeated_key(world, expect):
    (world.root / "s.json").write_text('{"models": [], "models": []}')
    expect(1, "compare", world.root / "s.json", named=["s.json", "'models' appears twice"])


def test_agree_with_a_single_judge_is_an_error(world, expect):
    a = world.verdicts(world.root / "a.jsonl", judge="gold", qids=("q1", "q2"))
    b = world.verdicts(world.root / "b.jsonl", judge="gold", qids=("q3", "q4"))
    out = world.root / "agree.json"
    expect(1, "agree", a, b, "--out", out, named=["a.jsonl", "b.jsonl", "only one judge (gold)"])
    assert not out.exists()


def test_report_refuses_a_missing_extra_verdict_file_unless_told(world, expect):
    gold = world.verdicts(world.root / "gold.jsonl", model="cand")
    expect(0, "run", "--config", world.config(extra_verdicts=[str(gold)]), inputs_change=True)
    report = world.run_dir / "report.md"
    before = report.read_bytes()
    gold.unlink()
    expect(1, "report", world.run_dir, named=["manifest.json", "extra_verdicts.0", "gold.jsonl",
                                              "--allow-missing-verdicts"])
    assert report.read_bytes() == before
    out = expect(0, "report", world.run_dir, "--allow-missing-verdicts", named=["warning:", "gold.jsonl"],
                 inputs_change=True)
    assert "its judge's verdicts are not in this report" in out
    first = report.read_text().splitlines()[0]
    assert first.startswith("> **Warning:**") and "gold.jsonl" in first


@pytest.mark.parametrize("escape", [r"\ud800", r"\udc80", r"\udfff", r"\ud800\ud800", r"\udc00\ud800",
                                    r"\ud83d\ude00", r"\\ud800"])
@pytest.mark.parametrize("field", ["raw", "question_id", "check_id", "judge", "extra"])
def test_both_verdict_readers_judge_a_surrogate_alike(tmp_path, escape, field):
    from gamut_local.data.verdict_table import read_verdicts
    from tests.reference import read_verdicts_reference

    rows = [{"question_id": f"q{i}", "model": "m", "variant": "text_only", "judge": "j", "check_id": f"c{k}",
             "tier": "valuable", "verdict": "meets", "raw": "x"} for i in range(3) for k in range(3)]
    rows[4][field] = "SPOT"
    path = tmp_path / "v.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows).replace("SPOT", f"a{escape}b"))

    def outcome(read, **kw):
        try:
            table = read([path], **kw)
        except InputError as e:
            return [str(p) for p in e.problems]
        return (table.questions, table.checks, table.judges)

    reference = outcome(read_verdicts_reference)
    lone = escape not in (r"\ud83d\ude00", r"\\ud800")
    assert (reference == ["%s:5: <record>: a string holds a lone surrogate (an escape such as \\ud800 without its "
                          "pair), not text" % path]) == lone
    assert outcome(read_verdicts) == reference
