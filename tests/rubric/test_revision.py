"""Human revision: export -> import round-trips byte for byte; edits are validated (with the
YAML line), stamped with provenance and shown by diff."""

from __future__ import annotations

import json

from gamut_local.rundir.store import dumps
from gamut_local.stages.revise import diff_files, export_dataset, import_dir
from gamut_local.demo.authoring import sample_records


def _canonical_sample(tmp_path):
    path = tmp_path / "sample.jsonl"
    path.write_text("".join(dumps(r) + "\n" for r in sample_records()), encoding="utf-8")
    return path


def test_unedited_export_imports_to_the_same_bytes(tmp_path):
    src = _canonical_sample(tmp_path)
    paths = export_dataset(src, tmp_path / "yaml")
    assert len(paths) == len(sample_records()) and paths[0].name == "0001-food-espresso.yaml"
    summary = import_dir(tmp_path / "yaml", tmp_path / "back.jsonl")
    assert summary.revised == ()
    assert (tmp_path / "back.jsonl").read_bytes() == src.read_bytes()
    # and again: export of the imported file is the same text
    export_dataset(tmp_path / "back.jsonl", tmp_path / "yaml2")
    for p in paths:
        assert (tmp_path / "yaml2" / p.name).read_text().replace("back.jsonl", "sample.jsonl") == p.read_text()


def test_yaml_shows_the_compiled_checks_as_comments(tmp_path):
    paths = export_dataset(_canonical_sample(tmp_path), tmp_path / "yaml")
    text = paths[0].read_text()
    assert text.startswith("# food-espresso: exported by `gamut-local export` from sample.jsonl.")
    assert text.splitlines()[4] == "question_id: food-espresso"
    assert "    #   identity.fact [answer_critical]: The response states the following about the drink" in text


def test_edits_are_stamped_and_diffed(tmp_path):
    src = _canonical_sample(tmp_path)
    paths = export_dataset(src, tmp_path / "yaml")
    text = paths[0].read_text()
    text = text.replace("  - id: crema\n    type: simple\n    tier: valuable", "  - id: crema\n    type: simple\n    tier: context")
    text = text.replace("fact: it is an espresso, a small", "fact: it is an espresso, a short")
    paths[0].write_text(text)
    summary = import_dir(tmp_path / "yaml", tmp_path / "rev.jsonl", revised_by="alice", revised_on="2026-12-01")
    assert summary.revised == ("food-espresso",)
    rows = [json.loads(line) for line in (tmp_path / "rev.jsonl").read_text().splitlines()]
    assert rows[0]["provenance"] == {"revised_on": "2026-12-01", "revised_by": "alice"}
    assert all("provenance" not in r for r in rows[1:])
    changes, lines = diff_files(src, tmp_path / "rev.jsonl")
    assert list(changes) == ["food-espresso"]
    assert lines == ["food-espresso: changed",
                     "  ~ item crema re-tiered valuable -> context",
                     "  ~ item identity reworded",
                     "  ~ check crema.fact re-tiered valuable -> context",
                     "  ~ check identity.fact reworded"]


def test_diff_names_added_and_removed_items_checks_and_questions(tmp_path):
    rows = sample_records(3)
    a = tmp_path / "a.jsonl"
    a.write_text("".join(dumps(r) + "\n" for r in rows))
    b_rows = json.loads(json.dumps(rows[:2]))
    b_rows[0]["meta_rubric"]["items"] = [i for i in b_rows[0]["meta_rubric"]["items"] if i["id"] != "caffeine"]
    b_rows[0]["meta_rubric"]["items"].append({"id": "cup", "type": "simple", "tier": "context",
                                               "fact": "it is served in a demitasse", "subject": "the espresso"})
    b = tmp_path / "b.jsonl"
    b.write_text("".join(dumps(r) + "\n" for r in b_rows))
    changes, lines = diff_files(a, b)
    assert lines[:5] == ["food-espresso: changed", "  + item cup", "  - item caffeine",
                         "  + check cup.fact", "  - check caffeine.fact"]
    assert changes[rows[2]["question_id"]]["status"] == "removed"


def test_an_invalid_edit_names_file_line_and_field_and_writes_nothing(tmp_path, gamut):
    paths = export_dataset(_canonical_sample(tmp_path), tmp_path / "yaml")
    text = paths[0].read_text()
    lines = text.splitlines()
    no = next(i for i, line in enumerate(lines, 1) if line.strip() == "tier: valuable")
    lines[no - 1] = lines[no - 1].replace("valuable", "important")
    paths[0].write_text("\n".join(lines) + "\n")
    result = gamut("import", tmp_path / "yaml", "--out", tmp_path / "rev.jsonl")
    assert result.exit_code == 1
    assert f"{paths[0]}:{no}: meta_rubric.items.1.simple.tier: Input should be 'answer_critical', 'valuable' or 'context'" in result.output
    assert not (tmp_path / "rev.jsonl").exists()


def test_export_refuses_a_folder_that_already_holds_yaml(tmp_path, gamut):
    src = _canonical_sample(tmp_path)
    assert gamut("export", src, "--out", tmp_path / "yaml").exit_code == 0
    result = gamut("export", src, "--out", tmp_path / "yaml")
    assert result.exit_code == 1 and "already holds YAML files" in result.output


def test_diff_compiles_only_changed_items_and_finds_what_compiling_all_finds():
    """Every kind of item edit on the sample (reworded, re-tiered, retyped, added, removed,
    a question turned into given checks): the checks' changes equal those of compiling both
    sides whole, which is what `diff` did before it compiled only the changed items."""
    import copy

    from gamut_local.data.records import Question
    from gamut_local.rubric.revision import _changes, _checks, diff_records

    records = [r for r in sample_records() if r.get("meta_rubric")]
    before = {r["question_id"]: Question.model_validate(r) for r in records}
    after_records = copy.deepcopy(records)
    for k, rec in enumerate(after_records):
        items = rec["meta_rubric"]["items"]
        edit = k % 5
        if edit == 0:
            items[0]["tier"] = "context" if items[0]["tier"] != "context" else "valuable"
        elif edit == 1:
            items[-1] = {"id": items[-1]["id"], "type": "simple", "tier": "valuable", "fact": "a new fact",
                         "subject": "the thing", "evidence": items[-1].get("evidence", [])}
        elif edit == 2:
            items.append({**copy.deepcopy(items[0]), "id": "added"})
            del items[1]
        elif edit == 3:
            compiled = _checks(before[rec["question_id"]])  # given as checks now, one fewer
            rec["checks"] = [{"check_id": cid, "text": text, "tier": tier}
                             for cid, (tier, text) in list(compiled.items())[:-1]]
            del rec["meta_rubric"]
        else:
            items[0]["subject"] = "another subject"
    after = {r["question_id"]: Question.model_validate(r) for r in after_records}
    got = diff_records(before, after)
    assert len(before) >= 5 and len(got) == len(before)  # every question was edited
    for qid, entry in got.items():
        whole = _changes(_checks(before[qid]), _checks(after[qid]))
        assert entry["checks"] == whole, qid
    assert any(e["checks"]["retiered"] for e in got.values()) and any(e["checks"]["reworded"] for e in got.values())
    assert any(e["checks"]["added"] for e in got.values()) and any(e["checks"]["removed"] for e in got.values())
