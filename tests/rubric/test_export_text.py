"""Export and import of hostile texts: whatever a record holds, its exported YAML reads back
to the record itself."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gamut_local.rubric import revision

# Texts YAML treats specially: control characters, every kind of line break, lone surrogates,
# leading and trailing spaces, scalars that read as other types, indicators, comments, keys.
HOSTILE = ["no", "No", "yes", "on", "~", "null", "", "0x10", "0o7", "1_000", "1:20", "12e3", ".5", "-1", "+1",
           ".inf", "2020-01-01", "2001-12-14t21:59:43.10-05:00", "<<", "=", "- x", "-x", "? x", "?x", ": ", "a: b",
           "a:b", "a:", "#", "a #b", "a#b", " lead", "trail ", "two  spaces", "tab\tin", "line\nbreak", "nel\x85x",
           "ls\u2028x", "ps\u2029x", "cr\rx", "bell\x07", "del\x7f", "c1\x9b", "\ud800", "lone \udfff", "\ufeffbom",
           "\ufffe", "emoji 😀", "ünï “q” 日本語", "nbsp\xa0x", "\xa0lead", "'s'", '"d"', "[l]", "{m}", "&a", "*a",
           "!t", "|p", ">g", "%p", "@a", "`b", "...", "---", "... x", "--- x", "a\\b", "R&D", "x" * 130]

FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _record(texts: list[str]) -> dict:
    pick = lambda j: texts[j % len(texts)] or "x"  # noqa: E731
    items = [{"id": "a", "type": "simple", "tier": "answer_critical", "subject": pick(0), "fact": pick(1)},
             {"id": "b", "type": "strict_list", "tier": "valuable", "elements": [pick(2), pick(3)]},
             {"id": "c", "type": "process", "tier": "context", "steps": [{"text": pick(4)}, {"text": pick(5)}]}]
    return {"question_id": "q", "domain": pick(6), "question": pick(7), "meta_rubric": {"items": items}}


@FAST
@given(st.lists(st.sampled_from(HOSTILE) | st.text(min_size=1, max_size=30), min_size=1, max_size=8))
def test_an_exported_record_reads_back_to_itself(texts):
    from gamut_local.data.records import Question

    # The strict reader refuses a lone surrogate anywhere in a string (rundir.store), so no
    # record holding one reaches an export.
    record = _record([t for t in texts if not any("\ud800" <= ch <= "\udfff" for ch in t)] or ["x"])
    record = json.loads(json.dumps(record))  # as a JSONL reader gives it
    try:
        question = Question.model_validate(record)
    except Exception:  # a text the schema refuses (blank): not a record export is given
        return
    text = revision.export_text(record, question, "src.jsonl")
    data, _, _, problems = revision.import_text(text, "f.yaml")
    assert problems == [] and data == record
