"""The GAMUT release adapter on parquet fixtures written in the release's known shape."""

from __future__ import annotations

import json

import pytest

pa = pytest.importorskip("pyarrow")

from gamut_local.data.dataset import collecting_warnings, load_questions, read_dataset, warning_lines  # noqa: E402
from gamut_local.data.gamut_release import load_release, merge_text_only, row_to_record  # noqa: E402
from gamut_local.errors import InputError, Problem  # noqa: E402
from gamut_local.rubric.compiler import compile_dataset  # noqa: E402
from tests.support import processes  # noqa: E402
from tests.support.release import (  # noqa: E402
    BASIL,
    BRIDGE,
    BROKEN,
    LONG,
    LONG_INGREDIENTS,
    OWL,
    WARNED,
    int_id_rows,
    long_ingredient_row,
    malformed_row,
    release_rows,
    scale_rows,
    text_only_rows,
    warning_row,
    write_parquet,
    write_release,
)


def _questions(path, **kw):
    return {q.question_id: q for q in load_release(path, **kw).questions}


def test_rows_become_checks_with_their_evidence_and_no_made_up_meta_rubric(tmp_path):
    loaded = load_release(write_release(tmp_path / "test.parquet"))
    assert loaded.warnings == []
    by_id = {q.question_id: q for q in loaded.questions}
    assert list(by_id) == [BASIL, BRIDGE, OWL]
    basil = by_id[BASIL]
    assert [(c.check_id, c.tier, c.source_item, c.evidence) for c in basil.checks] == [
        ("answer_critical.1", "answer_critical", "identity", ["1"]),
        ("valuable.1", "valuable", "pesto", ["2"]),
        ("valuable.2", "valuable", "family", ["1"]),
        ("context.1", "context", "origin", ["2"]),
    ]
    assert basil.checks[1].text == "The response says basil is the base of pesto."
    assert {c.kind for c in basil.checks} == {"release"}
    assert basil.meta_rubric is None  # the release has checks, not a typed meta-rubric
    assert [(s.id, s.title) for s in basil.snippets] == [("1", "Basil"), ("2", "Pesto")]
    assert basil.snippets[1].text.startswith("Pesto alla genovese")
    assert basil.domain == "unknown" and basil.image is None
    # The compiler passes the release's checks through, evidence included.
    (row, *_) = compile_dataset([basil])
    assert [c["evidence"] for c in row["checks"]] == [["1"], ["2"], ["1"], ["2"]]
    assert "checks_text_only" not in row


def test_spaced_tier_spelling_missing_lists_and_question_fallback(tmp_path):
    by_id = _questions(write_release(tmp_path / "test.parquet"))
    bridge = by_id[BRIDGE]  # `Answer Critical`, no Context list
    assert [c.tier for c in bridge.checks] == ["answer_critical", "valuable"]
    assert bridge.checks[1].evidence == []
    owl = by_id[OWL]  # no rubrics.Question, empty Snippets and Context
    assert owl.question == "What bird is this?" and len(owl.checks) == 1 and owl.snippets == []


def test_id_column_and_rubrics_question_fallbacks(tmp_path):
    row = {"id": "alt-1", "rubrics": release_rows()[0]["rubrics"]}  # no session_id, no question column
    (q,) = load_release(write_parquet([row], tmp_path / "alt.parquet")).questions
    assert q.question_id == "alt-1"
    assert q.question == "What herb is this and what is it used for?"


def test_rubrics_stored_as_json_text_are_read(tmp_path):
    rows = [{**r, "rubrics": json.dumps(r["rubrics"])} for r in release_rows()]
    qs = load_release(write_parquet(rows, tmp_path / "json.parquet")).questions
    assert [len(q.checks) for q in qs] == [4, 2, 1]


def test_integer_snippet_ids_match_text_citations_with_one_warning(tmp_path):
    path = write_parquet(int_id_rows(), tmp_path / "int.parquet")
    loaded = load_release(path)
    by_id = {q.question_id: q for q in loaded.questions}
    assert [s.id for s in by_id[BASIL].snippets] == ["1", "2"]
    assert [c.evidence for c in by_id[BASIL].checks] == [["1"], ["2"], ["1"], ["2"]]
    (w,) = loaded.warnings  # one per file, not one per row
    assert (w.file, w.field) == (str(path), "rubrics.Snippets.id")
    assert w.message.startswith("2 row(s) give snippet ids and citations as different types")
    assert "first at row 0" in w.message  # the owl cites nothing, so it does not count
    with pytest.raises(InputError) as e:
        load_release(path, strict=True)
    assert e.value.problems == [w]
    # An integer column with nulls arrives as floats (1.0): still snippet "1".
    rows = int_id_rows()
    for s in rows[0]["rubrics"]["Snippets"]:
        s["id"] = float(s["id"])
    floats = load_release(write_parquet(rows[:1], tmp_path / "float.parquet"))
    assert [c.evidence for c in floats.questions[0].checks] == [["1"], ["2"], ["1"], ["2"]]
    assert [w.field for w in floats.warnings] == ["rubrics.Snippets.id"]


def test_dangling_citation_and_empty_snippet_keep_the_check_with_warnings(tmp_path):
    path = write_release(tmp_path / "test.parquet", warned=True)
    loaded = load_release(path)
    q = {q.question_id: q for q in loaded.questions}[WARNED]
    assert [s.id for s in q.snippets] == ["1"]  # snippet 2 has no text: left out
    assert [(c.check_id, c.evidence) for c in q.checks] == [("answer_critical.1", ["1"]), ("valuable.1", [])]
    where = f"{path}[row 3]"
    assert [str(w) for w in loaded.warnings] == [
        f"{where}: rubrics.Snippets.1.Text: snippet 2 has no text; snippet left out",
        f"{where}: rubrics.Answer_Critical.0.Specifics.1.Citation: cites snippet 9, which is not among the "
        "row's snippets with text; citation dropped, check kept",
        f"{where}: rubrics.Valuable.0.Specifics.0.Citation: cites snippet 2, which is not among the "
        "row's snippets with text; citation dropped, check kept",
    ]
    assert len(loaded.questions) == 4
    with pytest.raises(InputError) as e:
        load_release(path, strict=True)
    assert e.value.problems == loaded.warnings


def test_an_unusable_row_is_left_out_and_named_the_rest_load(tmp_path):
    path = write_release(tmp_path / "bad.parquet", malformed=True, warned=True)
    loaded = load_release(path)
    assert [q.question_id for q in loaded.questions] == [BASIL, BRIDGE, OWL, WARNED]
    assert BROKEN not in {q.question_id for q in loaded.questions}
    left_out = [str(w) for w in loaded.warnings if w.file == f"{path}[row 4]"]
    assert left_out == [
        f"{path}[row 4]: rubrics.Valuable.1.Ingredient: missing or empty; this question is left out",
        f"{path}[row 4]: rubrics.Answer_Critical.0.Specifics.0.Citation: cites snippet 9, which is not "
        "among the row's snippets with text; citation dropped, check kept",
    ]
    with pytest.raises(InputError) as e:
        load_release(path, strict=True)
    lines = [str(p) for p in e.value.problems]
    assert lines[0] == f"{path}[row 4]: rubrics.Valuable.1.Ingredient: missing or empty"
    assert len(lines) == 1 + len(loaded.warnings) - 1  # the row error, plus every warning


def test_long_instruction_laden_ingredients_stay_verbatim_into_the_judge_prompt(tmp_path):
    from gamut_local.prompts.judge import judge_conversations

    (q,) = load_release(write_parquet([long_ingredient_row()], tmp_path / "long.parquet")).questions
    assert q.question_id == LONG
    assert [c.text for c in q.checks] == list(LONG_INGREDIENTS)  # newlines, lists, quotes kept
    convs = judge_conversations(q.question, "An answer.", [c.text for c in q.checks], None, None)
    for conv, text in zip(convs, LONG_INGREDIENTS):
        assert any(text in s for s in _strings(conv))


def _strings(value):
    """Every string inside a conversation (messages, content parts)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def test_a_different_shape_lists_the_columns_found(tmp_path):
    path = write_parquet([{"prompt": "x", "answer": "y"}], tmp_path / "other.parquet")
    with pytest.raises(InputError) as e:
        load_release(path)
    (p,) = e.value.problems
    assert "missing column(s) session_id (or id), rubrics" in p.message
    assert "columns found: prompt, answer" in p.message


def test_not_parquet_missing_file_and_no_usable_row(tmp_path):
    junk = tmp_path / "junk.parquet"
    junk.write_text("not parquet")
    for path, msg in ((junk, "cannot read as parquet"), (tmp_path / "none.parquet", "file not found")):
        with pytest.raises(InputError) as e:
            load_release(path)
        assert msg in e.value.problems[0].message
    only_bad = write_parquet([malformed_row()], tmp_path / "bad.parquet")
    with pytest.raises(InputError) as e:
        load_release(only_bad)
    assert [p.message for p in e.value.problems][-1] == "none of its 1 rows is a usable question"


def test_a_row_with_no_items_is_left_out_and_a_duplicate_id_refuses_the_file(tmp_path):
    rows = release_rows()[:1] + [{"session_id": "empty", "question": "q?", "rubrics": {"Snippets": []}}]
    path = write_parquet(rows, tmp_path / "empty.parquet")
    loaded = load_release(path)
    assert [q.question_id for q in loaded.questions] == [BASIL]
    ((file, fld, message),) = [(w.file, w.field, w.message) for w in loaded.warnings]
    assert (file, fld) == (f"{path}[row 1]", "rubrics") and "no rubric items" in message
    path = write_parquet(rows + [dict(release_rows()[0])], tmp_path / "dupe.parquet")
    with pytest.raises(InputError) as e:
        load_release(path)
    assert [(p.file, p.field, p.message) for p in e.value.problems] == [
        (f"{path}[row 2]", "session_id", f"duplicate id {BASIL!r} (first at {path}[row 0])")]


def test_row_to_record_notes_errors_apart_from_warnings():
    record, notes = row_to_record(warning_row())
    assert record is not None and notes.errors == [] and len(notes.warnings) == 3
    record, notes = row_to_record({"session_id": " ", "rubrics": 3})
    assert record is None
    assert [f for f, _ in notes.errors] == ["session_id", "rubrics"]


def test_the_text_only_split_gives_wording_and_its_own_checks_where_they_differ(tmp_path):
    main = load_release(write_release(tmp_path / "test.parquet")).questions
    text_only = load_release(write_parquet(text_only_rows(), tmp_path / "test_text_only.parquet")).questions
    merged, report = merge_text_only(main, text_only)
    assert report == {"text_only_without_main_question": [], "text_only_rubric_differs": [BRIDGE],
                      "no_text_only_form": [OWL]}
    basil, bridge, owl = merged
    assert basil.question_text_only == "What is sweet basil used for?" and basil.checks_text_only is None
    assert owl.question_text_only is None
    assert bridge.checks == main[1].checks  # the multimodal variant keeps the main split's checks
    assert [c.text for c in bridge.checks_text_only] == [
        "The response says the bridge opened in 1937.", "The response says the bridge is in San Francisco.",
        "The response says the bridge is painted orange."]
    # Each variant is judged on its own split's checks.
    assert bridge.checks_for_variant("text_only") == bridge.checks_text_only
    assert bridge.checks_for_variant("multimodal") == bridge.checks
    assert basil.checks_for_variant("text_only") == basil.checks
    (row,) = [r for r in compile_dataset(merged) if r["question_id"] == BRIDGE]
    assert [c["text"] for c in row["checks_text_only"]] == [c.text for c in bridge.checks_text_only]


def test_load_questions_reads_the_text_only_sibling(tmp_path):
    path = write_release(tmp_path / "release" / "test.parquet")
    write_parquet(text_only_rows(), tmp_path / "release" / "test_text_only.parquet")
    by_id = {q.question_id: q for q in load_questions(path)}
    assert by_id[BRIDGE].question_text_only == "When was the Golden Gate Bridge built?"
    assert by_id[BRIDGE].checks_text_only is not None and by_id[OWL].question_text_only is None
    # The text-only split read on its own is a dataset too (its wording is then `question`).
    alone = load_questions(tmp_path / "release" / "test_text_only.parquet")
    assert [q.question for q in alone] == ["What is sweet basil used for?", "When was the Golden Gate Bridge built?"]


def test_warnings_are_collected_once_per_command_and_strict_comes_from_the_collector(tmp_path):
    path = write_release(tmp_path / "test.parquet", warned=True)
    with collecting_warnings() as warnings:
        load_questions(path)
        load_questions(path)  # a command reading the file twice reports each warning once
    assert len(warnings) == 3
    with collecting_warnings(strict=True), pytest.raises(InputError):
        load_questions(path)
    assert len(load_questions(path)) == 4  # outside a collector: not strict


def test_many_warnings_are_summarised_by_kind():
    many = [Problem(f"f[row {i}]", None, f"rubrics.Valuable.{i % 3}.Specifics.0.Citation",
                    f"cites snippet {i}, which is not among the row's snippets with text") for i in range(30)]
    many.append(Problem("f[row 0]", None, "rubrics.Snippets.1.Text", "snippet 2 has no text; snippet left out"))
    many += [Problem(f"f[row {i}]", None, "session_id", f"duplicate id 'id-{i}' (first at f[row 0])")
             for i in range(2)]
    lines = warning_lines(many)
    assert lines == [
        f"30 x rubrics.Valuable.N.Specifics.N.Citation: cites snippet... (first: {many[0]})",
        f"1 x rubrics.Snippets.N.Text: snippet... (first: {many[30]})",
        f"2 x session_id: duplicate id '...' (first at f[row... (first: {many[31]})",
    ]
    assert warning_lines(many[:3]) == [str(p) for p in many[:3]]


def test_cli_validate_lists_warnings_and_strict_fails(gamut, tmp_path):
    good = write_release(tmp_path / "good" / "test.parquet")
    res = gamut("validate", str(good))
    assert res.exit_code == 0 and "3 questions, all valid" in res.output
    bad = write_release(tmp_path / "bad" / "test.parquet", malformed=True, warned=True)
    res = gamut("validate", str(bad))
    assert res.exit_code == 0, res.output
    assert "4 questions, 5 warning(s)" in res.output
    assert "warning: " in res.output and "rubrics.Valuable.1.Ingredient: missing or empty; this question is left out" \
        in res.output
    res = gamut("validate", "--strict", str(bad))
    assert res.exit_code == 1
    assert "rubrics.Valuable.1.Ingredient: missing or empty" in res.output and "Traceback" not in res.output
    write_parquet(text_only_rows(), tmp_path / "good" / "test_text_only.parquet")
    res = gamut("validate", str(good))
    assert f"text-only form: 2 questions (1 with their own checks); none for 1: {OWL}" in res.output


def test_cli_compile_prints_warnings_at_the_end_and_takes_strict(gamut, tmp_path):
    path = write_release(tmp_path / "test.parquet", warned=True)
    res = gamut("compile", str(path), "--out", str(tmp_path / "rubric.jsonl"))
    assert res.exit_code == 0, res.output
    assert res.output.count("warning: ") == 3 and "3 warning(s) about the dataset" in res.output
    rows = [json.loads(line) for line in (tmp_path / "rubric.jsonl").read_text().splitlines()]
    assert len(rows) == 4
    res = gamut("compile", str(path), "--out", str(tmp_path / "strict.jsonl"), "--strict")
    assert res.exit_code == 1 and not (tmp_path / "strict.jsonl").exists()


def test_a_full_size_release_loads_and_compiles(tmp_path):
    """1,813 rows of ~15 release-length checks (timed in scripts/bench_release.py, not here)."""
    rows = scale_rows()
    path = write_parquet(rows, tmp_path / "test.parquet")
    loaded = read_dataset(path)
    assert loaded.warnings == [] and len(loaded.questions) == 1813
    assert len({q.question_id for q in loaded.questions}) == 1813
    compiled = compile_dataset(loaded.questions)
    assert sum(len(r["checks"]) for r in compiled) == 1813 * 15
    first, last = loaded.questions[0], loaded.questions[-1]
    assert [c.tier for c in first.checks].count("answer_critical") == 8
    assert last.checks[-1].text == rows[-1]["rubrics"]["Context"][-1]["Ingredient"]
    assert last.checks[-1].check_id == "context.2"
    cited = {e for q in loaded.questions for c in q.checks for e in c.evidence}
    assert cited == {"1", "2", "3", "4"}


def test_each_variant_is_judged_and_planned_on_its_own_checks(tmp_path):
    """The judge stage's worklist and the cost plan look checks up per variant (checks_for_variant)."""
    import yaml

    from gamut_local.cluster.plan import plan_run
    from gamut_local.config import JudgeSpec
    from gamut_local.rubric.compiler import checks_for
    from gamut_local.stages.judge import pending_verdicts

    path = write_release(tmp_path / "release" / "test.parquet")
    write_parquet(text_only_rows(), tmp_path / "release" / "test_text_only.parquet")
    questions = {q.question_id: q for q in load_questions(path)}
    answers = [{"question_id": BRIDGE, "model": "m", "variant": v, "response": "It opened in 1937."}
               for v in ("multimodal", "text_only")]
    checks = {qid: checks_for(q) for qid, q in questions.items()}
    items, done = pending_verdicts(JudgeSpec(name="j", path=str(tmp_path / "no-model")), answers, questions,
                                   checks, tmp_path / "run")
    assert done == 0
    texts = {it.answer["variant"]: [c.text for c in it.checks] for it in items}
    assert texts["multimodal"][1] == "The response names the Golden Gate Bridge."
    assert texts["text_only"][1] == "The response says the bridge is in San Francisco."
    run = {"name": "rel", "dataset": "release/test.parquet", "output_dir": "out",
           "variants": ["multimodal", "text_only"],
           "models": [{"name": "m", "path": "/m", "vision": True}], "judges": [{"name": "j", "path": "/j"}]}
    requests = {}
    for variant in ("multimodal", "text_only"):
        (tmp_path / "run.yaml").write_text(yaml.safe_dump({**run, "variants": [variant]}))
        requests[variant] = plan_run(tmp_path / "run.yaml").totals["judge"].requests
    # The bridge has 2 checks in the main split, 3 in the text-only one.
    assert requests == {"multimodal": 7, "text_only": 8}


def test_cli_plan_and_slurm_print_the_warnings_and_take_strict(gamut, tmp_path):
    import yaml

    write_release(tmp_path / "test.parquet", malformed=True)
    run = {"name": "rel", "dataset": "test.parquet", "output_dir": "out", "variants": ["text_only"],
           "models": [{"name": "m", "path": "/m"}], "judges": [{"name": "j", "path": "/j"}]}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(run))
    res = gamut("plan", "--config", str(tmp_path / "run.yaml"))
    assert res.exit_code == 0, res.output
    assert "warning: " in res.output and "this question is left out" in res.output
    assert "3 questions" in res.output
    res = gamut("plan", "--config", str(tmp_path / "run.yaml"), "--strict")
    assert res.exit_code == 1 and "rubrics.Valuable.1.Ingredient: missing or empty" in res.output
    res = gamut("slurm", "--config", str(tmp_path / "run.yaml"), "--dry-run", "--strict")
    assert res.exit_code == 1 and "rubrics.Valuable.1.Ingredient: missing or empty" in res.output


def test_loading_a_release_never_imports_pandas(tmp_path):
    """pyarrow's read_table imports pandas (0.3 s) through pyarrow.dataset; a release load
    must not pay for it."""
    import sys

    path = write_release(tmp_path / "test.parquet")
    code = ("import sys; from gamut_local.data.dataset import load_questions; "
            "print(len(load_questions(sys.argv[1], check_images=False))); print('pandas' in sys.modules)")
    # 120 s: one Python start-up reading a small parquet, on a busy machine.
    out = processes.run([sys.executable, "-c", code, str(path)], timeout=120, waiting_for="the release load")
    assert out.returncode == 0, out.stderr
    count, pandas = out.stdout.split()
    assert int(count) > 0 and pandas == "False"
