"""JSON Lines files between stages: precise read errors, atomic chunked appends that survive a
torn last line, and whole-file writes that readers never see half-done."""

from __future__ import annotations

import json

import pytest

from gamut_local.errors import InputError
from gamut_local.rundir.store import append_jsonl, read_jsonl, repair_tail, write_json, write_jsonl


def test_every_bad_line_is_reported_with_its_number(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"a": 1}\n\nnot json\n[1, 2]\n\xff\xfe\n{"b": 2}\n')
    with pytest.raises(InputError) as e:
        read_jsonl(path)
    messages = [str(p) for p in e.value.problems]
    assert messages[0].startswith(f"{path}:3: <record>: not valid JSON")
    assert messages[1] == f"{path}:4: <record>: expected a JSON object, got list"
    assert messages[2] == f"{path}:5: <record>: not valid UTF-8 (byte 0)"
    problems: list = []
    assert [no for no, _ in read_jsonl(path, problems=problems)] == [1, 6] and len(problems) == 3


def test_missing_empty_and_directory_inputs_are_named(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        read_jsonl(tmp_path / "nope.jsonl")
    with pytest.raises(InputError, match="not a file"):
        read_jsonl(tmp_path)
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(InputError, match="file is empty: no records"):
        read_jsonl(tmp_path / "empty.jsonl")
    assert read_jsonl(tmp_path / "empty.jsonl", allow_empty=True) == []


def test_a_line_still_being_written_is_not_read_when_asked(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text('{"k": 1}\n{"k": 2}\n{"k": ')
    assert [r["k"] for _, r in read_jsonl(path, whole_lines_only=True)] == [1, 2]


def test_append_cuts_a_torn_tail_and_writes_whole_lines(tmp_path):
    path = tmp_path / "sub" / "answers.jsonl"
    assert append_jsonl(path, [{"k": 1}, {"k": 2}]) == 2
    with open(path, "ab") as f:
        f.write(b'{"k": 3, "tor')  # a kill mid-write
    assert append_jsonl(path, [{"k": 4}]) == 1
    assert [r["k"] for _, r in read_jsonl(path)] == [1, 2, 4]
    assert append_jsonl(path, []) == 0
    repair_tail(tmp_path / "absent.jsonl")  # nothing to repair is fine


def test_written_records_are_byte_stable_and_no_temp_file_is_left(tmp_path):
    out = tmp_path / "rubric.jsonl"
    write_jsonl(out, [{"b": 1, "a": "é"}])
    first = out.read_bytes()
    write_jsonl(out, [{"a": "é", "b": 1}])
    assert out.read_bytes() == first == '{"a":"é","b":1}\n'.encode()
    write_json(tmp_path / "scores.json", {"x": 0.1 + 0.2})
    assert json.loads((tmp_path / "scores.json").read_text())["x"] == 0.1 + 0.2  # full precision
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rubric.jsonl", "scores.json"]
