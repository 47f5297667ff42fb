"""The GAMUT release adapter on parquet fixtures written in the release's public shape."""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")

from gamut_local.data.dataset import load_questions  # noqa: E402
from gamut_local.data.gamut_release import load_release  # noqa: E402
from gamut_local.errors import InputError  # noqa: E402
from gamut_local.testing.release import (  # noqa: E402
    malformed_row,
    release_rows,
    write_parquet,
    write_release,
)


def test_rows_become_questions_with_the_release_checks(tmp_path):
    questions = load_release(write_release(tmp_path / "test.parquet"))
    by_id = {q.question_id: q for q in questions}
    assert list(by_id) == ["s-basil", "s-bridge", "s-owl"]
    basil = by_id["s-basil"]
    assert [(c.check_id, c.tier, c.source_item) for c in basil.checks] == [
        ("answer_critical.1", "answer_critical", "identity"),
        ("valuable.1", "valuable", "pesto"),
        ("valuable.2", "valuable", "family"),
        ("context.1", "context", "origin"),
    ]
    assert basil.checks[1].text == "The response says basil is the base of pesto."
    assert basil.checks[1].evidence == ["2"] and basil.checks[0].kind == "release"
    # Snippets travel with the question inside the meta-rubric, mirrored by simple items.
    assert [s.id for s in basil.meta_rubric.snippets] == ["1", "2"]
    assert basil.meta_rubric.snippets[1].title == "Pesto"
    assert [i.fact for i in basil.meta_rubric.items] == [c.text for c in basil.checks]
    assert basil.domain == "unknown" and basil.image is None


def test_spaced_tier_spelling_and_missing_lists_are_read(tmp_path):
    by_id = {q.question_id: q for q in load_release(write_release(tmp_path / "test.parquet"))}
    bridge = by_id["s-bridge"]  # `Answer Critical`, no Context list
    assert [c.tier for c in bridge.checks] == ["answer_critical", "valuable"]
    assert bridge.checks[0].text == "The response says the bridge opened in 1937."
    owl = by_id["s-owl"]  # no rubrics.Question, empty Snippets and Context
    assert owl.question == "What bird is this?" and len(owl.checks) == 1


def test_id_column_and_rubrics_question_fallbacks(tmp_path):
    row = release_rows()[0]
    row = {"id": "alt-1", "rubrics": row["rubrics"]}  # no session_id, no question column
    (q,) = load_release(write_parquet([row], tmp_path / "alt.parquet"))
    assert q.question_id == "alt-1"
    assert q.question == "What herb is this and what is it used for?"


def test_rubrics_stored_as_json_text_are_read(tmp_path):
    import json

    rows = [{**r, "rubrics": json.dumps(r["rubrics"])} for r in release_rows()]
    qs = load_release(write_parquet(rows, tmp_path / "json.parquet"))
    assert [len(q.checks) for q in qs] == [4, 2, 1]


def test_malformed_row_is_named_with_its_fields(tmp_path):
    path = write_release(tmp_path / "bad.parquet", malformed=True)
    with pytest.raises(InputError) as e:
        load_release(path)
    lines = [str(p) for p in e.value.problems]
    assert lines == [
        f"{path}[row 3]: rubrics.Answer_Critical.0.Specifics: cites snippet id(s) not in rubrics.Snippets: 9",
        f"{path}[row 3]: rubrics.Valuable.1.Ingredient: missing or empty",
    ]


def test_a_different_shape_lists_the_columns_found(tmp_path):
    path = write_parquet([{"prompt": "x", "answer": "y"}], tmp_path / "other.parquet")
    with pytest.raises(InputError) as e:
        load_release(path)
    (p,) = e.value.problems
    assert "missing column(s) session_id (or id), rubrics" in p.message
    assert "columns found: prompt, answer" in p.message


def test_not_parquet_and_missing_file(tmp_path):
    junk = tmp_path / "junk.parquet"
    junk.write_text("not parquet")
    for path, msg in ((junk, "cannot read as parquet"), (tmp_path / "none.parquet", "file not found")):
        with pytest.raises(InputError) as e:
            load_release(path)
        assert msg in e.value.problems[0].message


def test_row_with_no_items_and_duplicate_ids(tmp_path):
    rows = release_rows()[:1] + [{"session_id": "empty", "question": "q?", "rubrics": {"Snippets": []}},
                                 dict(release_rows()[0])]
    path = write_parquet(rows, tmp_path / "dupe.parquet")
    with pytest.raises(InputError) as e:
        load_release(path)
    msgs = [(p.file, p.field, p.message) for p in e.value.problems]
    assert msgs[0][0].endswith("[row 1]") and msgs[0][1] == "rubrics"
    assert "no rubric items" in msgs[0][2]
    assert msgs[1] == (f"{path}[row 2]", "session_id", f"duplicate id 's-basil' (first at {path}[row 0])")


def test_load_questions_and_cli_accept_parquet(gamut, tmp_path):
    good = write_release(tmp_path / "test.parquet")
    assert [q.question_id for q in load_questions(good)] == ["s-basil", "s-bridge", "s-owl"]
    res = gamut("validate", str(good))
    assert res.exit_code == 0 and "3 questions" in res.output
    bad = write_parquet(release_rows() + [malformed_row()], tmp_path / "bad.parquet")
    res = gamut("validate", str(bad))
    assert res.exit_code == 1
    assert "rubrics.Valuable.1.Ingredient: missing or empty" in res.output
    assert "Traceback" not in res.output
