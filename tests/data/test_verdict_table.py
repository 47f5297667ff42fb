"""The verdict reader: the store's columns against the record-by-record reference of the same
verdicts as JSONL (same table, same scores, same agreement), and the very same error
messages on a corpus of bad verdict files, read directly and brought in by `verdicts import`."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

import gamut_local
from gamut_local.analysis.agreement import agree_panel, panel_from_table
from gamut_local.analysis.scoring import score_table
from gamut_local.data import verdict_table as vt
from gamut_local.data.records import Verdict, load_records, verdict_key
from gamut_local.errors import InputError
from gamut_local.rundir.identity import current_record, file_record
from gamut_local.rundir.store import write_jsonl
from tests.support.synthetic import assert_same_table, make_records
from gamut_local.vocab import JUDGE_LABELS, TIERS, VARIANTS, VERDICTS
from tests.reference import read_verdicts_reference

GOLD = Path(gamut_local.__file__).parent / "data" / "sample" / "verdicts" / "gold.jsonl"
GOOD = {"question_id": "q1", "model": "m", "variant": "multimodal", "judge": "j", "check_id": "c1",
        "tier": "answer_critical", "verdict": "meets", "raw": "'meets'=0.9000",
        "probs": {"meets": 0.9, "partially_meets": 0.05, "missing": 0.03, "contradicts": 0.02},
        "settings_hash": "abc", "attempts": 1}


def test_store_units_and_jsonl_files_mixed_read_as_the_reference_in_file_order(tmp_path):
    """Store units and JSONL files in one read, a JSONL file between two units: the column
    path merges the store's rows and the JSONL's into the order of the files, each row with
    its own file and line, as the record-by-record reader has them."""
    from tests.support.synthetic import import_into
    from gamut_local.rundir import verdict_store

    records = [{**r, "settings_hash": f"h-{r['judge']}", "answer_hash": f"a-{r['model']}-{r['question_id']}"}
               for r in make_records(seed=4, models=("m1", "m2", "m3"), questions=4, checks=3)]
    import_into([r for r in records if r["model"] != "m2"], tmp_path / "run")
    units = verdict_store.units_in(tmp_path / "run")
    jsonl = tmp_path / "m2.jsonl"
    write_jsonl(jsonl, [r for r in records if r["model"] == "m2"])
    paths = [u for u in units if u.name.startswith("m1")] + [jsonl] + [u for u in units if u.name.startswith("m3")]
    got = vt.read_verdicts(paths)
    assert_same_table(got, read_verdicts_reference(paths))
    assert got.files[got.file[0]] == str(paths[0]) and len(set(got.file.tolist())) == len(paths)
    assert np.all(np.diff(got.file) >= 0)
    # Without answer hashes (a reader given no answers): the same table less that column.
    without = vt.read_verdicts(paths, answer_hashes=False)
    assert without.answer_hash is None and without.answer_hashes == []
    assert_same_table(dataclasses.replace(without, answer_hash=got.answer_hash, answer_hashes=got.answer_hashes), got)
    # Nor check hashes (a reader given no dataset).
    without = vt.read_verdicts(paths, check_hashes=False)
    assert without.check_hash is None and without.check_hashes == []
    assert_same_table(dataclasses.replace(without, check_hash=got.check_hash, check_hashes=got.check_hashes), got)


def test_the_table_decodes_to_the_records_of_its_files_in_their_order(tmp_path):
    """Files whose dictionaries differ (other values, other orders, hashes absent in some)
    become one table whose codes, through its sorted dictionaries and the fixed vocabulary,
    give back each record as the record-by-record reader reads it, file by file."""
    from tests.support.synthetic import import_into
    from gamut_local.rundir import verdict_store

    records = [{**r, "settings_hash": f"h-{r['judge']}", "answer_hash": None if k % 3 else f"a{k % 7}",
                "probs": {"meets": k % 100 / 100, "missing": 0.5} if k % 2 else None}
               for k, r in enumerate(make_records(seed=9, models=("m2", "m1"), questions=5, checks=4))]
    import_into([r for r in records if r["model"] == "m2"], tmp_path / "run")
    jsonl = tmp_path / "m1.jsonl"
    write_jsonl(jsonl, [r for r in records if r["model"] == "m1"][::-1])  # another order of values
    paths = [*verdict_store.units_in(tmp_path / "run"), jsonl]
    want = load_records(paths, Verdict, verdict_key)
    t = vt.read_verdicts(paths)
    assert all(d == sorted(d) for d in (t.questions, t.models, t.judges, t.checks, t.answer_hashes))
    hashes = [None if c < 0 else t.answer_hashes[c] for c in t.answer_hash]
    got = [{"question_id": t.questions[t.question[i]], "model": t.models[t.model[i]],
            "variant": VARIANTS[t.variant[i]], "judge": t.judges[t.judge[i]], "check_id": t.checks[t.check[i]],
            "tier": TIERS[t.tier[i]], "verdict": VERDICTS[t.verdict[i]], "answer_hash": hashes[i],
            "probs": [None if np.isnan(p) else p for p in t.probs[i]]} for i in range(len(t))]
    assert got == [{**{k: r[k] for k in got[0]}, "probs": [(r["probs"] or {}).get(k) for k in JUDGE_LABELS]}
                   for r in want]
    assert any(r["probs"] for r in want) and {h is None for h in hashes} == {True, False}


def test_sample_gold_tables_are_identical():
    assert_same_table(vt.read_verdicts([GOLD]), read_verdicts_reference([GOLD]))


def _write_judges(tmp_path, records):
    paths = []
    for (judge, model), rows in sorted(_group(records).items()):
        p = tmp_path / "verdicts" / judge / f"{model}.jsonl"
        write_jsonl(p, rows)
        paths.append(p)
    return paths


def _group(records):
    out = {}
    for r in records:
        out.setdefault((r["judge"], r["model"]), []).append(
            {**r, "settings_hash": f"h-{r['judge']}", "probs": {"meets": 0.5, "missing": 0.5,
                                                               "partially_meets": 0.0, "contradicts": 0}})
    return out


def test_the_store_reads_as_the_reference_reads_the_same_verdicts_as_jsonl(tmp_path, monkeypatch):
    from gamut_local.data.verdict_io import import_files

    records = make_records(seed=3, models=("m1", "m2", "m3"), variants=("multimodal", "text_only"), questions=12)
    paths = _write_judges(tmp_path, records)
    reference = read_verdicts_reference(paths)
    import_files(paths, tmp_path / "run")
    monkeypatch.setattr(vt, "strict_tables", lambda *_: pytest.fail("read record by record"))
    fast = vt.read_verdicts([tmp_path / "run"])
    for f in ("files", "inputs", "file", "line"):  # where the rows are: other files, same order
        setattr(fast, f, getattr(reference, f))
    assert_same_table(fast, reference)
    a, b = score_table(fast, seed=5), score_table(reference, seed=5)
    np.testing.assert_array_equal(a.score, b.score)
    np.testing.assert_array_equal(a.counts, b.counts)
    assert agree_panel(panel_from_table(fast), a) == agree_panel(panel_from_table(reference), b)
    # Probabilities land in JUDGE_LABELS order, ints read as floats.
    assert np.array_equal(fast.probs[0], [0.5, 0.0, 0.5, 0.0])


def line(**changes) -> str:
    return json.dumps({k: v for k, v in {**GOOD, **changes}.items() if v is not ...})


def lines(*rows) -> bytes:
    return ("\n".join(rows) + "\n").encode()


# name -> (file contents, expected in the messages (None: accepted)); {path} is the file.
CASES = {
    "unknown_label": (lines(line(verdict="great")), ["{path}:1: verdict: Input should be"]),
    "unknown_tier": (lines(line(tier="vital")), ["{path}:1: tier: Input should be"]),
    "missing_field": (lines(line(check_id=...)), ["{path}:1: check_id: Field required"]),
    "null_field": (lines(line(judge=None)), ["{path}:1: judge: Input should be a valid string"]),
    "number_for_string": (lines(line(), line(question_id=17, check_id="c2")),
                          ["{path}:2: question_id: Input should be a valid string"]),
    "empty_string": (lines(line(model="")), ["{path}:1: model: String should have at least 1 character"]),
    "raw_not_text": (lines(line(raw=5)), ["{path}:1: raw: Input should be a valid string"]),
    "probs_text": (lines(line(probs={"meets": "0.9"})), ["{path}:1: probs.meets: Input should be a valid number"]),
    "probs_bool": (lines(line(probs={"meets": True})), ["{path}:1: probs.meets: Input should be a valid number"]),
    "probs_null_value": (lines(line(), line(check_id="c2", probs={"meets": None, "missing": 1.0})),
                         ["{path}:2: probs.meets: Input should be a valid number"]),
    "probs_list": (lines(line(probs=[0.5])), ["{path}:1: probs: Input should be a valid dictionary"]),
    # The store's rules for probabilities, refused where the file is read (they once passed the
    # strict reader and failed in the store's writer, named by the store's row).
    "probs_unknown_label": (lines(line(probs={"great": 0.5})),
                            ["{path}:1: probs.great.[key]: Input should be 'meets', 'partially_meets'"]),
    "probs_nan": (lines(line(probs={"meets": float("nan")})), ["{path}:1: probs.meets: Input should be a finite number"]),
    "probs_infinite": (lines(line(), line(check_id="c2").replace('"meets": 0.9', '"meets": 1e999')),
                       ["{path}:2: probs.meets: Input should be a finite number"]),
    "variant_null": (lines(line(variant=None)), ["{path}:1: variant: Input should be"]),
    "duplicate_key": (lines(line(), line(verdict="missing")), ["{path}:2: <record>: duplicate record"]),
    "torn_line_inside": (lines(line()[:-20], line(check_id="c2")), ["{path}:1: <record>: not valid JSON"]),
    "unsafe_model_name": (lines(line(model="../m")), ["{path}:1: model: String should match pattern"]),
    "repeated_json_key": (lines(line().replace('"attempts": 1', '"attempts": 1, "attempts": 2')),
                          ["{path}:1: <record>: key 'attempts' appears twice"]),
    "repeated_key_inside_probs": (lines(line().replace('"meets": 0.9', '"meets": 0.9, "meets": 0.8')),
                                  ["{path}:1: <record>: key 'meets' appears twice"]),
    "not_json": (lines(line(verdict="great"), "not json"),
                 ["{path}:1: verdict: Input should be", "{path}:2: <record>: not valid JSON"]),
    "not_utf8": (lines(line()).replace(b'"attempts"', b'"\xff"'), ["{path}:1: <record>: not valid UTF-8"]),
    # In a value: pyarrow checks no string column's bytes, nor reads a field outside its schema.
    "not_utf8_in_raw": (lines(line()).replace(b"'meets'", b"'\xffmeets'"), ["{path}:1: <record>: not valid UTF-8"]),
    "not_utf8_in_extra_field": (lines(line(method="first\u00e9")).replace(b"\\u00e9", b"\xe9"),
                                ["{path}:1: <record>: not valid UTF-8"]),
    "not_object": (b"[1, 2]\n", ["{path}:1: <record>: expected a JSON object, got list"]),
    "two_objects_on_a_line": (lines(line() + " " + line(check_id="c2")), ["{path}:1: <record>: not valid JSON"]),
    "empty": (b"", ["{path}: <record>: file is empty"]),
    # pyarrow's parser would crash the process on this; the column path must not hand it over.
    "deep_nesting": (lines(line(), '{"a": ' + "[" * 100000 + "]" * 100000 + "}"),
                     ["{path}:2: <record>: JSON nested too deeply"]),
    "mixed_settings": (lines(line(), line(check_id="c2", settings_hash="xyz")),
                       ["{path}:2: settings_hash: judge 'j' has verdicts made under other settings: "
                        "'xyz' here, 'abc' at {path}:1"]),
    # Accepted by both; the column path hands them to the reference, which reads them right.
    "variant_absent_defaults_to_multimodal": (lines(line(variant=...)), None),
    "blank_lines": (lines(line(), "", "   ", line(check_id="c2")), None),
    "probs_some_labels": (lines(line(probs={"meets": 1.0})), None),
    "extra_field_changing_type": (lines(line(attempts=1), line(check_id="c2", attempts="two")), None),
    "torn_last_line_is_skipped": (lines(line(), line(check_id="c2"))[:-20], None),
    "human_changes_their_mind": (lines(line(judge="human-ann", settings_hash=...),
                                       line(judge="human-ann", check_id="c2", settings_hash=...),
                                       line(judge="human-ann", verdict="missing", settings_hash=...)), None),
    "long_line_shallow": (lines(line(raw="x" * 5000), line(check_id="c2", raw="[" * 3000)), None),
    "crlf": (lines(line(), line(check_id="c2")).replace(b"\n", b"\r\n"), None),
    "no_final_newline": (lines(line(), line(check_id="c2"))[:-1], None),
}


# Import: the whole corpus with its exact FILE:LINE: field messages, nothing bad written; what
# import accepts, the store gives back as the strict reader read it.
SAME = ("judges", "models", "questions", "checks", "judge", "model", "variant", "question", "check", "tier",
        "verdict", "settings_hashes", "settings_hash", "check_hashes", "check_hash", "answer_hashes", "answer_hash")


@pytest.mark.parametrize("name", sorted(CASES))
def test_import_gives_the_corpus_messages_and_writes_nothing_bad(gamut, tmp_path, name):
    content, expected = CASES[name]
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(content)
    run = tmp_path / "run"
    r = gamut("verdicts", "import", path, "--into", run)
    if expected is not None:
        assert r.exit_code == 1, r.output
        for want in expected:
            assert want.format(path=path) in r.output, r.output
        assert "Traceback" not in r.output and not (run / "verdicts").exists()
        return
    assert r.exit_code == 0, r.output
    reference = read_verdicts_reference([path])
    stored = vt.read_verdicts([run])
    for f in SAME:
        x, y = getattr(stored, f), getattr(reference, f)
        assert (np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y), f
    assert np.array_equal(stored.probs, reference.probs, equal_nan=True)



def _read_or_error(path):
    try:
        return vt.read_verdicts([path])
    except InputError as e:
        return e


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_file_messages_are_the_references(tmp_path, name):
    content, expected = CASES[name]
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(content)
    try:
        reference = read_verdicts_reference([path])
    except InputError as e:
        reference = e
    got = _read_or_error(path)
    if expected is None:
        assert not isinstance(reference, InputError), reference
        assert_same_table(got, reference)
        return
    assert isinstance(got, InputError) and isinstance(reference, InputError)
    assert [str(p) for p in got.problems] == [str(p) for p in reference.problems]
    for want in expected:
        assert want.format(path=path) in str(got), str(got)


def test_human_revisions_newest_wins(tmp_path):
    path = tmp_path / "human-ann.jsonl"
    path.write_bytes(CASES["human_changes_their_mind"][0])
    table = vt.read_verdicts([path])
    # The later verdict on c1 (line 3) takes the earlier one's place, as load_records does.
    assert [table.checks[c] for c in table.check] == ["c1", "c2"]
    assert [VERDICTS[v] for v in table.verdict] == ["missing", "meets"] and list(table.line) == [3, 2]


def test_duplicates_across_files_and_a_missing_file_name_both_lines(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(lines(line()))
    b.write_bytes(lines(line(check_id="c2"), line(verdict="missing")))
    with pytest.raises(InputError) as e:
        vt.read_verdicts([a, b])
    assert f"{b}:2: <record>: duplicate record ('q1', 'm', 'multimodal', 'j', 'c1') (first at {a}:1)" in str(e.value)
    with pytest.raises(InputError) as e:
        vt.read_verdicts([a, tmp_path / "gone.jsonl"])
    assert f"{tmp_path / 'gone.jsonl'}: <record>: file not found" in str(e.value)


def test_record_level_messages_are_load_records_own(tmp_path):
    path = tmp_path / "v.jsonl"
    path.write_bytes(lines(line(verdict="great"), line(check_id=...), "not json"))
    with pytest.raises(InputError) as want:
        load_records([path], Verdict, verdict_key)
    with pytest.raises(InputError) as got:
        vt.read_verdicts([path])
    assert [str(p) for p in got.value.problems] == [str(p) for p in want.value.problems]


def test_input_records_say_when_a_file_changed(tmp_path):
    path = tmp_path / "v.jsonl"
    path.write_bytes(lines(line()))
    rec = file_record(path)
    assert current_record(rec) == rec
    path.write_bytes(lines(line(verdict="missing")))
    assert current_record(rec)["sha256"] != rec["sha256"]
    path.unlink()
    assert current_record(rec) is None
