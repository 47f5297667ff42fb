"""The label readout and the reasoning split without a model: real tokenizers (the tiny
Qwen3-VL's byte-level BPE, trained on the spot), vLLM-shaped step outputs, engine arguments."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest

from gamut_local.config import JudgeSpec, ModelSpec
from gamut_local.engines import FIRST_TOKEN, STRUCTURED_CHOICE, judge_identity, load_engine
from gamut_local.engines.labels import (
    LabelReadout,
    assistant_prefix,
    in_reasoning,
    label_logprobs,
    label_readout_for,
    normalise,
)
from gamut_local.engines.reasoning import Thinking, separate, split_reasoning
from gamut_local.engines.vllm_engine import VllmEngine, engine_kwargs
from gamut_local.errors import InputError
from gamut_local.demo.smollm2 import THINKING_TEMPLATE
from gamut_local.vocab import JUDGE_LABELS

@pytest.fixture(scope="module")
def tokenizer():
    pytest.importorskip("transformers")  # the engines' install (`make test` has it, test-fast may not)
    from gamut_local.demo.tiny_vlm import build_tokenizer

    return build_tokenizer()


def tokenizer_folder(tmp_path, tokenizer, template: str | None = None, vision: bool = True):
    """A folder a judge config can name: a config.json and the tokenizer (no weights needed)."""
    tokenizer.save_pretrained(tmp_path)
    if template is not None:
        (tmp_path / "chat_template.jinja").write_text(template)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llava", "vision_config": {"depth": 2}} if vision
                                                     else {"model_type": "llama"}))
    return str(tmp_path)


def step_output(step: dict[int, float], text: str = "") -> SimpleNamespace:
    """A vLLM RequestOutput as `_read` sees it: one decoding step's log-probabilities."""
    logprobs = {t: SimpleNamespace(logprob=lp, decoded_token=None) for t, lp in step.items()}
    return SimpleNamespace(outputs=[SimpleNamespace(logprobs=[logprobs] if step else [], text=text)],
                           prompt_token_ids=[1, 2, 3], num_cached_tokens=0)


READOUT = LabelReadout(JUDGE_LABELS, FIRST_TOKEN, "", (10, 20, 30, 40), 17,
                       ((10, 11), (20,), (30, 31), (40,)))


def test_a_label_the_step_did_not_report_reads_as_zero_and_does_not_crash():
    """`format_top` looked every label up in the tokens the step reported: a KeyError, and with
    it a whole judge job aborted."""
    c = VllmEngine._read(None, step_output({10: math.log(0.6), 30: math.log(0.2)}), READOUT, FIRST_TOKEN)
    assert c.label == "meets" and c.method == FIRST_TOKEN
    assert c.probs == pytest.approx({"meets": 0.75, "partially_meets": 0.0, "missing": 0.25, "contradicts": 0.0})
    assert c.raw.startswith("meets=0.7500 missing=0.2500")
    nothing = VllmEngine._read(None, step_output({}, text="??"), READOUT, FIRST_TOKEN)
    assert nothing.label is None and nothing.probs == {} and nothing.raw == "??"


def test_a_labels_probability_sums_its_spellings():
    lp = {10: math.log(0.3), 11: math.log(0.2), 20: math.log(0.1), 31: math.log(0.4)}
    probs = normalise(label_logprobs(READOUT, lp))
    assert probs == pytest.approx({"meets": 0.5, "partially_meets": 0.1, "missing": 0.4, "contradicts": 0.0})


def test_spelling_tokens_are_counted_once_each_and_never_shared(tokenizer):
    prefix = assistant_prefix(tokenizer)
    r = label_readout_for(tokenizer, JUDGE_LABELS, prefix)
    assert r.method == FIRST_TOKEN
    flat = r.all_token_ids()
    assert len(flat) == len(set(flat))  # no token counts for two labels
    assert [ids[0] for ids in r.token_ids] == list(r.first_token_ids)  # the primary spelling first
    # This tokenizer starts some other spellings (" meets", "Meets", ...) with tokens of their own.
    assert sum(len(ids) for ids in r.token_ids) > len(JUDGE_LABELS)
    base = tokenizer.encode(prefix, add_special_tokens=False)
    for label, ids in zip(r.labels, r.token_ids):
        for t in ids:  # each counted token begins some spelling of its label after the prefix
            assert any(tokenizer.encode(prefix + s, add_special_tokens=False)[len(base)] == t
                       for s in (label, " " + label, label.capitalize(), " " + label.capitalize()))


def test_upper_case_spellings_are_not_counted(smollm2_dir):
    """With SmolLM2's tokenizer `MISSING` starts with `M` and `PARTIALLY_MEETS` with `PAR`:
    capitals that begin countless other words, so counting them inflated those labels."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    r = label_readout_for(tok, JUDGE_LABELS)
    counted = {tok.decode([t]).strip() for t in r.all_token_ids()}
    assert {"Me", "Part", "Missing", "Cont"} <= counted  # Capitalised spellings still count
    assert not counted & {"M", "ME", "PAR", "CON"}


def test_a_judge_that_does_not_see_the_image_reserves_no_image_capacity(tmp_path, tokenizer):
    path = tokenizer_folder(tmp_path, tokenizer)
    blind = JudgeSpec(name="j", path=path, backend="vllm")
    seeing = JudgeSpec(name="j", path=path, backend="vllm", sees_image=True)
    text_only = ModelSpec(name="m", path=path, backend="vllm", vision=False)
    assert engine_kwargs(blind, path, on_cpu=True)["limit_mm_per_prompt"] == {"image": 0, "video": 0}
    assert engine_kwargs(text_only, path, on_cpu=True)["limit_mm_per_prompt"] == {"image": 0, "video": 0}
    assert engine_kwargs(seeing, path, on_cpu=True)["limit_mm_per_prompt"] == {"image": 1, "video": 0}


def test_judge_identity_is_resolved_deterministic_and_tells_back_ends_apart(tmp_path, tokenizer):
    path = tokenizer_folder(tmp_path, tokenizer)
    vllm_judge = JudgeSpec(name="j", path=path, backend="vllm")
    hf_judge = JudgeSpec(name="j", path=path, backend="transformers")
    a, b = judge_identity(vllm_judge), judge_identity(vllm_judge.model_copy())
    assert a == b and set(a) == {"backend", "engine", "readout", "label_tokens"}
    assert all(isinstance(v, str) for v in a.values())
    other = judge_identity(hf_judge)
    assert other != a and (a["backend"], other["backend"]) == ("vllm", "transformers")
    assert a["engine"].startswith("vllm") and other["engine"].startswith("transformers ")
    assert a["readout"] == FIRST_TOKEN
    tokens = json.loads(a["label_tokens"])
    assert list(tokens) == list(JUDGE_LABELS) and len(tokens["meets"]) >= 1


def test_a_judge_whose_label_would_be_read_inside_its_thinking_is_refused(tmp_path, tokenizer):
    path = tokenizer_folder(tmp_path, tokenizer, THINKING_TEMPLATE, vision=False)
    thinking = JudgeSpec(name="thinker", path=path, backend="vllm", vision=False)
    with pytest.raises(InputError, match=r"chat_template_kwargs: thinker: its chat template opens a "
                                         r"reasoning block \(<think>\)"):
        judge_identity(thinking)
    with pytest.raises(InputError, match="enable_thinking: false"):
        load_engine(thinking)  # refused before anything loads
    off = thinking.model_copy(update={"chat_template_kwargs": {"enable_thinking": False}})
    assert judge_identity(off)["readout"] in (FIRST_TOKEN, STRUCTURED_CHOICE)
    assert in_reasoning(assistant_prefix(tokenizer.__class__.from_pretrained(path)))
    assert not in_reasoning(assistant_prefix(tokenizer.__class__.from_pretrained(path), {"enable_thinking": False}))


class _Words:
    """A whitespace tokenizer: enough to count tokens for `separate`."""

    def encode(self, text, add_special_tokens=False):
        return text.split()

    def decode(self, ids, skip_special_tokens=False):
        return " ".join(ids)


@pytest.mark.parametrize("text, opened, reasoning, answer", [
    ("plan it</think>\n\nThe dish is paella.", True, "plan it", "The dish is paella."),
    ("<think>a</think>b</think>\n\nAnswer.", False, "a</think>b", "Answer."),  # up to the last one
    ("still thinking", True, "still thinking", ""),  # never closed: no answer
    ("A plain answer.", False, None, "A plain answer."),  # did not think
])
def test_the_template_rule_splits_reasoning_from_the_answer(text, opened, reasoning, answer):
    assert split_reasoning(text, Thinking(opened)) == (reasoning, answer)


def test_the_answer_budget_counts_the_answer_alone():
    words = _Words()
    text = "one two three four five</think> six seven eight nine"
    out = separate(text, text.split(), "stop", words, Thinking(True), answer_budget=3)
    assert out == {"text": "six seven eight", "finish_reason": "length",
                   "reasoning": "one two three four five", "reasoning_tokens": 5}
    roomy = separate(text, text.split(), "stop", words, Thinking(True), answer_budget=10)
    assert roomy["text"] == "six seven eight nine" and roomy["finish_reason"] == "stop"
    assert separate("plain", ["plain"], "stop", words, None, 10)["reasoning"] is None
