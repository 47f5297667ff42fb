"""JSON Lines verdicts read column-wise (`verdict_table.jsonl_table`: pyarrow's JSON reader into
the store's schema): every file the columns vouch for gives the strict reader's very table,
every other goes to the strict reader and gives its very messages, whatever pyarrow would have
made of it (a byte-order mark, a lone carriage return, NaN, two objects on a line, a line
longer than a block or a piece, a field outside the store's schema); and a label probability
outside [0, 1] is refused wherever verdicts come in: the strict reader, the store's writer, the
store's reader, and `score`, `agree` and `verdicts import` with a clean FILE:LINE: field message."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gamut_local.data import verdict_table as vt
from gamut_local.errors import InputError
from gamut_local.rundir import verdict_store
from gamut_local.rundir.store import JOURNAL
from tests.support.synthetic import assert_same_table, make_records
from tests.reference import read_verdicts_reference

GOOD = {"question_id": "q1", "model": "m", "variant": "multimodal", "judge": "j", "check_id": "c1",
        "tier": "answer_critical", "verdict": "meets", "raw": "'meets'=0.9000",
        "probs": {"meets": 0.9, "partially_meets": 0.05, "missing": 0.03, "contradicts": 0.02},
        "method": "first_token", "settings_hash": "abc", "check_hash": "ch", "answer_hash": "ah",
        "prompt_tokens": 420, "num_cached_tokens": 400, "attempts": 1}


def line(k: int = 1, **changes) -> str:
    """A verdict line on check c<k>, as the judge stage writes them, with `changes` (... drops a field)."""
    rec = {**GOOD, "check_id": f"c{k}", **changes}
    return json.dumps({key: v for key, v in rec.items() if v is not ...}, ensure_ascii=False)


def lines(*rows: str) -> bytes:
    return ("\n".join(rows) + "\n").encode()


@pytest.fixture
def strict(monkeypatch) -> list[str]:
    """The files the strict reader was given (the column path read every other JSONL file)."""
    given: list[str] = []
    real = vt.strict_tables

    def spy(paths, columns):
        given.extend(Path(p).name for p in paths)
        return real(paths, columns)

    monkeypatch.setattr(vt, "strict_tables", spy)
    return given


def read_both(path: Path):
    """(read_verdicts' table or InputError, the strict reference's), each read afresh."""
    out = []
    for read in (vt.read_verdicts, read_verdicts_reference):
        JOURNAL.reset()
        try:
            out.append(read([path]))
        except InputError as e:
            out.append(e)
    return out


# name -> (bytes, whether the column path reads them itself). Every one gives the reference's
# table or its problems; `True`: without the strict reader.
ACCEPTED = {
    "as_the_judge_writes": (lines(line(1), line(2), line(3)), True),
    "crlf_line_ends": (lines(line(1), line(2)).replace(b"\n", b"\r\n"), True),
    "no_final_newline": (lines(line(1), line(2))[:-1], True),
    "probs_null": (lines(line(1, probs=None), line(2)), True),
    "optional_fields_absent": (lines(line(1, raw=..., method=..., settings_hash=..., check_hash=..., answer_hash=...,
                                          prompt_tokens=..., num_cached_tokens=..., attempts=...)), True),
    "probabilities_at_the_bounds": (lines(line(1, probs={"meets": 1, "missing": 0, "partially_meets": 0.0,
                                                         "contradicts": 0.0})), True),
    "escapes_and_text_in_every_script": (lines(line(1, question_id="q\u00e9\u6f22\U0001f600", raw="a\\b\"c\u2028",
                                                    check_hash="\\u0041")), True),
    # The strict reader's, read right: the columns cannot tell these from what it refuses.
    "variant_absent": (lines(line(1, variant=...)), False),
    "probs_empty": (lines(line(1, probs={})), False),
    "probs_some_labels": (lines(line(1, probs={"meets": 1.0})), False),
    "a_field_outside_the_schema": (lines(line(1, note="seen twice"), line(2)), False),
    "an_extra_field_nested_deep": (lines(line(1, note=json.loads("[" * 500 + "]" * 500))), False),
    "method_not_text": (lines(line(1, method=3)), False),
    "tokens_not_whole": (lines(line(1, prompt_tokens=4.5)), False),
    "tokens_past_int64": (lines(line(1, attempts=2**64)), False),
    "blank_lines": (lines(line(1), "", "  ", line(2)), False),
    "indented_line": (lines(line(1), "  " + line(2)), False),
    "torn_last_line": (lines(line(1), line(2))[:-25], False),
    "human_verdicts_outside_their_folder": (lines(line(1, judge="human-ann"), line(1, judge="human-ann",
                                                                                   verdict="missing")), False),
}

REFUSED = {
    "byte_order_mark": b"\xef\xbb\xbf" + lines(line(1)),
    "byte_order_mark_inside": lines(line(1)) + b"\xef\xbb\xbf" + lines(line(2)),
    "empty_file": b"",
    "only_blank_lines": b"\n \n",
    "two_objects_on_a_line": lines(line(1) + line(2)),
    "two_objects_and_a_blank_line": lines(line(1) + " " + line(2), "", line(3)),
    "lone_carriage_return": lines(line(1) + "\r" + line(2)),
    "nan": lines(line(1).replace("0.9,", "NaN,")),
    "infinity": lines(line(1).replace("0.9,", "Infinity,")),
    "number_too_big": lines(line(1).replace("0.9,", "1e999,")),
    "above_one": lines(line(1, probs={"meets": 1.7, "missing": -0.7})),
    "below_zero": lines(line(1), line(2, probs={"meets": 1.0, "contradicts": -1e-9})),
    "label_null": lines(line(1, probs={"meets": None, "missing": 1.0})),
    "unknown_label": lines(line(1, probs={"maybe": 0.5})),
    "repeated_key": lines(line(1).replace('"attempts": 1', '"attempts": 1, "attempts": 2')),
    "repeated_key_in_probs": lines(line(1).replace('"meets": 0.9', '"meets": 0.9, "meets": 0.8')),
    "repeated_key_in_an_extra_field": lines(line(1)[:-1] + ', "x": {"a": 1, "a": 2}}'),
    "lone_high_surrogate": lines(line(1, raw="\\ud800").replace("\\\\ud800", "\\ud800")),
    "lone_low_surrogate": lines(line(1, raw="x").replace('"raw": "x"', '"raw": "\\udc00x"')),
    "not_utf8_in_raw": lines(line(1)).replace(b"'meets'", b"'\xffmeets'"),
    "overlong_utf8": lines(line(1)).replace(b"'meets'", b"'\xc0\xafmeets'"),
    "control_character_in_a_string": lines(line(1, raw="a\tb").replace("\\t", "\t")),
    "deep_nesting_in_an_extra_field": lines(line(1)[:-1] + ', "x": ' + "[" * 100000 + "]" * 100000 + "}"),
    "deep_nesting_in_raw": lines(line(1, raw=...)[:-1] + ', "raw": ' + "{\"a\": " * 50000 + "1" + "}" * 50000 + "}"),
    "required_null": lines(line(1, judge=None)),
    "required_absent": lines(line(1, tier=...)),
    "required_empty": lines(line(1, question_id="")),
    "unsafe_model_name": lines(line(1, model="../m")),
    "unknown_verdict": lines(line(1, verdict="great")),
    "variant_null": lines(line(1, variant=None)),
    "number_for_text": lines(line(1, check_hash=7)),
    "raw_an_object": lines(line(1, raw={"a": 1})),
    "duplicate_record": lines(line(1), line(2), line(1, verdict="missing")),
    "array_line": lines(line(1), "[1, 2]"),
    "trailing_comma": lines(line(1)[:-1] + ",}"),
    "torn_line_inside": lines(line(1)[:-20], line(2)),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted_files_give_the_strict_readers_table(tmp_path, strict, name):
    content, columns = ACCEPTED[name]
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(content)
    got, want = read_both(path)
    assert not isinstance(want, InputError), want
    assert_same_table(got, want)
    assert strict.count(path.name) == 1 + (not columns), strict  # once for the reference


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_files_give_the_strict_readers_messages(tmp_path, name):
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(REFUSED[name])
    got, want = read_both(path)
    assert isinstance(want, InputError), f"the strict reader accepts {name}"
    assert isinstance(got, InputError) and [str(p) for p in got.problems] == [str(p) for p in want.problems]
    assert all(p.file == str(path) for p in got.problems)


def test_the_torn_last_line_is_noted_as_the_strict_reader_notes_it(tmp_path):
    path = tmp_path / "v.jsonl"
    path.write_bytes(ACCEPTED["torn_last_line"][0])
    JOURNAL.reset()
    assert len(vt.read_verdicts([path])) == 1
    assert JOURNAL.notices == [f"{path}:2: torn last line (a write cut short) ignored; the stage that owns this "
                               "file redoes it on its next run"]


def _records(n_models: int, seed: int = 1) -> list[dict]:
    out = []
    for k, r in enumerate(make_records(seed=seed, models=tuple(f"m{i}" for i in range(n_models)), questions=9,
                                       checks=4)):
        p = np.random.default_rng(k).dirichlet(np.ones(4))
        out.append({**r, "settings_hash": f"h-{r['judge']}", "check_hash": f"c{k % 11}", "raw": f"r{k}",
                    "answer_hash": None if k % 5 == 0 else f"a{k % 13}", "method": "first_token", "attempts": 1,
                    "probs": None if k % 7 == 0 else dict(zip(("meets", "partially_meets", "missing", "contradicts"),
                                                             p.tolist()))})
    return out


def test_pieces_and_a_line_longer_than_a_piece_read_as_one_file(tmp_path, monkeypatch, strict):
    """A file bigger than a piece is read piece by piece, each cut after a newline, one of them
    longer than a piece (a huge line), another line longer than pyarrow's 1 MB block: the
    table and its line numbers are the strict reader's; a bad line in a later piece is named
    by its line in the file."""
    records = _records(3)
    records[5]["raw"] = "x" * 3_000_000
    records[40]["raw"] = "y" * 50_000
    path = tmp_path / "v.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    monkeypatch.setattr(vt, "PIECE_BYTES", 20_000)
    assert len(list(vt._pieces(path))) > 5
    got, want = read_both(path)
    assert_same_table(got, want) and strict == [path.name]  # the reference's read alone
    rows = path.read_bytes().split(b"\n")
    rows[150] = rows[150].replace(b'"verdict": "', b'"verdict": "not ')
    path.write_bytes(b"\n".join(rows))
    with pytest.raises(InputError) as e:
        vt.read_verdicts([path])
    assert [p.line for p in e.value.problems] == [151] and e.value.problems[0].field == "verdict"


def test_many_files_read_column_wise_are_the_strict_readers_table(tmp_path, strict):
    """Files of several judges, models and variants, with dictionaries that differ from file
    to file, read column-wise side by side: the strict reader's table, file by file, line by
    line, with every column `score`, `agree` and calibration read."""
    paths = []
    for (judge, model, variant), rows in _grouped(_records(4, seed=7)).items():
        path = tmp_path / judge / f"{model}.{variant}.jsonl"
        path.parent.mkdir(exist_ok=True)
        text = "\n".join(json.dumps(r) for r in rows[::-1])  # another order of values in each file
        path.write_text(text if model == "m2" else text + "\n")  # m2's files end without a newline
        paths.append(path)
    table = vt.read_verdicts(paths)
    assert not strict
    assert_same_table(table, read_verdicts_reference(paths))
    assert np.isnan(table.probs).any() and (table.answer_hash == -1).any()


def _grouped(records):
    out = {}
    for r in records:
        out.setdefault((r["judge"], r["model"], r["variant"]), []).append(r)
    return out


def test_duplicates_are_named_as_the_strict_reader_names_them(tmp_path):
    """Repeated keys within a file, across JSONL files and between a store unit and a JSONL
    file: every one named by file and line with where it first was, in the strict reader's
    words and order, without reading the files again record by record."""
    from gamut_local.data.records import Verdict, load_records, verdict_key
    from tests.support.synthetic import import_into

    records = _records(2, seed=3)
    import_into([r for r in records if r["model"] == "m0"], tmp_path / "run")
    units = verdict_store.units_in(tmp_path / "run")
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps(r) + "\n" for r in records[:30]))  # m0's, held by the store too
    b.write_text("".join(json.dumps(r) + "\n" for r in [*records[25:35], records[31]]))
    paths = [*units, a, b]
    with pytest.raises(InputError) as want:
        load_records(vt.store_files(paths), Verdict, verdict_key)
    with pytest.raises(InputError) as got:
        vt.read_verdicts(paths)
    assert [str(p) for p in got.value.problems] == [str(p) for p in want.value.problems]
    assert len(got.value.problems) == 30 + 10 + 1


# ---------------------------------------------------------------- probabilities outside [0, 1]

def test_the_store_refuses_probabilities_outside_zero_to_one(tmp_path):
    import pyarrow.parquet as pq

    with pytest.raises(InputError) as e:
        verdict_store.to_table([{**GOOD, "probs": {"meets": 1.7, "missing": -0.7}}], "v")
    assert str(e.value) == "v:1: probs: must hold finite numbers from 0 to 1"
    unit = tmp_path / "j" / "m.multimodal.parquet"
    verdict_store.replace_unit(unit, [GOOD, {**GOOD, "check_id": "c2"}])
    table = pq.read_table(unit)
    index = table.schema.get_field_index("p_missing")
    pq.write_table(table.set_column(index, table.schema.field(index), [[0.03, 1.5]]), unit)
    with pytest.raises(InputError) as e:
        vt.read_verdicts([unit])
    assert str(e.value) == f"{unit}:2: p_missing: must be a finite number from 0 to 1, or null"


@pytest.mark.parametrize("command", ["score", "agree", "import"])
def test_commands_refuse_probabilities_outside_zero_to_one(world, expect, command):
    """`{"meets": 1.7, "missing": -0.7}` once imported without a word."""
    path = world.verdicts(world.root / "v.jsonl")
    rows = path.read_text().splitlines()
    rows[4] = rows[4][:-1] + ', "probs": {"meets": 1.7, "missing": -0.7}}'
    path.write_text("\n".join(rows) + "\n")
    argv = {"score": ("score", path, "--out", world.root / "s.json"),
            "agree": ("agree", path, "--out", world.root / "a.json"),
            "import": ("verdicts", "import", path, "--into", world.run_dir)}[command]
    out = expect(1, *argv, named=[f"{path}:5: probs.meets: Input should be less than or equal to 1",
                                  f"{path}:5: probs.missing: Input should be greater than or equal to 0"])
    assert "Traceback" not in out and not (world.root / "s.json").exists() and not (world.root / "a.json").exists()
    assert not (world.run_dir / "verdicts").exists()
