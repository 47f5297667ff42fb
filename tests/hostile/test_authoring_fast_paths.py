"""The authoring fast paths held to the one-process path: worker processes export, import,
lint, compile and diff to the same bytes and messages in the same order, a failure in a
worker leaves nothing, a large export is on disk before any rename, and compiled check
dicts are the `Check` objects dumped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gamut_local.data.records import Question
from gamut_local.errors import InputError
from gamut_local.rubric import workers as workers_module
from gamut_local.stages import revise
from tests.hostile.odd_texts import ODD_TEXTS, odd_record


def test_compiled_check_dicts_are_the_checks_dumped():
    """`compile` writes the dicts straight from the rules; they are what the `Check` objects
    (as `checks_for` gives them to the judge) dump to, so the rubric file keeps its bytes."""
    from gamut_local.data.dataset import load_questions
    from gamut_local.data.records import Question
    from gamut_local.rubric.compiler import check_dicts_for, checks_for

    sample = Path(__file__).resolve().parents[2] / "gamut_local" / "data" / "sample" / "questions.jsonl"
    questions = load_questions(sample, check_images=False)
    questions += [Question.model_validate(odd_record(k)) for k in range(len(ODD_TEXTS))]
    for q in questions:
        assert check_dicts_for(q) == [c.model_dump() for c in checks_for(q)]


def _source(tmp_path):
    src = tmp_path / "odd.jsonl"
    src.write_text("".join(json.dumps(odd_record(k), ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n"
                           for k in range(len(ODD_TEXTS))))
    return src


def _use_workers(monkeypatch) -> list:
    """Worker processes for a handful of questions, two at a time, even on one core; the list
    gains an entry each time a pool of them is started."""
    monkeypatch.setattr(workers_module, "PARALLEL_FROM", 2)
    monkeypatch.setattr(workers_module, "CHUNK", 3)
    monkeypatch.setattr(workers_module, "cores", lambda: 2)
    forked = []
    real = workers_module.ProcessPoolExecutor
    monkeypatch.setattr(workers_module, "ProcessPoolExecutor", lambda *a, **k: forked.append(1) or real(*a, **k))
    return forked


@pytest.fixture
def workers(monkeypatch):
    return _use_workers(monkeypatch)


def _tree(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_workers_export_and_import_the_bytes_one_process_does(tmp_path, monkeypatch):
    src = _source(tmp_path)
    revise.export_dataset(src, tmp_path / "one")
    revise.import_dir(tmp_path / "one", tmp_path / "one.jsonl")
    forked = _use_workers(monkeypatch)
    revise.export_dataset(src, tmp_path / "many")
    revise.import_dir(tmp_path / "many", tmp_path / "many.jsonl")
    assert forked == [1, 1]  # both went through worker processes
    assert _tree(tmp_path / "many") == _tree(tmp_path / "one")
    assert (tmp_path / "many.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes() == src.read_bytes()


def test_workers_report_every_bad_file_in_file_order(tmp_path, workers):
    revise.export_dataset(_source(tmp_path), tmp_path / "yaml")
    files = sorted((tmp_path / "yaml").iterdir())
    files[1].write_text(files[1].read_text().replace("tier: valuable", "tier: vital", 1))
    files[7].write_text(files[7].read_text() + "question_id: again\n")
    files[30].write_bytes(b"\xff\xfe")
    with pytest.raises(InputError) as e:
        revise.import_dir(tmp_path / "yaml", tmp_path / "out.jsonl")
    where = [(p.file, p.line is not None) for p in e.value.problems]
    assert where == [(str(files[1]), True), (str(files[7]), True), (str(files[30]), False)]
    assert "appears twice" in e.value.problems[1].message
    assert not (tmp_path / "out.jsonl").exists()


def test_a_failure_in_a_worker_leaves_no_file(tmp_path, monkeypatch, workers):
    real = revise.export_text

    def fail_on_q20(rec, q, source):
        if rec["question_id"] == "q20":
            raise OSError(28, "No space left on device")
        return real(rec, q, source)

    monkeypatch.setattr(revise, "export_text", fail_on_q20)
    with pytest.raises(OSError, match="No space left"):
        revise.export_dataset(_source(tmp_path), tmp_path / "yaml")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["odd.jsonl"]  # no folder, no temporary one


def test_workers_lint_every_question_as_one_process_does(tmp_path, monkeypatch):
    """The lint corpus written as one dataset: through worker processes, the same findings in
    the same order (and the dataset's tier balance over all of them) as in this process."""
    from gamut_local.rubric.lint import lint_questions
    from gamut_local.stages.lint import lint_file
    from tests.rubric.test_lint import CORPUS, _build

    rows = [_build(change).model_dump(exclude_defaults=True) | {"question_id": f"q{k}"}
            for k, (_, change, _) in enumerate(CORPUS * 2)]
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    one = lint_questions([(Question.model_validate(r), k) for k, r in enumerate(rows, start=1)], str(path))
    forked = _use_workers(monkeypatch)
    many = lint_file(path)
    assert forked == [1]
    assert {f.rule for f in one} >= {"duplicate_checks", "stranger_test", "tier_balance"}
    assert many == one


def _mixed_dataset(tmp_path):
    """The odd records, a question of 45 items (many pieces), one judged on given checks
    and one with its own text-only checks beside its meta-rubric."""
    rows = [odd_record(k) for k in range(len(ODD_TEXTS))]
    big = odd_record(0) | {"question_id": "big"}
    big["meta_rubric"]["items"] = [dict(item, id=f"{item['id']}.{n}") for n in range(9)
                                   for item in odd_record(n)["meta_rubric"]["items"]]
    check = {"check_id": "g1", "text": "The response names the drink.", "tier": "answer_critical"}
    given = {"question_id": "given", "domain": "d", "question": "What is this?", "checks": [check]}
    both = odd_record(3) | {"question_id": "both", "checks_text_only": [check | {"text": "ünï “q” 😀"}]}
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in [*rows[:5], big, given, *rows[5:], both]),
                    encoding="utf-8")
    return path


@pytest.mark.parametrize("use_workers", [False, True])
def test_compile_in_pieces_writes_the_bytes_of_one_pass(tmp_path, monkeypatch, use_workers):
    """`compile` cuts a question's items into pieces (worker processes for a large dataset) and
    joins their JSON: the same bytes, check counts included, as compiling each question whole."""
    from gamut_local.data.dataset import load_questions
    from gamut_local.rubric.compiler import compile_dataset
    from gamut_local.rundir.store import write_jsonl
    from gamut_local.stages import compile as compile_stage

    path = _mixed_dataset(tmp_path)
    write_jsonl(tmp_path / "whole.jsonl", rows := compile_dataset(load_questions(path, check_images=False)))
    monkeypatch.setattr(compile_stage, "PIECE", 4)
    forked = _use_workers(monkeypatch) if use_workers else []
    n = compile_stage.compile_file(path, tmp_path / "pieces.jsonl")
    assert forked == ([1] if use_workers else [])
    assert (tmp_path / "pieces.jsonl").read_bytes() == (tmp_path / "whole.jsonl").read_bytes()
    assert n == (len(rows), sum(len(r["checks"]) + len(r.get("checks_text_only", [])) for r in rows))


@pytest.mark.parametrize("use_workers", [False, True])
def test_export_in_pieces_writes_the_files_of_one_pass(tmp_path, monkeypatch, use_workers):
    """`export` writes a large meta-rubric's items in pieces (worker processes for a large
    dataset) and the frame around them last: the same files as writing each question whole,
    and `import` reads them back to the same bytes."""
    path = _mixed_dataset(tmp_path)
    revise.export_dataset(path, tmp_path / "whole")
    monkeypatch.setattr(revise, "PIECE", 4)
    forked = _use_workers(monkeypatch) if use_workers else []
    revise.export_dataset(path, tmp_path / "pieces")
    revise.import_dir(tmp_path / "pieces", tmp_path / "back.jsonl")
    assert forked == ([1, 1] if use_workers else [])
    assert _tree(tmp_path / "pieces") == _tree(tmp_path / "whole")
    assert "id: e8.8" in (tmp_path / "pieces" / "0006-big.yaml").read_text()
    assert [json.loads(line) for line in (tmp_path / "back.jsonl").read_text().split("\n")[:-1]] == [
        json.loads(line) for line in path.read_text().split("\n")[:-1]]


def test_workers_diff_as_one_process_does(tmp_path, monkeypatch):
    """`diff` in worker processes: the same changes, in the same order, as in this process,
    questions added and removed included; records read equal are not compared again."""
    path = _mixed_dataset(tmp_path)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n")[:-1]]
    rows[0]["meta_rubric"]["items"][0]["tier"] = "context"
    rows[5]["meta_rubric"]["items"][7]["subject"] = "another subject"
    rows[6]["checks"][0]["text"] = "The response names the cup."
    rows[9]["meta_rubric"]["items"][1]["evidence"] = []  # a default written out: no change
    del rows[3]["meta_rubric"]["items"][2]
    rows = rows[:11] + [rows[0] | {"question_id": "new"}] + rows[12:]
    revised = tmp_path / "revised.jsonl"
    revised.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    one = revise.diff_files(path, revised)
    forked = _use_workers(monkeypatch)
    many = revise.diff_files(path, revised)
    assert forked == [1]
    assert many == one
    assert list(one[0]) == ["q0", "q3", "big", "given", "q9", "new"]
    assert one[0]["q9"]["status"] == "removed" and one[0]["new"]["status"] == "added"


def test_a_large_export_is_on_disk_by_one_syncfs_before_any_rename(tmp_path, monkeypatch):
    """From SYNCFS_FROM files, one syncfs of the file system puts every temporary on disk
    before the first rename (no fsync per file); the folder is still fsynced after the last."""
    import os

    if not revise._syncfs_works():
        pytest.skip("no syncfs that reports write-back errors here")
    events = []
    real_fsync, real_replace, real_syncfs = os.fsync, os.replace, revise.syncfs
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"))),
                                                 real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(("replace", str(a))), real_replace(a, b))[1])
    monkeypatch.setattr(revise, "syncfs", lambda folder: (events.append(("syncfs", str(folder))),
                                                          real_syncfs(folder))[1])
    monkeypatch.setattr(revise, "SYNCFS_FROM", 3)
    folder = tmp_path / "yaml"
    assert len(revise.export_dataset(_source(tmp_path), folder)) == len(ODD_TEXTS)
    kinds = [e[0] for e in events]
    assert kinds[0] == "syncfs" and kinds.count("syncfs") == 1 and kinds.index("replace") == 1
    assert [e[1] for e in events if e[0] == "fsync"] == [str(folder), str(tmp_path)]
    assert kinds[-2:] == ["fsync", "fsync"]
