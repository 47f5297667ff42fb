"""`tensor_parallel_size: 2` on one CPU node, through vLLM's multiprocessing executor: the tiny
Qwen3-VL (2 attention heads in its language model, 2 in its vision tower) split over two
worker processes, one core each, gives the label probabilities transformers gives unsplit.

vLLM's automatic CPU binding gives each rank a NUMA node of its own and refuses to start with
fewer ("Not enough allowed NUMA nodes to bind threads of 2 local CPUWorkers"); the engine binds
each rank to its share of the cores instead (engines/vllm_engine.py). SmolLM2-135M cannot be
split in two: its 9 heads are refused before anything loads (tests/hostile/test_inputs.py).
"""

from __future__ import annotations

import os

import psutil
import pytest
from PIL import Image

from gamut_local.engines import load_engine
from gamut_local.prompts.judge import judge_conversations
from gamut_local.vocab import JUDGE_LABELS

pytestmark = [pytest.mark.engine, pytest.mark.vllm]

# Measured 2.8e-8 apart (float32); as in test_vllm_multimodal.py, the margin allows other CPUs'
# kernels and still fails on a wrong token, image, prompt or a rank's half of the heads missing.
AGREE = 3e-3


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two ranks need two cores")
def test_two_tensor_parallel_ranks_on_one_cpu_node_give_the_unsplit_probabilities(no_engine, tiny_vlm_vllm_spec):
    split = tiny_vlm_vllm_spec.model_copy(update={
        "engine": tiny_vlm_vllm_spec.engine.model_copy(update={"tensor_parallel_size": 2})})
    convs = judge_conversations("What dish is this?", "A paella with saffron, from Valencia.",
                                ["names saffron", "says it is served cold"], Image.new("RGB", (96, 64), (200, 120, 30)))
    engine = load_engine(split)
    try:
        workers = [p for p in psutil.Process().children(recursive=True) if "Worker_TP" in " ".join(p.cmdline())]
        assert len(workers) == 2, workers  # VLLM::Worker_TP0 and VLLM::Worker_TP1
        ours = engine.classify(convs, JUDGE_LABELS)
    finally:
        engine.close()
    reference = load_engine(tiny_vlm_vllm_spec.model_copy(update={"backend": "transformers"}))
    try:
        ref = reference.classify(convs, JUDGE_LABELS)
    finally:
        reference.close()
    for a, b in zip(ours, ref, strict=True):
        assert a.prompt_tokens == b.prompt_tokens  # the same prompt, image tokens included
        assert max(abs(a.probs[k] - b.probs[k]) for k in JUDGE_LABELS) < AGREE, (a.probs, b.probs)
