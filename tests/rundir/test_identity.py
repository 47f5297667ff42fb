"""Record identity (`rundir.identity`) and moving stale records aside (`rundir.resume`)."""

from __future__ import annotations

import json

import pytest

from gamut_local.errors import InputError
from gamut_local.rundir import resume
from gamut_local.rundir.identity import check_hash, judge_settings_hash, stale_fields
from gamut_local.rundir.resume import retire_stale, scan_done
from gamut_local.rundir.store import append_jsonl, read_jsonl


def test_a_check_hash_changes_with_its_text_tier_and_kind():
    base = check_hash("The response names the drink.", "answer_critical", "fact")
    assert base == check_hash("The response names the drink.", "answer_critical", "fact")
    assert len({base, check_hash("The response names the drink!", "answer_critical", "fact"),
                check_hash("The response names the drink.", "valuable", "fact"),
                check_hash("The response names the drink.", "answer_critical", "element")}) == 4


def test_the_judge_hash_without_a_resolved_set_up_is_the_earlier_one():
    """Runs made before the resolved set-up was hashed keep their settings hash readable."""
    import hashlib

    from gamut_local.config import JudgeSpec
    from gamut_local.prompts.judge import JUDGE_TEMPLATE_HASH

    spec = JudgeSpec(name="j", path="nowhere")
    old = hashlib.sha256("\x00".join((spec.settings_hash(), JUDGE_TEMPLATE_HASH, "sees_image=False"))
                         .encode()).hexdigest()[:12]
    assert judge_settings_hash(spec) == old != judge_settings_hash(spec, {"backend": "vllm"})


def test_a_missing_field_is_stale_and_an_unknown_current_value_is_not_compared():
    assert stale_fields({"a": "1"}, {"a": "1", "b": "2"}) == ["b"]
    assert stale_fields({"a": "1"}, {"a": "1", "b": None}) == []


def _recs(n, **kw):
    return [{"k": str(i), "h": "now", **kw} for i in range(n)]


def test_stale_records_are_moved_first_to_the_history_then_out_of_the_live_file(tmp_path, monkeypatch):
    live, history = tmp_path / "live.jsonl", tmp_path / "superseded" / "live.jsonl"
    append_jsonl(live, _recs(3) + [{"k": "9", "h": "old"}])
    key = lambda r: (r["k"],)
    done, stale = scan_done([live], key, lambda r: {"h": "now"}, "answer", own=live)
    assert done == {("0",), ("1",), ("2",)} and [s.record["k"] for s in stale] == ["9"]
    # Killed between the two steps: the record is in both files, nothing is lost.
    monkeypatch.setattr(resume, "write_text_atomic", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        retire_stale(stale, live, history, "answer")
    assert [r["k"] for _, r in read_jsonl(history)] == ["9"] and len(list(read_jsonl(live))) == 4
    monkeypatch.undo()
    done, stale = scan_done([live], key, lambda r: {"h": "now"}, "answer", own=live)
    assert retire_stale(stale, live, history, "answer") == 1
    assert [r["k"] for _, r in read_jsonl(live)] == ["0", "1", "2"]
    assert [r["k"] for _, r in read_jsonl(history)] == ["9", "9"]


def test_a_key_twice_is_an_error_and_stale_records_elsewhere_are_not_moved(tmp_path):
    live, other = tmp_path / "a.jsonl", tmp_path / "a.shard-0-of-2.jsonl"
    append_jsonl(live, _recs(1))
    append_jsonl(other, _recs(1))
    with pytest.raises(InputError, match="duplicate answer key"):
        scan_done([live, other], lambda r: (r["k"],), lambda r: {}, "answer", own=live)
    other.write_text(json.dumps({"k": "5", "h": "old"}) + "\n")
    _, stale = scan_done([live, other], lambda r: (r["k"],), lambda r: {"h": "now"}, "answer", own=live)
    with pytest.raises(InputError, match="another shard layout"):
        retire_stale(stale, live, tmp_path / "h.jsonl", "answer")
    assert other.read_text().count("\n") == 1
