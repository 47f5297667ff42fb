"""Reading a run for the viewer: the column-wise reader agrees with the record loader, and bad
files fail with the record loader's FILE:LINE messages."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gamut_local.data.records import Verdict, load_records, verdict_key
from gamut_local.errors import InputError
from gamut_local.rundir.layout import verdict_files
from gamut_local.viewer.index import open_run
from gamut_local.vocab import VERDICTS


def test_columns_hold_exactly_the_records(sample_run):
    index = open_run(sample_run)
    v = index.verdicts
    got = {(index.question_ids[q], *v.systems[s], v.judges[j], v.checks[c]): (VERDICTS[code], p)
           for q, s, c, j, code, p in zip(v.q, v.s, v.c, v.j, v.code, v.probs)}
    records = load_records(verdict_files(sample_run), Verdict, verdict_key)
    assert len(got) == len(records)
    for r in records:
        verdict, probs = got[verdict_key(r)]
        assert verdict == r["verdict"]
        if r["probs"]:
            assert [probs[i] for i in range(4)] == [r["probs"][k] for k in VERDICTS[:4]]  # full precision
        else:
            assert np.isnan(probs).all()
    key = (index.cells.q.astype(np.int64) * len(v.systems) + index.cells.s) * len(v.checks) + index.cells.c
    assert (np.diff(key) > 0).all()


def _first_file(run):
    return min((run / "verdicts" / "synthetic-judge").glob("*.jsonl"))


@pytest.mark.parametrize("damage, message", [
    (lambda r: {**r, "verdict": "great"}, "verdict"),
    (lambda r: {k: v for k, v in r.items() if k != "check_id"}, "check_id"),
    (lambda r: {**r, "tier": 3}, "tier"),
])
def test_a_bad_verdict_names_its_line(sample_run, damage, message):
    path = _first_file(sample_run)
    lines = path.read_text().splitlines()
    lines[4] = json.dumps(damage(json.loads(lines[4])))
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as e:
        open_run(sample_run)
    assert any(p.file == str(path) and p.line == 5 and message in p.field for p in e.value.problems)


def test_a_model_judge_repeating_a_key_is_refused(sample_run):
    path = _first_file(sample_run)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines + [lines[0]]) + "\n")
    with pytest.raises(InputError) as e:
        open_run(sample_run)
    assert any(p.line == len(lines) + 1 and "duplicate" in p.message for p in e.value.problems)


def test_a_torn_last_line_is_skipped_as_every_reader_skips_it(sample_run):
    before = len(open_run(sample_run).verdicts.code)
    path = _first_file(sample_run)
    path.write_text(path.read_text() + '{"question_id": "food-esp')
    assert len(open_run(sample_run).verdicts.code) == before


def test_without_a_dataset_the_error_says_what_to_pass(tmp_path):
    (tmp_path / "verdicts").mkdir()
    with pytest.raises(InputError) as e:
        open_run(tmp_path)
    assert "--dataset" in str(e.value)


def test_a_run_without_verdicts_yet_opens_empty(sample_run, client_for):
    import shutil

    shutil.rmtree(sample_run / "verdicts")
    index = open_run(sample_run)
    assert len(index.cells.key) == 0 and len(index.answers) == 39
    client = client_for(sample_run)
    assert client.get("/").status_code == 200 and client.get("/queue").status_code == 200
    assert client.get("/question/food-espresso").status_code == 200


def test_an_answers_file_nested_too_deeply_for_pyarrow_is_a_message(tmp_path):
    # pyarrow's JSON parser crashes the process past a few thousand levels; the viewer must
    # hand such a file to the strict loader, which names the line.
    from gamut_local.viewer.index import read_answers

    good = {"question_id": "q1", "model": "m", "variant": "multimodal", "response": "ok"}
    path = tmp_path / "m.multimodal.jsonl"
    path.write_text(json.dumps(good) + "\n" + '{"question_id": ' + "[" * 20000 + "]" * 20000 + "}\n")
    with pytest.raises(InputError, match=r"m\.multimodal\.jsonl:2: .*nested too deeply"):
        read_answers([path])
    path.write_text(json.dumps(good) + "\n")
    assert read_answers([path]) == {("q1", "m", "multimodal"): {"response": "ok"}}


# ---------------------------------------------------------------- answers, column-wise

GOOD_ANSWER = {"question_id": "q1", "model": "m", "variant": "multimodal", "response": "ok",
               "finish_reason": "stop", "prompt_tokens": 12, "completion_tokens": 30, "settings_hash": "abc"}


def _answer(**changes) -> str:
    return json.dumps({k: v for k, v in {**GOOD_ANSWER, **changes}.items() if v is not ...})


def _answers(*rows) -> bytes:
    return ("\n".join(rows) + "\n").encode()


# Each file is read by the viewer as by `load_records`, the strict loader every other command
# uses: the same answers, or the same FILE:LINE messages. (The viewer once read only the four
# columns it shows and let every other field through unchecked.)
ANSWER_CASES = {
    "good": _answers(_answer(), _answer(question_id="q2")),
    "empty_question_id": _answers(_answer(question_id="")),
    "unsafe_model_name": _answers(_answer(model="../m")),
    "tokens_as_text": _answers(_answer(prompt_tokens="12")),
    "tokens_as_float": _answers(_answer(prompt_tokens=12.0)),
    "tokens_as_bool": _answers(_answer(completion_tokens=True)),
    "tokens_too_big_for_int64": _answers(_answer(prompt_tokens=2**70)),
    "finish_reason_a_number": _answers(_answer(finish_reason=5)),
    "settings_hash_a_number": _answers(_answer(settings_hash=5)),
    "repeated_key_in_an_extra_field": _answers(_answer().replace('"ok"', '"ok", "x": 1, "x": 2')),
    "repeated_typed_key": _answers(_answer().replace('"prompt_tokens": 12', '"prompt_tokens": 12, "prompt_tokens": 13')),
    "variant_absent": _answers(_answer(variant=...)),
    "variant_unknown": _answers(_answer(variant="audio")),
    "response_null": _answers(_answer(response=None)),
    "response_a_number": _answers(_answer(response=5)),
    "optional_fields_null": _answers(_answer(finish_reason=None, prompt_tokens=None, completion_tokens=None,
                                             settings_hash=None)),
    "extra_field_changing_type": _answers(_answer(x=1), _answer(question_id="q2", x="a")),
    "blank_line": _answers(_answer(), "", _answer(question_id="q2")),
    "duplicate_answer": _answers(_answer(), _answer()),
    "not_utf8_in_an_extra_field": _answers(_answer(x="caf\u00e9")).replace(b"\\u00e9", b"\xe9"),
}


def _answers_or_error(read):
    try:
        return read()
    except InputError as e:
        return [str(p) for p in e.problems]


@pytest.mark.parametrize("name", sorted(ANSWER_CASES))
def test_answers_are_read_as_the_strict_loader_reads_them(tmp_path, name):
    from gamut_local.data.records import Answer, answer_key
    from gamut_local.viewer.index import read_answers

    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(ANSWER_CASES[name])
    reference = _answers_or_error(lambda: {answer_key(a): {"response": a["response"]}
                                           for a in load_records([path], Answer, answer_key)})
    assert _answers_or_error(lambda: read_answers([path])) == reference


def test_is_stale_compiles_no_check_after_the_first_call(sample_run, monkeypatch):
    """The overview asks `is_stale` of every human verdict on every load: the checks' hashes
    are computed once per run, not per call."""
    from gamut_local.viewer import index as index_module
    from gamut_local.viewer.pages import overview
    from gamut_local.vocab import TIERS

    index = index_module.open_run(sample_run)
    cell = index.cell_names(0)
    rec = {**dict(zip(("question_id", "model", "variant", "check_id"), cell)), "judge": "human-ann",
           "verdict": "meets", "tier": TIERS[int(index.cells.tier[0])], **index.shown_identity(*cell)}
    index.humans["human-ann"] = {cell: rec}
    assert not index.is_stale(rec) and rec["check_hash"] and rec["answer_hash"]

    def compiling(*args, **kwargs):
        raise AssertionError("checks compiled again")

    for module, name in ((index_module, "_checks"), (index_module, "checks_for"), (index_module, "check_hash"),
                         ("gamut_local.rubric.compiler.checks_for", None), ("gamut_local.rundir.identity.check_hash", None)):
        if name is None:
            monkeypatch.setattr(module, compiling)
        else:
            monkeypatch.setattr(module, name, compiling, raising=False)
    assert not index.is_stale(rec) and index.is_stale({**rec, "check_hash": "0" * 12})
    assert overview(index)["humans"] == {"human-ann": 1}
