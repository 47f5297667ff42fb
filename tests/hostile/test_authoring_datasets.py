"""`export`, `import`, `lint`, `compile` and `diff` on odd and mixed datasets: the same bytes
back, every bad file reported in file order, questions of many items and given checks."""

from __future__ import annotations

import json

import pytest

from gamut_local.data.records import Question
from gamut_local.errors import InputError
from gamut_local.stages import revise
from tests.hostile.odd_texts import ODD_TEXTS, odd_record


def _source(tmp_path):
    src = tmp_path / "odd.jsonl"
    src.write_text("".join(json.dumps(odd_record(k), ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n"
                           for k in range(len(ODD_TEXTS))))
    return src


def test_import_reports_every_bad_file_in_file_order(tmp_path):
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


def test_lint_file_finds_what_linting_each_question_finds(tmp_path):
    """The lint corpus written as one dataset: the same findings in the same order (and the
    dataset's tier balance over all of them) as linting the questions read one by one."""
    from gamut_local.rubric.lint import lint_questions
    from gamut_local.stages.lint import lint_file
    from tests.rubric.test_lint import CORPUS, _build

    rows = [_build(change).model_dump(exclude_defaults=True) | {"question_id": f"q{k}"}
            for k, (_, change, _) in enumerate(CORPUS * 2)]
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    one = lint_questions([(Question.model_validate(r), k) for k, r in enumerate(rows, start=1)], str(path))
    many = lint_file(path)
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


def test_compile_writes_every_question_and_counts_its_checks(tmp_path):
    """`compile` of odd texts, a question of many items, given checks and text-only checks:
    each question's row as `compile_dataset` makes it, and the checks of both variants counted."""
    from gamut_local.data.dataset import load_questions
    from gamut_local.rubric.compiler import compile_dataset
    from gamut_local.rundir.store import write_jsonl
    from gamut_local.stages import compile as compile_stage

    path = _mixed_dataset(tmp_path)
    write_jsonl(tmp_path / "whole.jsonl", rows := compile_dataset(load_questions(path, check_images=False)))
    n = compile_stage.compile_file(path, tmp_path / "pieces.jsonl")
    assert (tmp_path / "pieces.jsonl").read_bytes() == (tmp_path / "whole.jsonl").read_bytes()
    assert (n.questions, n.checks) == (len(rows), sum(len(r["checks"]) + len(r.get("checks_text_only", []))
                                                   for r in rows))


def test_a_mixed_dataset_exports_and_imports_back(tmp_path):
    """`export` of odd texts, a question of many items, given checks and text-only checks:
    every item written, and `import` reads the folder back to the same records."""
    path = _mixed_dataset(tmp_path)
    revise.export_dataset(path, tmp_path / "pieces")
    revise.import_dir(tmp_path / "pieces", tmp_path / "back.jsonl")
    assert "id: e8.8" in (tmp_path / "pieces" / "0006-big.yaml").read_text()
    assert [json.loads(line) for line in (tmp_path / "back.jsonl").read_text().split("\n")[:-1]] == [
        json.loads(line) for line in path.read_text().split("\n")[:-1]]


def test_diff_of_a_mixed_dataset(tmp_path):
    """`diff`: the questions that changed, in order, added and removed ones included; a
    default written out is no change."""
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
    assert list(one[0]) == ["q0", "q3", "big", "given", "q9", "new"]
    assert one[0]["q9"]["status"] == "removed" and one[0]["new"]["status"] == "added"
