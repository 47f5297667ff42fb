"""Evidence for drafting: JSONL or a folder of text/Markdown files, long files split."""

from __future__ import annotations

import pytest

from gamut_local.data.evidence import load_evidence, load_questions_to_draft, split_text
from gamut_local.errors import InputError
from gamut_local.demo.authoring import sample_records, write_authoring_inputs


def test_jsonl_and_folder_give_the_same_snippets(tmp_path):
    q1, ev_jsonl = write_authoring_inputs(tmp_path / "a", 3)
    _, ev_dir = write_authoring_inputs(tmp_path / "b", 3, as_folder=True)
    a, b = load_evidence(ev_jsonl), load_evidence(ev_dir)
    assert set(a) == set(b) == {r["question_id"] for r in sample_records(3)}
    for qid in a:
        assert sorted((s.id, s.title, s.text) for s in a[qid]) == sorted((s.id, s.title, s.text) for s in b[qid])
    assert [q.question_id for q in load_questions_to_draft(q1)] == [r["question_id"] for r in sample_records(3)]


def test_a_long_file_is_split_at_paragraphs_with_numbered_ids(tmp_path):
    folder = tmp_path / "ev" / "q1"
    folder.mkdir(parents=True)
    paras = [f"Paragraph {i} " + "word " * 60 for i in range(6)]
    (folder / "history.md").write_text("# History of coffee\n\n" + "\n\n".join(paras) + "\n")
    snippets = load_evidence(tmp_path / "ev", max_chars=700)["q1"]
    assert [s.id for s in snippets] == [f"history-{i}" for i in range(1, len(snippets) + 1)]
    assert len(snippets) >= 3 and all(len(s.text) <= 700 for s in snippets)
    assert snippets[0].title == f"History of coffee (part 1 of {len(snippets)})"
    assert "".join(s.text for s in snippets).replace("\n", "").replace(" ", "") == \
        "".join(paras).replace(" ", "")


def test_split_text_cuts_a_paragraph_longer_than_the_limit():
    parts = split_text("A sentence here. " * 100, max_chars=200)
    assert all(len(p) <= 200 for p in parts) and len(parts) > 5


def test_bad_evidence_rows_and_repeated_ids_are_all_named(tmp_path):
    path = tmp_path / "ev.jsonl"
    path.write_text('{"question_id": "q", "id": "s", "title": "t", "text": "x"}\n'
                    '{"question_id": "q", "id": "s", "title": "t", "text": "y"}\n'
                    '{"question_id": "q", "id": "s2", "text": "y"}\n')
    with pytest.raises(InputError) as e:
        load_evidence(path)
    got = [str(p) for p in e.value.problems]
    assert f"{path}:3: title: Field required" in got
    assert f"{path}: id: question 'q': snippet id 's' is repeated" in got


def test_questions_converted_from_the_release_can_be_redrafted(tmp_path):
    # A release question carries its checks, snippets and text-only checks; `compile` writes
    # them out and `draft` must take such a file (it redrafts from --evidence).
    from gamut_local.data.dataset import load_questions
    from gamut_local.rundir.store import write_jsonl
    from tests.support.release import write_release

    questions = load_questions(write_release(tmp_path / "test.parquet"))
    path = tmp_path / "release.jsonl"
    write_jsonl(path, [q.model_dump(mode="json", exclude_none=True) for q in questions])
    drafts = load_questions_to_draft(path)
    assert [q.question_id for q in drafts] == [q.question_id for q in questions]
    assert [len(q.snippets or []) for q in drafts] == [len(q.snippets or []) for q in questions]
    assert any(q.snippets for q in drafts)
