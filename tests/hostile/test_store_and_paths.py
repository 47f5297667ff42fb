"""rundir.store and rundir.paths on their own: atomic whole-file writes, chunk appends that
never leave half a record, one torn-tail rule for every reader, repeated keys, the guard
for columnar readers, and output paths that would destroy an input."""

from __future__ import annotations

import errno
import json
import os

import pytest

from gamut_local.errors import InputError
from gamut_local.rundir import store
from gamut_local.rundir.paths import check_outputs, inside, output_problems, run_dir_problems


@pytest.fixture(autouse=True)
def fresh_journal():
    store.JOURNAL.reset()
    yield
    store.JOURNAL.reset()


def test_atomic_write_replaces_whole_and_leaves_no_temp(tmp_path):
    path = tmp_path / "a" / "scores.json"
    store.write_json(path, {"x": 1})
    store.write_json(path, {"x": 2})
    assert json.loads(path.read_text()) == {"x": 2}
    assert [p.name for p in path.parent.iterdir()] == ["scores.json"]
    assert store.JOURNAL.summary() == f"wrote {path}; nothing else was changed"


def test_atomic_write_failing_mid_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "r.jsonl"
    path.write_text("old\n")

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store.os, "write", full)
    with pytest.raises(OSError) as e:
        store.write_text_atomic(path, "new\n")
    assert e.value.filename == str(path) and e.value.errno == errno.ENOSPC
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["r.jsonl"]
    assert store.JOURNAL.summary() == "nothing was written"


def test_atomic_write_onto_a_directory_is_an_os_error_naming_it(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(IsADirectoryError):
        store.write_text_atomic(tmp_path / "d", "x")
    assert [p.name for p in tmp_path.iterdir()] == ["d"]


def test_append_cut_back_when_the_disk_fills_mid_chunk(tmp_path, monkeypatch):
    path = tmp_path / "v.jsonl"
    store.append_jsonl(path, [{"a": 1}])
    real = os.write

    def half(fd, data):
        real(fd, bytes(data)[:5])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store.os, "write", half)
    with pytest.raises(OSError):
        store.append_jsonl(path, [{"a": 2}, {"a": 3}])
    assert path.read_text() == '{"a":1}\n'
    assert store.JOURNAL.appended == {str(path): 1}


def test_torn_last_line_is_skipped_with_a_notice_and_cut_by_the_owner(tmp_path):
    path = tmp_path / "v.jsonl"
    path.write_bytes(b'{"a":1}\n{"a":')
    assert store.read_jsonl(path) == [(1, {"a": 1})]
    assert "v.jsonl:2: torn last line" in store.JOURNAL.notices[0]
    store.append_jsonl(path, [{"a": 2}])
    assert path.read_bytes() == b'{"a":1}\n{"a":2}\n'


def test_a_whole_last_line_without_newline_is_a_record_but_not_for_resume(tmp_path):
    path = tmp_path / "v.jsonl"
    path.write_bytes(b'{"a":1}\n{"a":2}')
    assert [r for _, r in store.read_jsonl(path)] == [{"a": 1}, {"a": 2}]
    assert [r for _, r in store.read_jsonl(path, whole_lines_only=True)] == [{"a": 1}]


def test_torn_last_line_of_a_hand_made_file_is_an_error_when_asked(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'{"a":1}\n{"a":')
    with pytest.raises(InputError) as e:
        store.read_jsonl(path, torn_tail_ok=False)
    assert "d.jsonl:2: <record>: not valid JSON" in str(e.value)


def test_repeated_key_and_deep_nesting_are_line_problems(tmp_path):
    path = tmp_path / "v.jsonl"
    path.write_text('{"a": 1, "a": 2}\n{"b": {"c": 1, "c": 1}}\n' + "[" * 50000 + "]" * 50000 + "\n{}\n")
    with pytest.raises(InputError) as e:
        store.read_jsonl(path)
    lines = str(e.value).splitlines()
    assert lines[0].endswith("v.jsonl:1: <record>: key 'a' appears twice in this object")
    assert "v.jsonl:2" in lines[1] and "'c'" in lines[1]
    assert lines[2].endswith("v.jsonl:3: <record>: JSON nested too deeply")


def test_unreadable_file_is_a_problem_not_a_traceback(tmp_path):
    (tmp_path / "d").mkdir()
    problems = []
    assert store.read_jsonl(tmp_path / "d", problems=problems) == []
    assert problems[0].message == "not a file"


def test_output_equal_to_an_input_by_any_name_is_refused(tmp_path):
    src = tmp_path / "v.jsonl"
    src.write_text("{}\n")
    os.link(src, tmp_path / "hard.json")
    (tmp_path / "soft.json").symlink_to(src)
    for out in (src, tmp_path / "." / "v.jsonl", tmp_path / "hard.json", tmp_path / "soft.json"):
        assert [p.field for p in output_problems(out, [src])] == ["--out"], out
    assert output_problems(tmp_path / "new.json", [src]) == []


def test_output_folder_holding_an_input_and_file_outputs_that_are_folders(tmp_path):
    src = tmp_path / "in" / "q.jsonl"
    src.parent.mkdir()
    src.write_text("{}\n")
    with pytest.raises(InputError) as e:
        check_outputs({"--out": tmp_path}, [src], folders=("--out",))
    assert "contains the input" in str(e.value)
    with pytest.raises(InputError) as e:
        check_outputs({"--out": tmp_path / "in"}, [src])
    assert "is a directory" in str(e.value)
    check_outputs({"--out": None}, [src])  # an optional --out not given


def test_inputs_where_the_run_writes_are_refused(tmp_path):
    run = tmp_path / "run"
    probs = run_dir_problems(run, {"dataset": [run / "rubric.jsonl"], "extra_verdicts": [run / "verdicts/g/x.jsonl",
                                                                                            tmp_path / "ok.jsonl"]},
                             "run.yaml")
    assert [p.field for p in probs] == ["dataset", "extra_verdicts.0"]
    assert inside(run / "a" / ".." / "b", run) and not inside(run / ".." / "x", run)
